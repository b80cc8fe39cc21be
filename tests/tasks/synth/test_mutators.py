"""Each mutation class finds its sites and makes the one small edit it promises; sites are
listed in a fixed order, and a seed's sample of them is the same every time."""

from __future__ import annotations

import ast

import pytest

from palaestra.tasks.synth import mutators
from palaestra.tasks.synth.edits import Edit, apply, unified_diff
from palaestra.tasks.synth.testrun import Baseline
from palaestra.tasks.synth.validate import choose

SOURCE = '''\
import os

LIMIT = 10


def clamp(value, low=0, high=10, strict=False):
    """Clamp value."""
    if value < low:
        return low
    if not value <= high:  # above
        return high
    return value


def window(seq, size=2):
    if size <= 0:
        raise ValueError("size must be positive")
    out = []
    for i in range(len(seq) - size + 1):
        out.append(seq[i : i + size])
    return out


def total(items, start=0):
    result = start
    for item in items:
        result += item
    result = result * 1
    return result


def both(a, b):
    return a and b


def first(items):
    return items[0]


def ratio(a, b):
    try:
        return a / b
    except ZeroDivisionError:
        return None


def pick(a, b):
    return os.path.join(a, b)


def is_big(n):
    return n > LIMIT
'''


def mutants(name: str) -> list[str]:
    found = [s for s in mutators.sites("m.py", SOURCE) if s.mutator == name]
    out = []
    for site in found:
        after = mutators.mutate(SOURCE, [site])
        assert after is not None, site
        ast.parse(after)
        out.append(after)
    return out


def changed(after: str) -> list[tuple[str, str]]:
    """(before line, after line) pairs that differ, aligned (edits that keep the line count)."""
    return [(b, a) for b, a in zip(SOURCE.splitlines(), after.splitlines(), strict=False) if b != a]


def test_invert_condition_negates_and_un_negates_if_tests() -> None:
    lines = {line for m in mutants("invert-condition") for pair in changed(m) for line in pair}
    assert "    if not (value < low):" in lines
    assert "    if value <= high:  # above" in lines  # the `not` removed, the comment kept
    assert "    if not (size <= 0):" in lines


def test_compare_operator_swaps_the_operator_only() -> None:
    pairs = {pair for m in mutants("compare-operator") for pair in changed(m)}
    assert ("    if value < low:", "    if value <= low:") in pairs
    assert ("    if size <= 0:", "    if size < 0:") in pairs
    assert ("    return n > LIMIT", "    return n >= LIMIT") in pairs


def test_boolean_and_arithmetic_operators() -> None:
    assert changed(mutants("boolean-operator")[0]) == [("    return a and b", "    return a or b")]
    arithmetic = {pair for m in mutants("arithmetic-operator") for pair in changed(m)}
    assert (
        "    for i in range(len(seq) - size + 1):",
        "    for i in range(len(seq) + size + 1):",
    ) in arithmetic


def test_off_by_one_moves_indices_and_drops_plus_one() -> None:
    pairs = {pair for m in mutants("off-by-one") for pair in changed(m)}
    assert ("    return items[0]", "    return items[1]") in pairs
    assert (
        "    for i in range(len(seq) - size + 1):",
        "    for i in range(len(seq) - size):",
    ) in pairs


def test_remove_statement_and_guard_delete_whole_lines() -> None:
    removed = mutants("remove-statement")
    texts = {m for m in removed}
    assert (
        SOURCE.replace("        result += item\n", "        pass\n") in texts
    )  # alone in its body
    assert SOURCE.replace("    result = result * 1\n", "") in texts  # a re-assignment
    assert not any("result = start" not in m for m in removed)  # a first assignment stays
    guards = mutants("remove-guard")
    assert (
        SOURCE.replace('    if size <= 0:\n        raise ValueError("size must be positive")\n', "")
        in guards
    )


def test_swap_arguments_skips_commutative_builtins() -> None:
    pairs = {pair for m in mutants("swap-arguments") for pair in changed(m)}
    assert ("    return os.path.join(a, b)", "    return os.path.join(b, a)") in pairs
    assert ("    for i in range(len(seq) - size + 1):",) not in pairs


def test_constants_defaults_returns_and_exceptions() -> None:
    constants = {pair for m in mutants("change-constant") for pair in changed(m)}
    assert ("    result = result * 1", "    result = result * 2") in constants
    defaults = {pair for m in mutants("change-default") for pair in changed(m)}
    assert (
        "def clamp(value, low=0, high=10, strict=False):",
        "def clamp(value, low=1, high=10, strict=False):",
    ) in defaults
    assert (
        "def clamp(value, low=0, high=10, strict=False):",
        "def clamp(value, low=0, high=10, strict=True):",
    ) in defaults
    returns = {pair for m in mutants("wrong-return") for pair in changed(m)}
    assert ("    return out", "    return None") in returns
    assert ("    return n > LIMIT", "    return not (n > LIMIT)") in returns
    assert ("        return None", "        return None") not in returns  # nothing to change
    broken = mutants("broken-exception")
    assert broken == [
        SOURCE.replace(
            "    except ZeroDivisionError:\n        return None\n",
            "    except ZeroDivisionError:\n        raise\n",
        )
    ]


def test_every_class_has_sites_here_and_module_level_code_is_never_mutated() -> None:
    found = mutators.sites("m.py", SOURCE)
    assert {s.mutator for s in found} == {m.name for m in mutators.MUTATORS}
    assert all(s.line > 4 for s in found), "LIMIT = 10 is module level: no test's call covers it"
    assert [s.key for s in found] == [s.key for s in mutators.sites("m.py", SOURCE)]
    by_name = {s.function_name for s in found}
    assert "clamp" in by_name and "window" in by_name


def test_site_function_is_the_code_objects_first_line() -> None:
    source = "import functools\n\n@functools.cache\ndef f(x):\n    return x + 1\n"
    (site,) = [s for s in mutators.sites("m.py", source) if s.mutator == "arithmetic-operator"]
    assert site.function == 3 and site.function_name == "f"  # co_firstlineno: the decorator


def test_mutate_refuses_what_changes_nothing_and_edits_apply_and_diff() -> None:
    assert mutators.mutate("x = 1\n", []) is None
    assert apply("abc", [Edit(1, 2, "X")]) == "aXc"
    with pytest.raises(ValueError):
        apply("abc", [Edit(0, 2, "X"), Edit(1, 3, "Y")])
    diff = unified_diff("p/m.py", "a\nb\n", "a\nc\n")
    assert diff.startswith("--- a/p/m.py\n+++ b/p/m.py\n") and "-b\n+c\n" in diff


def _baseline(calls: dict[str, list[list]]) -> Baseline:
    return Baseline(
        reliable=sorted(calls),
        flaky=[],
        failing=[],
        calls=calls,
        seconds=1.0,
        files=["tests/test_m.py"],
    )


def test_choose_is_deterministic_by_seed_balanced_and_skips_unreached(tmp_path) -> None:
    from palaestra.tasks.synth.project import Project

    (tmp_path / "m.py").write_text(SOURCE)
    project = Project("m", "1", tmp_path, "", ("m.py",), ("tests/test_m.py",))
    every = mutators.sites("m.py", SOURCE)
    reached = sorted({s.function for s in every if s.function_name != "pick"})
    baseline = _baseline({"tests/test_m.py::test_a": [["m.py", line] for line in reached]})
    chosen, unreached = choose(project, baseline, seed=1, limit=12)
    assert unreached == sum(s.function_name == "pick" for s in every) > 0
    assert all(s.function_name != "pick" for s in chosen)
    assert len({s.mutator for s in chosen}) == 11  # round-robin: every class reached once
    again, _ = choose(project, baseline, seed=1, limit=12)
    other, _ = choose(project, baseline, seed=2, limit=12)
    assert [s.key for s in again] == [s.key for s in chosen]
    assert [s.key for s in other] != [s.key for s in chosen]
