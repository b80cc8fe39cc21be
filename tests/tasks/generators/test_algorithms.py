"""The algorithms families' reference solutions (which define every hidden test's expected
answers) checked against independent implementations and brute force."""

from __future__ import annotations

import fnmatch
import itertools
import marshal
import random
import zlib

import pytest

from palaestra.tasks import generators as g
from palaestra.tasks.generators.algorithms import (
    build_order,
    edit_distance,
    glob_match,
    range_queries_c,
    spreadsheet_eval,
)
from palaestra.tasks.generators.optimization._bench import DRAWS


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
    from palaestra.tasks.generators.algorithms import _build_order_big as b
    from palaestra.tasks.generators.algorithms import _build_order_tests as t

    names = ("pipeline.py", "order", "finish", "sched")
    scope = load(build_order._source(build_order._ORDER_RIGHT, None, None, names))
    big, drawn = b.big_dag(random.Random(4), 3000), t._Draws(4).dag(3000, 3, implicit=5)
    for deps in (big, drawn):
        assert len(deps) == 2995 and len(scope["order"](deps)) == 3000  # acyclic, 5 implicit
        assert b.order(deps) == scope["order"](deps)  # the shipped reference is the family's
    mean = [sum(map(len, d.values())) / len(d) for d in (big, drawn)]
    assert abs(mean[0] - mean[1]) < 0.1, mean
    assert b.big_dag(random.Random(4), 3000) == big


def test_spreadsheet_cases_ship_with_the_reference_values():
    task = g.generate("spreadsheet-eval", 1, 0.9)
    spec = marshal.loads(zlib.decompress(task.tests["harness.bin"]))
    (sheets_call, chain_call), cases = spec["answer"]["calls"], spec["cases"]
    sheets, chain = sheets_call["input"], chain_call["input"]
    values = [c["want"] for c in cases[: len(sheets)]]
    assert len(sheets) == 45 and sum(len(s) > 5 for s in sheets) > 30
    assert values == [spreadsheet_eval._reference(s) for s in sheets]
    assert any("#CYCLE!" in v.values() for v in values)  # the hard tier's cycles
    assert len(chain) > 5000 and cases[-1]["want"] == spreadsheet_eval._reference(chain)
    assert chain_call["cpu"] == 3 and "test_hidden.py" not in task.tests


@pytest.mark.parametrize("with_min, with_upd", [(False, False), (True, False), (True, True)])
def test_range_queries_bulk_inputs_keep_their_mix(with_min, with_upd):
    scope = load(DRAWS + range_queries_c._CASES.format(params=repr(
        (("S", "M", "U"), (2, 300), (1, 300), with_min, with_upd, 0, 1))))  # fmt: skip
    n, q = 5000, 20000
    text = scope["make_input"](random.Random(7), n, q)
    assert text == scope["make_input"](random.Random(7), n, q)
    lines = text.splitlines()
    assert lines[0] == f"{n} {q}" and len(lines) == q + 2 and text.endswith("\n")
    values = [int(v) for v in lines[1].split()]
    assert len(values) == n and max(values) > 9 * 10**8 and max(map(abs, values)) <= 10**9
    assert (min(values) < -9 * 10**8) == with_min
    shapes = {"U": 0, "same": 0, "near": 0, "far": 0, "a<b": 0, "a>b": 0}
    for line in lines[2:]:
        op, a, b = line.split()
        a, b = int(a), int(b)
        assert 1 <= a <= n and op in ("S", "M", "U")
        if op == "U":
            shapes["U"] += 1
            assert abs(b) <= 10**9
            continue
        assert 1 <= b <= n and (op == "S" or with_min)
        shapes["same" if a == b else "near" if abs(a - b) <= 40 else "far"] += 1
        shapes["a<b"] += a < b
        shapes["a>b"] += a > b
    queries = q - shapes["U"]
    assert abs(shapes["U"] / q - (0.35 if with_upd else 0)) < 0.02
    assert abs(shapes["same"] / queries - 0.1) < 0.02
    assert abs(shapes["near"] / queries - 0.45) < 0.03
    assert abs(shapes["far"] / queries - 0.45) < 0.03
    assert abs(shapes["a<b"] - shapes["a>b"]) < 0.05 * queries
    for n in (1, 2, 60):  # short ranges cut at the array's ends
        for line in scope["make_input"](random.Random(n), n, 300).splitlines()[2:]:
            op, *bounds = line.split()
            assert all(1 <= int(x) <= n for x in bounds[: 1 if op == "U" else 2]), line
