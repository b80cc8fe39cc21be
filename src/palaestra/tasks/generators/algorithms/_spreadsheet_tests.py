"""spreadsheet-eval's hidden test as data: its sheets, drawn from the task's secret when the
task is generated, with the reference's values, as the declarative harness's cases (a
verification runs only the agent's code)."""

from __future__ import annotations

import random
from collections.abc import Callable

from palaestra.tasks.generators import harness_spec as hs

# The hidden test's fixed sheets, by the tier that adds them.
_FIXED = {
    "easy": [
        {},
        {"A1": 5},
        {"A1": "=10 - 4 - 3", "A2": "=2 + 3 * 4", "A3": "=20-A1-A2-1"},
        {"B1": "=Q7 + 1", "B2": "=(1 + 2) * (3 - 5) - B1 * 2"},
        {"C1": 3, "C2": "=C1*C1-C1*2", "C3": "=  C2 *2- C1 "},
    ],
    "medium": [
        {"A1": -7, "A2": "=A1/2", "A3": "=7/-2", "A4": "=-A1/-2", "A5": "=-8/3*3"},
        {"A1": "=1/0", "A2": "=A1+1", "A3": "=MAX(1, A2)", "A4": "=0/(2-2) + Q1"},
        {"A1": "=MIN(4, -9, 2)", "A2": "=SUM(1,2,3)-MAX(A1,0)", "A3": "=--5 - -A1"},
    ],
    "hard": [
        {"A1": 5, "A3": 7, "B1": "=MIN(A1:A3)", "B2": "=MAX(A3:A1) - SUM(C1:C9)"},
        {"C1": "=C2", "C2": "=C3 + 1", "C3": "=C1", "D1": "=1/0 + C1", "D2": "=C1 + 1/0"},
        {"E1": "=SUM(E1:E2)", "E2": 4, "F1": "=E2 * 2", "F2": "=F1 + E1"},
        {"G1": "=MIN(A1:B2)", "A1": "=G1", "H1": "=G1/0", "H2": 3},
    ],
}


def _random_sheet(rng: random.Random, tier: str, n: int, cycles: int) -> dict:
    """n cells of random formulas over the cells before them (and some missing cells), then
    ``cycles`` pairs of cells made to read each other, in random order."""
    mid, hard = tier != "easy", tier == "hard"

    def sp():
        return rng.choice(["", "", " ", "  "])

    def gen_expr(cells, depth):
        out = gen_term(cells, depth)
        for _ in range(rng.randrange(0, 3)):
            out += sp() + rng.choice("+--") + sp() + gen_term(cells, depth)
        return out

    def gen_term(cells, depth):
        out = gen_factor(cells, depth)
        for _ in range(rng.randrange(0, 2)):
            op = rng.choice("*/") if mid else "*"
            out += sp() + op + sp() + gen_factor(cells, depth)
        return out

    def gen_factor(cells, depth):
        r = rng.random()
        if depth <= 0 or r < 0.35:
            return str(rng.randrange(0, 12))
        if r < 0.7:
            return rng.choice(cells) if cells and rng.random() < 0.85 else rng.choice("XYZ") + "99"
        if r < 0.8:
            return "(" + gen_expr(cells, depth - 1) + ")"
        if mid and r < 0.88:
            return "-" + gen_factor(cells, depth - 1)
        if mid:
            args = []
            for _ in range(rng.randrange(1, 4)):
                if hard and cells and rng.random() < 0.5:
                    args.append(rng.choice(cells) + ":" + rng.choice(cells))
                else:
                    args.append(gen_expr(cells, depth - 1))
            return rng.choice(["SUM", "MIN", "MAX"]) + "(" + ("," + sp()).join(args) + ")"
        return "(" + gen_expr(cells, depth - 1) + ")"

    pool = [c + str(r) for c in "ABCDEFG" for r in range(1, 9)]
    cells = rng.sample(pool, n)
    sheet: dict = {}
    for i, cell in enumerate(cells):
        if i < 3 or rng.random() < 0.25:
            sheet[cell] = rng.randrange(-20, 40)
        else:
            sheet[cell] = "=" + sp() + gen_expr(cells[:i], 2)
    for _ in range(cycles):
        a, b = rng.sample(cells[3:], 2)
        sheet[a] = "=" + b + " + 1"
        sheet[b] = "=" + rng.choice([a, "SUM(" + a + ":" + a + ")"]) + " * 2"
    items = list(sheet.items())
    rng.shuffle(items)
    return dict(items)


def cases(tier: str, chain_n: int, secret: int, reference: Callable[[dict], dict]) -> dict:
    """What the hidden test checks, drawn from ``secret`` once, when the task is generated, with
    the reference's values: 45 sheets (the fixed ones, then random
    ones whose numbers stay printable) and a reference chain of ``chain_n`` cells."""
    rng = random.Random(secret)
    sheets = _FIXED["easy"] + (_FIXED["medium"] if tier != "easy" else [])
    sheets += _FIXED["hard"] if tier == "hard" else []
    values = [reference(s) for s in sheets]
    while len(sheets) < 45:
        n = rng.randrange(6, 30)
        sheet = _random_sheet(rng, tier, n, rng.randrange(0, 3) if tier == "hard" else 0)
        value = reference(sheet)
        if all(isinstance(v, str) or abs(v) < 10**12 for v in value.values()):
            sheets.append(sheet)
            values.append(value)
    names = [c + str(r) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" for r in range(1, 1000)]
    rng.shuffle(names)
    chain = names[:chain_n]
    long_sheet: dict = {chain[0]: rng.randrange(100)}
    for prev, cell in zip(chain, chain[1:], strict=False):
        long_sheet[cell] = "=" + prev + rng.choice([" + 1", " - 2", "+3", " * 1"])
    items = list(long_sheet.items())
    rng.shuffle(items)
    long_sheet = dict(items)
    return {"sheets": (sheets, values), "chain": (long_sheet, reference(long_sheet))}


#: The first child: every sheet, then whether the input is unmodified.
_SHEETS = """
import copy
from {module} import {fn}
before = copy.deepcopy(INPUT)
emit([{fn}(s) for s in INPUT] + [INPUT == before])
"""


def tests(module: str, fn: str, tier: str, chain_n: int, secret: int, reference) -> dict:
    """The task's ``tests/``: :func:`cases` for the declarative harness; the sheets in one
    child, the long chain in another under 3 s of CPU."""
    data = cases(tier, chain_n, secret, reference)
    (sheets, values), (chain, chain_values) = data["sheets"], data["chain"]
    checks = [
        hs.Case(f"sheet {i} ({len(sheet)} cells)", want=value)
        for i, (sheet, value) in enumerate(zip(sheets, values, strict=True))
    ]
    checks += [
        hs.Case("input not modified", want=True),
        hs.Case(f"a chain of {chain_n} references", want=chain_values),
    ]
    name = module[:-3]
    return hs.tests(
        answer=hs.python_calls(
            hs.python_call(_SHEETS.format(module=name, fn=fn), sheets, cases=len(sheets) + 1),
            hs.python_call(f"from {name} import {fn}\nemit([{fn}(INPUT)])", chain, cpu=3),
        ),
        cases=checks,
        compare=hs.compare("equal"),
        limits=hs.limits(timeout=60),
        timeout=200,
    )
