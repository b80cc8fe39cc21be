"""The symptom text names no changed file, and a writer's rewrite that gives the answer away
is refused for the template's."""

from __future__ import annotations

from palaestra.tasks.synth import instruction
from palaestra.tasks.synth.manifest import Bug
from palaestra.tasks.synth.mutators import sites
from palaestra.tasks.synth.pipeline import _rewritten
from palaestra.tasks.synth.project import Project

MESSAGE = """E   AssertionError: assert 3 == 2
E    +  where 3 = clamp(5)
E   pkg/core.py:12: in clamp
E   pkg.core.helper failed
E   more_itertools style test_core.py line"""


def test_forbidden_words_and_symptom() -> None:
    words = instruction.forbidden(["src/pkg/core.py"], "src")
    assert {"src/pkg/core.py", "pkg/core.py", "core.py", "pkg.core"} <= set(words)
    assert instruction.forbidden(["pkg/__init__.py"], "") == ["pkg/__init__.py"]
    text = instruction.symptom(MESSAGE, words)
    assert "AssertionError: assert 3 == 2" in text and "where 3 = clamp(5)" in text
    assert "pkg/core.py" not in text and "pkg.core" not in text
    assert "test_core.py" in text  # a test file's name is not the changed file's


def test_render_says_what_was_run_happened_and_expected() -> None:
    failing = ["tests/test_a.py::test_x", "tests/test_a.py::test_y"]
    text = instruction.render("pkg", "1.0", failing, {failing[1]: MESSAGE}, ["core.py"])
    assert "python -m pytest 'tests/test_a.py::test_y'" in text
    assert (
        "assert 3 == 2" in text
        and "What I expected" in text
        and "`tests/test_a.py::test_x`" in text
    )


def test_a_leaking_rewrite_keeps_the_template(tmp_path) -> None:
    (tmp_path / "pkg").mkdir()
    source = "def clamp(v):\n    if v > 10:\n        return 10\n    return v\n"
    (tmp_path / "pkg" / "core.py").write_text(source)
    project = Project("pkg", "1.0", tmp_path, "", ("pkg/core.py",), ("tests/test_a.py",))
    site = next(s for s in sites("pkg/core.py", source) if s.mutator == "compare-operator")
    bug = Bug(
        "pkg-1", [site.key], ["tests/test_a.py::test_x"], [], {"tests/test_a.py::test_x": MESSAGE}
    )
    by_key = {site.key: site}
    said: list[str] = []
    for leaky in ("The bug is in pkg/core.py.", "Look at `if v > 10:` please."):
        text, why = _rewritten(project, bug, by_key, lambda _, t=leaky: t, said.append)
        assert text == "" and why is not None and why.startswith("gives away")
    for useless, reason in (("", "is empty"), ("test_x fails.", "quotes no failing test's id")):
        assert _rewritten(project, bug, by_key, lambda _, t=useless: t, said.append) == ("", reason)
    assert len(said) == 4 and all("template kept" in line for line in said)
    good = "Running tests/test_a.py::test_x fails with assert 3 == 2; it should pass."
    answer = _rewritten(project, bug, by_key, lambda prompt: good, said.append)
    assert answer == (good + "\n", None)
