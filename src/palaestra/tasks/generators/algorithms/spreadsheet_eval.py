"""spreadsheet-eval: recalculate a sheet of cells whose formulas reference other cells
(parsing and evaluation over a dependency graph).

Easy: integer formulas with ``+ - *``, parentheses and cell references (precedence and left
associativity matter; a missing cell reads as 0), and reference chains longer than Python's
recursion limit allows a naive recursive evaluator. Medium adds unary minus, integer division
truncating toward zero, ``#DIV/0!`` errors that propagate, and ``SUM/MIN/MAX``. Hard adds
rectangular ranges (``A1:C4``, empty cells skipped) and reference cycles (``#CYCLE!`` on every
cell of a cycle, with errors propagating by a left-to-right rule).

The hidden test's sheets are drawn from the task's secret when the task is generated and ship,
with the reference's values, as the declarative harness's cases: a verification runs only the
agent's code.
"""

from __future__ import annotations

import functools
import json

from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.algorithms._spreadsheet_tests import tests
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_NAMES = [
    ("sheet.py", "evaluate_sheet"),
    ("cells.py", "recalculate"),
    ("ledger_calc.py", "compute_cells"),
    ("budget_grid.py", "evaluate_cells"),
]

# The reference evaluator (hard tier: every feature). Wrong solutions are edits of it.
_RIGHT = r'''"""Recalculation of the sheet."""

import re

CYCLE, DIV0 = "#CYCLE!", "#DIV/0!"
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+)|(?P<cell>[A-Z][1-9]\d*)|(?P<fn>SUM|MIN|MAX)|(?P<op>[-+*/(),:]))"
)


class CellError(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


def _tokens(text):
    out, pos, text = [], 0, text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise SyntaxError(f"cannot read formula {text!r} at {pos}")
        pos = m.end()
        out.append((m.lastgroup, m.group(m.lastgroup)))
    out.append(("end", ""))
    return out


class _Parser:
    def __init__(self, text):
        self.toks, self.i = _tokens(text), 0

    def parse(self):
        node = self.expr()
        self.take("end")
        return node

    def peek(self):
        return self.toks[self.i]

    def take(self, expected=None):
        tok = self.toks[self.i]
        if expected is not None and expected not in tok:
            raise SyntaxError(f"expected {expected!r}, found {tok[1]!r}")
        self.i += 1
        return tok

    def expr(self):
        node = self.term()
        while self.peek()[1] in ("+", "-"):
            node = (self.take()[1], node, self.term())
        return node

    def term(self):
        node = self.unary()
        while self.peek()[1] in ("*", "/"):
            node = (self.take()[1], node, self.unary())
        return node

    def unary(self):
        if self.peek()[1] == "-":
            self.take()
            return ("neg", self.unary())
        return self.primary()

    def primary(self):
        kind, val = self.take()
        if kind == "num":
            return ("num", int(val))
        if kind == "cell":
            return ("ref", val)
        if kind == "fn":
            self.take("(")
            args = [self.arg()]
            while self.peek()[1] == ",":
                self.take()
                args.append(self.arg())
            self.take(")")
            return ("fn", val, args)
        if val == "(":
            node = self.expr()
            self.take(")")
            return node
        raise SyntaxError(f"unexpected {val!r}")

    def arg(self):
        kind, val = self.peek()
        if kind == "cell" and self.toks[self.i + 1][1] == ":":
            self.take()
            self.take(":")
            return ("range", val, self.take("cell")[1])
        return self.expr()


def _split(cell):
    return cell[0], int(cell[1:])


def _expand(a, b):
    (ca, ra), (cb, rb) = _split(a), _split(b)
    cols = [chr(c) for c in range(min(ord(ca), ord(cb)), max(ord(ca), ord(cb)) + 1)]
    return [f"{c}{r}" for r in range(min(ra, rb), max(ra, rb) + 1) for c in cols]


def _refs(node, out):
    kind = node[0]
    if kind == "ref":
        out.append(node[1])
    elif kind == "range":
        out.extend(_expand(node[1], node[2]))
    elif kind == "neg":
        _refs(node[1], out)
    elif kind == "fn":
        for a in node[2]:
            _refs(a, out)
    elif kind != "num":
        _refs(node[1], out)
        _refs(node[2], out)
    return out


def _read(cell, sheet, values):
    v = values[cell]
    if isinstance(v, str):
        raise CellError(v)
    return v


def _eval(node, sheet, values):
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "ref":
        return _read(node[1], sheet, values) if node[1] in sheet else 0
    if kind == "neg":
        return -_eval(node[1], sheet, values)
    if kind == "fn":
        nums = []
        for a in node[2]:
            if a[0] == "range":
                nums.extend(_read(c, sheet, values) for c in _expand(a[1], a[2]) if c in sheet)
            else:
                nums.append(_eval(a, sheet, values))
        if not nums:
            return 0
        return {"SUM": sum, "MIN": min, "MAX": max}[node[1]](nums)
    a = _eval(node[1], sheet, values)
    b = _eval(node[2], sheet, values)
    if kind == "+":
        return a + b
    if kind == "-":
        return a - b
    if kind == "*":
        return a * b
    if b == 0:
        raise CellError(DIV0)
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _cyclic(deps):
    """Cells on a reference cycle (Kosaraju's strongly connected components, iteratively)."""
    order, seen = [], set()
    for root in deps:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(deps[root]))]
        while stack:
            node, it = stack[-1]
            for nxt in it:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, iter(deps[nxt])))
                    break
            else:
                stack.pop()
                order.append(node)
    users = {c: [] for c in deps}
    for c, ds in deps.items():
        for d in ds:
            users[d].append(c)
    comp, cyclic = set(), set()
    for root in reversed(order):
        if root in comp:
            continue
        comp.add(root)
        members, stack = [root], [root]
        while stack:
            for m in users[stack.pop()]:
                if m not in comp:
                    comp.add(m)
                    members.append(m)
                    stack.append(m)
        if len(members) > 1 or root in deps[root]:
            cyclic.update(members)
    return cyclic


def _value(cell, sheet, asts, values):
    if cell not in asts:
        return sheet[cell]
    try:
        return _eval(asts[cell], sheet, values)
    except CellError as e:
        return e.code


def FN(sheet):
    asts, deps = {}, {}
    for cell, raw in sheet.items():
        if isinstance(raw, str):
            asts[cell] = _Parser(raw[1:]).parse()
            deps[cell] = [d for d in _refs(asts[cell], []) if d in sheet]
        else:
            deps[cell] = []
    values = {c: CYCLE for c in _cyclic(deps)}
    waiting = {c: 0 for c in sheet}
    users = {c: [] for c in sheet}
    for c, ds in deps.items():
        for d in ds:
            if d not in values:
                waiting[c] += 1
                users[d].append(c)
    ready = [c for c in sheet if waiting[c] == 0 and c not in values]
    while ready:
        cell = ready.pop()
        values[cell] = _value(cell, sheet, asts, values)
        for u in users[cell]:
            waiting[u] -= 1
            if waiting[u] == 0 and u not in values:
                ready.append(u)
    return {c: values[c] for c in sheet}
'''

# a - b - c read as a - (b - c): the classic right-recursive grammar bug.
_RIGHT_ASSOC = _RIGHT.replace(
    """        node = self.term()
        while self.peek()[1] in ("+", "-"):
            node = (self.take()[1], node, self.term())
        return node""",
    """        node = self.term()
        if self.peek()[1] in ("+", "-"):
            return (self.take()[1], node, self.expr())
        return node""",
)
# One precedence level for all four operators, evaluated left to right.
_NO_PRECEDENCE = _RIGHT.replace(
    'while self.peek()[1] in ("+", "-"):', 'while self.peek()[1] in ("+", "-", "*", "/"):'
).replace(
    """        while self.peek()[1] in ("*", "/"):
            node = (self.take()[1], node, self.unary())
""",
    "",
)
# Memoised recursion over the cells: right answers, until a chain exceeds the recursion limit.
_RECURSIVE = _RIGHT.replace(
    """    values = {c: CYCLE for c in _cyclic(deps)}
    waiting""",
    """    values = _Lazy({c: CYCLE for c in _cyclic(deps)})
    values.sheet, values.asts = sheet, asts
    return {c: values[c] for c in sheet}
    waiting""",
) + (
    """

class _Lazy(dict):
    def __missing__(self, cell):
        value = _value(cell, self.sheet, self.asts, self)
        self[cell] = value
        return value
"""
)
# Python's floor division instead of truncation toward zero.
_FLOOR_DIV = _RIGHT.replace(
    """    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q""",
    "    return a // b",
)
# Empty cells inside a range read as 0 (they must be skipped).
_RANGE_ZERO = _RIGHT.replace(
    "nums.extend(_read(c, sheet, values) for c in _expand(a[1], a[2]) if c in sheet)",
    "nums.extend(_read(c, sheet, values) if c in sheet else 0 for c in _expand(a[1], a[2]))",
)
# Every cell that depends on a cycle, directly or not, is reported as #CYCLE! itself.
_CYCLE_DOWNSTREAM = _RIGHT.replace(
    "    return {c: values[c] for c in sheet}",
    "    return {c: values.get(c, CYCLE) for c in sheet}",
).replace("values = {c: CYCLE for c in _cyclic(deps)}", "values = {}")


def _examples(tier: str) -> list[tuple[dict, dict]]:
    sheets = [
        {"A1": 10, "A2": "=A1 * 2 + 3", "B1": "=A2 - A1 - 1", "B2": "=(A1 + Z9) * 2"},
    ]
    if tier != "easy":
        sheets.append({"A1": -7, "A2": "=A1 / 2", "A3": "=MAX(A1, 4 / (A1 + 7), 1)", "B1": "=A2*2"})
    if tier == "hard":
        sheets.append(
            {"A1": 1, "A3": 5, "B1": "=SUM(A1:A3) - MIN(A1:A3)", "C1": "=C2", "C2": "=C1+1"}
        )
    return [(s, _reference(s)) for s in sheets]


def _reference(sheet: dict) -> dict:
    return _evaluator()(sheet)


@functools.cache
def _evaluator():
    namespace: dict = {}
    exec(compile(_RIGHT.replace("def FN(", "def evaluate("), "<reference>", "exec"), namespace)
    return namespace["evaluate"]


@family(
    "spreadsheet-eval",
    category="algorithms",
    summary="Recalculate a sheet of formulas: parsing, precedence, long reference chains; "
    "errors and functions (medium), ranges and cycles (hard)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    module, fn = rng.choice(_NAMES)
    tier = spec.tier
    chain_n = spec.iscale(1_500, 6_000)
    secret = rng.randrange(2**31)

    grammar = [
        "- integer literals (`0`, `42`; no sign: `-3` only where unary minus is allowed),",
        "- cell references: one column letter `A`-`Z` and a row number `1`-`999` (`B12`),",
        "- the binary operators `+`, `-`, `*` (`*` binds tighter; operators of the same "
        "precedence group left to right, so `10 - 4 - 3` is `3`), and parentheses,",
    ]
    rules = [
        "A reference to a cell that is not in the sheet reads as `0`.",
        "Whitespace may appear between any two tokens.",
    ]
    if tier != "easy":
        grammar += [
            "- unary minus (`-A1`, `2 * -3`, `--4`), binding tighter than `*` and `/`,",
            "- `/`: integer division **truncating toward zero** (`-7 / 2` is `-3`), same "
            "precedence as `*`,",
            "- functions `SUM(...)`, `MIN(...)`, `MAX(...)` of one or more comma-separated "
            "expressions,",
        ]
        rules += [
            "Division by zero makes the cell's value the string `#DIV/0!`. A formula that "
            "reads a cell holding an error gets that error as its value. Operands are evaluated "
            "left to right (the left operand of an operator before the right one, function "
            "arguments in order) and the first error met is the result.",
        ]
    if tier == "hard":
        grammar += [
            "- ranges `A1:C4` as function arguments (only there): every cell of the rectangle, "
            "read row by row, left to right in a row; cells of a range that are not in the "
            "sheet are skipped (`MIN` of a range with cells `5` and `7` and holes is `5`); a "
            "function with no value at all gives `0`,",
        ]
        rules += [
            "A cell on a reference cycle (it depends on itself, directly or through other "
            "cells or ranges) has the value `#CYCLE!`. Cells that only read a cycle are not on "
            "it: they follow the error rule above (so `=1/0 + C1` is `#DIV/0!` even when `C1` "
            "is on a cycle).",
        ]
    examples = "\n".join(f">>> {fn}({json.dumps(s)})\n{json.dumps(v)}" for s, v in _examples(tier))
    instruction = (
        f"""\
# Recalculate the budget sheet

Our budgeting tool stores a sheet as a dict from cell name to content and needs a recalculation
engine. Implement `{fn}(sheet)` in `/app/{module}` (it raises `NotImplementedError` now) that
returns a dict mapping **every** cell of `sheet` to its value.

A cell's content is either an `int` (its value) or a formula: a string starting with `=`.
Formulas are integer expressions made of:

"""
        + "\n".join(grammar)
        + "\n\n"
        + "\n".join(f"- {r}" for r in rules)
        + f"""

Sheets may hold chains of references {chain_n:,} cells long (`A2` reads `A1`, `A3` reads `A2`,
...), and must be recalculated within a few seconds. Do not use `eval`/`exec`; only the
standard library is available. Keep the module path and function name.

Examples:

```python
{examples}
```
"""
    )
    stub = (
        f'"""Recalculation of the sheet."""\n\n\ndef {fn}(sheet):\n    raise NotImplementedError\n'
    )

    def src(text: str) -> str:
        return text.replace("def FN(", f"def {fn}(")

    wrong = {
        "right-assoc-minus": src(_RIGHT_ASSOC),
        "no-precedence": src(_NO_PRECEDENCE),
        "recursive-eval": src(_RECURSIVE),
    }
    if tier != "easy":
        wrong["floor-division"] = src(_FLOOR_DIV)
    if tier == "hard":
        wrong["range-holes-as-zero"] = src(_RANGE_ZERO)
        wrong["cycle-marks-dependents"] = src(_CYCLE_DOWNSTREAM)
    return hs.task(
        instruction=instruction,
        workspace={module: stub},
        tests=tests(module, fn, tier, chain_n, secret, _reference),
        answer_path=module,
        reference=src(_RIGHT),
        wrongs=wrong,
        note="recursive-descent parser, SCCs, Kahn order",
        tags=("python", "parsing", "graphs"),
        verifier_timeout_sec=240.0,
    )
