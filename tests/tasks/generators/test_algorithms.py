"""The algorithms families' reference solutions (which define every hidden test's expected
answers) checked against independent implementations and brute force."""

from __future__ import annotations

import fnmatch
import itertools
import random

import pytest

from palaestra.tasks.generators.algorithms import (
    build_order,
    edit_distance,
    glob_match,
    spreadsheet_eval,
)


def load(source: str) -> dict:
    ns: dict = {}
    exec(compile(source, "<reference>", "exec"), ns)
    return ns


def test_build_order_is_the_smallest_topological_order():
    names = ("pipeline.py", "order", "finish", "sched")
    ref = load(build_order._source(build_order._ORDER_RIGHT, None, None, names))["order"]
    rng = random.Random(1)
    for _ in range(150):
        nodes = rng.sample("abcdef", rng.randint(1, 6))
        deps = {
            n: rng.sample(nodes, min(len(nodes), rng.randint(0, 2)))
            for n in nodes
            if rng.random() < 0.8
        }
        every = sorted(set(deps) | {r for rs in deps.values() for r in rs})
        valid = [
            list(p)
            for p in itertools.permutations(every)
            if all(p.index(r) < p.index(n) for n, rs in deps.items() for r in rs)
        ]
        if valid:
            assert ref(deps) == min(valid)
        else:
            with pytest.raises(ValueError):
                ref(deps)


def test_spreadsheet_reference_agrees_with_python_arithmetic():
    ref = load(spreadsheet_eval._RIGHT.replace("def FN(", "def evaluate("))["evaluate"]
    rng = random.Random(2)

    def expr(cells, depth):
        parts = [term(cells, depth)]
        for _ in range(rng.randrange(3)):
            parts += [rng.choice("+-"), term(cells, depth)]
        return " ".join(parts)

    def term(cells, depth):
        parts = [factor(cells, depth)]
        for _ in range(rng.randrange(2)):
            parts += ["*", factor(cells, depth)]
        return " ".join(parts)

    def factor(cells, depth):
        r = rng.random()
        if depth and r < 0.2:
            return "(" + expr(cells, depth - 1) + ")"
        if cells and r < 0.6:
            return rng.choice(cells)
        return str(rng.randrange(20))

    for _ in range(200):
        cells = [f"A{i}" for i in range(1, 8)]
        sheet = {"A1": rng.randrange(-5, 9)}
        for i, cell in enumerate(cells[1:], 1):
            sheet[cell] = "=" + expr(cells[:i] + ["Z9"], 2)
        values = {"Z9": 0}
        for cell in cells:  # Python's own precedence and associativity, cell by cell
            raw = sheet[cell]
            values[cell] = raw if isinstance(raw, int) else eval(raw[1:], {}, dict(values))
        values.pop("Z9")
        assert ref(sheet) == values


@pytest.mark.parametrize("costs", [(2, 3, 4, None, None), (3, 1, 7, None, None), (2, 4, 3, 1, 2)])
def test_edit_scripts_are_valid_and_cost_what_the_table_says(costs):
    names = ("m.py", "cost", "script")
    ns = load(edit_distance._variant(costs, names, script=True))
    ins, dele, sub, case, swap = costs
    rng = random.Random(3)
    for _ in range(300):
        a = "".join(rng.choice("abAB-") for _ in range(rng.randrange(7)))
        b = "".join(rng.choice("abAB-") for _ in range(rng.randrange(7)))
        out, pos, total = [], 0, 0
        for op in ns["script"](a, b):
            if op[0] == "keep":
                out.append(a[pos])
                pos += 1
            elif op[0] == "sub":
                out.append(op[1])
                total += ns["_sub"](a[pos], op[1])
                pos += 1
            elif op[0] == "del":
                total, pos = total + dele, pos + 1
            elif op[0] == "ins":
                out.append(op[1])
                total += ins
            else:
                out += [a[pos + 1], a[pos]]
                total, pos = total + swap, pos + 2
        assert ("".join(out), pos, total) == (b, len(a), ns["cost"](a, b))
        assert total <= len(a) * dele + len(b) * ins  # never worse than retyping
        if case is None:  # no transpositions either: the reverse edit swaps insert and delete
            back = load(edit_distance._variant((dele, ins, sub, None, None), names, script=False))
            assert back["cost"](b, a) == total


def test_easy_glob_reference_agrees_with_fnmatch():
    names = ("g.py", "match", "ignored")
    ref = load(glob_match._variant(glob_match._RIGHT, names, False, False, False))["match"]
    rng = random.Random(4)
    pieces = ["a", "b", "c", ".", "?", "*", "**", "[ab]", "[!a]", "[a-c]", "[!b-c]"]
    for _ in range(3000):
        pattern = "".join(rng.choice(pieces) for _ in range(rng.randrange(6)))
        text = "".join(rng.choice("abcd.") for _ in range(rng.randrange(8)))
        assert ref(pattern, text) == fnmatch.fnmatchcase(text, pattern), (pattern, text)


def test_directory_aware_glob_dp_agrees_with_backtracking():
    names = ("g.py", "match", "ignored")
    dp = load(glob_match._variant(glob_match._RIGHT, names, True, True, False))["match"]
    bt = load(glob_match._variant(glob_match._BACKTRACK, names, True, True, False))["match"]
    rng = random.Random(5)
    pieces = ["a", "b", "/", "?", "*", "**", "/**/", "**/", "/**", "[ab]", "[!a]", "\\*", "*"]
    for _ in range(3000):
        pattern = "".join(rng.choice(pieces) for _ in range(rng.randrange(6)))
        text = "".join(rng.choice(["a", "b", "/", "*", "ab/"]) for _ in range(rng.randrange(7)))
        assert dp(pattern, text) == bt(pattern, text), (pattern, text)
    assert dp("a/**/b", "a/b") and dp("a/**/b", "a/x/y/b") and not dp("a/**/b", "a/xb")
    assert not dp("*.py", "src/x.py") and dp("\\*", "*") and not dp("\\*", "x")


def test_build_order_bulk_pipeline_has_the_shape_of_the_drawn_ones():
    from palaestra.tasks.generators.algorithms import _build_order_tests as t

    names = ("pipeline.py", "order", "finish", "sched")
    scope = load(build_order._source(build_order._ORDER_RIGHT, None, None, names))
    scope.update(random=random, rng=random.Random(4))
    exec(t._DRAW + t._BIG, scope)
    big, drawn = scope["big_dag"](4, 3000), scope["dag"](3000, 3, implicit=5)
    for deps in (big, drawn):
        assert len(deps) == 2995 and len(scope["order"](deps)) == 3000  # acyclic, 5 implicit
    mean = [sum(map(len, d.values())) / len(d) for d in (big, drawn)]
    assert abs(mean[0] - mean[1]) < 0.1, mean
    assert scope["big_dag"](4, 3000) == big
