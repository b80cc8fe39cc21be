"""Bug injection by AST mutation: each class finds its sites in a module, each site is one edit.

A :class:`~.mutation.Mutator` looks at every node inside a function body (where a test's call reaches it:
the coverage map is by function) and proposes :class:`~.edits.Edit`\\ s of the original text.
:func:`sites` lists every site of every mutator in a module, in a fixed order (mutator, then
position), so a site is named by ``(path, mutator, index)`` and a seed's sample of sites is the
same on every machine. SWE-smith's procedural classes and more:

==================== ==========================================================================
invert-condition     ``if c:`` -> ``if not c:`` (and ``if not c:`` -> ``if c:``)
compare-operator     ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``, ``in``, ``is``
boolean-operator     ``and`` <-> ``or``
arithmetic-operator  ``+`` <-> ``-`` (not on string literals)
off-by-one           an index, slice bound or ``range`` argument moved by one; ``x ± 1`` -> ``x``
remove-statement     a call, an augmented assignment, a re-assignment removed
remove-guard         ``if ...: raise`` (or return, continue, break) removed
swap-arguments       the first two positional arguments of a call swapped
change-constant      a number in the code moved (``n`` -> ``n + 1``), ``True`` <-> ``False``
change-default       a parameter's default number or bool changed
wrong-return         ``return x`` -> ``return None``; a boolean result negated
broken-exception     an ``except`` block's body replaced by ``raise`` (the error escapes)
==================== ==========================================================================
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from palaestra.tasks.synth.edits import Edit, apply
from palaestra.tasks.synth.mutation import Mutator, Scope, Site

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_ATOMIC = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)
_NO_SWAP = frozenset(
    {
        "max",
        "min",
        "print",
        "isinstance",
        "issubclass",
        "getattr",
        "setattr",
        "hasattr",
        "super",
        "zip",
        "map",
        "filter",
        "sum",
        "any",
        "all",
        "dict",
        "set",
        "tuple",
        "list",
        "format",
        "append",
        "warn",
        "log",
        "debug",
        "info",
        "warning",
        "error",
    }
)


def _negated(node: ast.expr, scope: Scope) -> str:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return scope.text(node.operand)
    text = scope.text(node)
    return f"not {text}" if isinstance(node, _ATOMIC) else f"not ({text})"


class InvertCondition(Mutator):
    name = "invert-condition"

    def edits(self, node, scope):
        if isinstance(node, ast.If) and scope.one_line(node.test):
            yield scope.replace(node.test, _negated(node.test, scope))


_COMPARE = {
    ast.Lt: (r"<(?!=)", "<="),
    ast.LtE: (r"<=", "<"),
    ast.Gt: (r">(?!=)", ">="),
    ast.GtE: (r">=", ">"),
    ast.Eq: (r"==", "!="),
    ast.NotEq: (r"!=", "=="),
    ast.In: (r"\bin\b", "not in"),
    ast.NotIn: (r"\bnot\s+in\b", "in"),
    ast.Is: (r"\bis\b(?!\s+not\b)", "is not"),
    ast.IsNot: (r"\bis\s+not\b", "is"),
}


class CompareOperator(Mutator):
    name = "compare-operator"

    def edits(self, node, scope):
        if isinstance(node, ast.Compare) and scope.one_line(node):
            pattern, new = _COMPARE[type(node.ops[0])]
            if edit := scope.gap_edit(node.left, node.comparators[0], pattern, new):
                yield edit


class BooleanOperator(Mutator):
    name = "boolean-operator"

    def edits(self, node, scope):
        if isinstance(node, ast.BoolOp) and scope.one_line(node):
            pattern, new = (
                (r"\band\b", "or") if isinstance(node.op, ast.And) else (r"\bor\b", "and")
            )
            if edit := scope.gap_edit(node.values[0], node.values[1], pattern, new):
                yield edit


def _stringy(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str | bytes)
    )


class ArithmeticOperator(Mutator):
    name = "arithmetic-operator"

    def edits(self, node, scope):
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Add | ast.Sub)
            and scope.one_line(node)
            and not _stringy(node.left)
            and not _stringy(node.right)
        ):
            pattern, new = (r"\+", "-") if isinstance(node.op, ast.Add) else (r"-", "+")
            if edit := scope.gap_edit(node.left, node.right, pattern, new):
                yield edit


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _in_index(node: ast.AST, scope: Scope) -> bool:
    """Whether a constant is an index, a slice bound or a ``range`` argument."""
    parent = scope.parents.get(node)
    if isinstance(parent, ast.UnaryOp):
        node, parent = parent, scope.parents.get(parent)
    if isinstance(parent, ast.Slice):
        return True
    if isinstance(parent, ast.Subscript) and parent.slice is node:
        return True
    return (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Name)
        and parent.func.id == "range"
        and node in parent.args
    )


class OffByOne(Mutator):
    name = "off-by-one"

    def edits(self, node, scope):
        if _is_int(node) and _in_index(node, scope):
            yield scope.replace(node, str(node.value + 1))
        elif (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Add | ast.Sub)
            and _is_int(node.right)
            and node.right.value == 1
            and scope.one_line(node)
        ):
            yield scope.replace(node, scope.text(node.left))


def _assigned_before(stmt: ast.Assign, name: str, function: ast.AST | None) -> bool:
    if function is None:
        return False
    for node in ast.walk(function):
        if isinstance(node, ast.arg) and node.arg == name:
            return True
        if (
            isinstance(node, ast.Name)
            and node.id == name
            and isinstance(node.ctx, ast.Store)
            and node.lineno < stmt.lineno
        ):
            return True
    return False


class RemoveStatement(Mutator):
    name = "remove-statement"

    def edits(self, node, scope):
        removable = (
            (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call | ast.Await))
            or isinstance(node, ast.AugAssign)
            or (
                isinstance(node, ast.Assign)
                and all(
                    isinstance(t, ast.Attribute | ast.Subscript)
                    or (isinstance(t, ast.Name) and _assigned_before(node, t.id, scope.function))
                    for t in node.targets
                )
            )
        )
        body = scope.body_of(node) if removable else None
        if body is not None and scope.owns_lines(node, node):
            yield scope.remove_lines(node, node, keep_pass=len(body) == 1)


class RemoveGuard(Mutator):
    name = "remove-guard"

    def edits(self, node, scope):
        if (
            isinstance(node, ast.If)
            and not node.orelse
            and len(node.body) == 1
            and isinstance(node.body[0], ast.Raise | ast.Return | ast.Continue | ast.Break)
            and node.end_lineno - node.lineno < 4
        ):
            body = scope.body_of(node)
            if body is not None and len(body) > 1 and scope.owns_lines(node, node):
                yield scope.remove_lines(node, node, keep_pass=False)


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


class SwapArguments(Mutator):
    name = "swap-arguments"

    def edits(self, node, scope):
        if not isinstance(node, ast.Call) or len(node.args) < 2 or _call_name(node) in _NO_SWAP:
            return
        first, second = node.args[:2]
        if any(isinstance(a, ast.Starred) for a in (first, second)):
            return
        if scope.one_line(first, second) and scope.text(first) != scope.text(second):
            start, end = scope.span(first)[0], scope.span(second)[1]
            between = scope.offsets.text(scope.span(first)[1], scope.span(second)[0])
            yield Edit(start, end, scope.text(second) + between + scope.text(first))


def _moved(node: ast.Constant) -> str | None:
    value = node.value
    if type(value) is bool:
        return str(not value)
    if type(value) is int:
        return str(value + 1)
    if type(value) is float:
        return repr(value * 2 if value else 1.0)
    return None


class ChangeConstant(Mutator):
    name = "change-constant"

    def edits(self, node, scope):
        if not isinstance(node, ast.Constant) or _in_index(node, scope):
            return
        parent = scope.parents.get(node)
        if isinstance(parent, ast.JoinedStr | ast.FormattedValue | ast.arguments):
            return
        if (
            isinstance(parent, ast.BinOp)
            and isinstance(parent.op, ast.Add | ast.Sub)
            and parent.right is node
            and node.value == 1
        ):
            return  # off-by-one's
        if (new := _moved(node)) is not None:
            yield scope.replace(node, new)


class ChangeDefault(Mutator):
    name = "change-default"
    defaults = True  # looks at a function's own defaults, which run outside its body

    def edits(self, node, scope):
        if isinstance(node, _FUNCTIONS):
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if isinstance(default, ast.Constant) and (new := _moved(default)) is not None:
                    yield scope.replace(default, new)


class WrongReturn(Mutator):
    name = "wrong-return"

    def edits(self, node, scope):
        if not isinstance(node, ast.Return) or node.value is None:
            return
        value = node.value
        if not scope.one_line(value) or (isinstance(value, ast.Constant) and value.value is None):
            return
        if isinstance(value, ast.Constant) and type(value.value) is bool:
            yield scope.replace(value, str(not value.value))
        elif isinstance(value, ast.Compare | ast.BoolOp) or (
            isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)
        ):
            yield scope.replace(value, _negated(value, scope))
        else:
            yield scope.replace(value, "None")


class BrokenException(Mutator):
    name = "broken-exception"

    def edits(self, node, scope):
        if not isinstance(node, ast.ExceptHandler):
            return
        first, last = node.body[0], node.body[-1]
        if len(node.body) == 1 and isinstance(first, ast.Raise) and first.exc is None:
            return
        if scope.owns_lines(first, last):
            start = scope.offsets.line_start(first.lineno)
            end = scope.offsets.line_end(last.end_lineno)
            indent = scope.offsets.line_text(first.lineno)[: first.col_offset]
            yield Edit(start, end, f"{indent}raise\n")


MUTATORS: tuple[Mutator, ...] = (
    InvertCondition(),
    CompareOperator(),
    BooleanOperator(),
    ArithmeticOperator(),
    OffByOne(),
    RemoveStatement(),
    RemoveGuard(),
    SwapArguments(),
    ChangeConstant(),
    ChangeDefault(),
    WrongReturn(),
    BrokenException(),
)
BY_NAME = {m.name: m for m in MUTATORS}


def _first_line(function: ast.AST) -> int:
    return min([function.lineno, *(d.lineno for d in function.decorator_list)])


def _in_functions(tree: ast.Module) -> Iterator[tuple[ast.AST, ast.AST]]:
    """``(node, innermost function whose body holds it)`` for every node in a function body,
    and ``(function, function)`` for each function (its defaults)."""
    stack: list[tuple[ast.AST, ast.AST | None]] = [(tree, None)]
    while stack:
        node, function = stack.pop()
        if isinstance(node, _FUNCTIONS):
            yield node, node
            for child in reversed(node.body):
                stack.append((child, node))
            continue
        if function is not None:
            yield node, function
        for child in reversed(list(ast.iter_child_nodes(node))):
            stack.append((child, function))


def sites(path: str, source: str, mutators: tuple[Mutator, ...] = MUTATORS) -> list[Site]:
    """Every site of ``mutators`` in the module ``path`` (its text ``source``), in order."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    scope = Scope(source, tree)
    found: list[Site] = []
    nodes = list(_in_functions(tree))
    for mutator in mutators:
        index = 0
        seen: set[Edit] = set()
        for node, function in nodes:
            if (node is function) != getattr(mutator, "defaults", False):
                continue
            if isinstance(node, _FUNCTIONS) and node is not function:
                continue
            scope.function = function
            for edit in mutator.edits(node, scope):
                if edit in seen:
                    continue
                seen.add(edit)
                found.append(
                    Site(
                        path,
                        mutator.name,
                        index,
                        getattr(node, "lineno", function.lineno),
                        _first_line(function),
                        function.name,
                        edit,
                    )
                )
                index += 1
    return found


def mutate(source: str, chosen: list[Site]) -> str | None:
    """``source`` with the sites' edits applied, or None when the result is no real change (it
    does not parse, or parses to the same tree)."""
    try:
        after = apply(source, [s.edit for s in chosen])
        new_tree = ast.parse(after)
    except (SyntaxError, ValueError):
        return None
    if ast.dump(new_tree) == ast.dump(ast.parse(source)):
        return None
    return after
