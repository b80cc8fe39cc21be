"""The declarative hidden test: its comparisons (``palaestra_compare.py``), called as the harness
calls them, on a real ``Checker``, and the builder's further parts (run: orders-pipeline in
test_debugging.py)."""

from __future__ import annotations

import importlib
import marshal
import zlib
from pathlib import Path

import pytest

from palaestra.tasks.generators import harness_spec as hs

RUNTIME = Path(hs.__file__).parent


@pytest.fixture
def compare(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(RUNTIME))
    check = importlib.import_module("palaestra_check")
    module = importlib.import_module("palaestra_compare")

    def run(how: str, want: object, got: object, **opts: object) -> list[tuple]:
        ck = check.Checker()
        module.COMPARE[hs.compare(how, **opts)["how"]](ck, "group", want, got, opts)
        return [(name, ok, detail) for name, ok, detail, *_ in ck.results]

    return run


def test_items_is_one_check_naming_the_first_differing_item(compare):
    want = [["ok", 1], ["ok", {"a": 2}], ["raised", "ValueError"]]
    assert compare("items", want, [list(w) for w in want]) == [("group", True, "")]
    (result,) = compare("items", want, [["ok", 1], ["ok", {"a": 3}], ["raised", "KeyError"]])
    assert result[:2] == ("group", False)
    assert result[2] == 'case 1: expected ["ok", {"a": 2}], got ["ok", {"a": 3}]'
    (short,) = compare("items", want, want[:1], what="op")
    assert short[2] == 'op 1: expected ["ok", {"a": 2}], got null'
    (longer,) = compare("items", want[:1], want)
    assert longer[1:] == (False, 'case 1: expected null, got ["ok", {"a": 2}]')


def test_items_of_something_not_a_list_fails(compare):
    (result,) = compare("items", [1, 2], {"0": 1})
    assert result == ("group", False, 'expected a list, got {"0": 1}')


def test_files_is_one_check_a_file(compare):
    want = {"stdout": "", "files": {"summary.csv": "a,b\n1,2\n", "rejects.csv": "r\n"}}
    got = {"stdout": "ignored", "files": {"summary.csv": "a,b\r\n1,2\r\n"}}
    assert compare("files", want, got, newlines="universal") == [
        ("group: summary.csv", True, ""),
        ("group: rejects.csv", False, "missing"),
    ]
    (summary, _) = compare("files", want, got, file_label="{label} {name} matches")
    assert summary[:2] == ("group summary.csv matches", False)  # byte for byte: \r\n differs
    got["files"]["rejects.csv"] = "r\nextra\n"
    assert compare("files", want, got, newlines="universal")[1] == (
        "group: rejects.csv",
        False,
        "line 2: expected None, got 'extra' (1 of 1 differ)",
    )


def test_a_further_part_is_data_with_its_expected_values():
    call = hs.part(
        answer=hs.python_call("emit([1])", None),
        cases=[hs.Case("one", want=1)],
        compare=hs.compare("equal"),
    )
    tests = hs.tests(
        answer=hs.program(["true"]),
        cases=[hs.Case("run", want={"files": {}})],
        compare=hs.compare("files"),
        also=[call],
    )
    spec = marshal.loads(zlib.decompress(tests[hs.SPEC]))
    assert [p["answer"]["kind"] for p in [spec, *spec["also"]]] == ["program", "python"]
    assert spec["also"][0]["cases"] == [{"label": "one", "want": 1}]
    assert "palaestra_pg.py" not in tests
    with pytest.raises(ValueError, match="need their expected values"):
        made = hs.made("inputs", "make", 1, [], "text")
        hs.part(answer=hs.program(["x"]), cases=[hs.Case("c", make=made)], compare=call["compare"])
    with pytest.raises(ValueError, match="answer kind 'shell'"):
        hs.part(answer={"kind": "shell"}, cases=[], compare=call["compare"])


def test_an_exit_status_is_compared_when_expected(compare, monkeypatch: pytest.MonkeyPatch):
    want = {"stdout": "", "files": {}, "status": 1}
    assert compare("output", want, {"stdout": "", "files": {}, "status": 1})[0][1]
    assert compare("output", want, {"stdout": "", "files": {}, "status": 0}) == [
        ("group", False, "expected exit status 1, got 0")
    ]
    harness = importlib.import_module("palaestra_harness")
    result = importlib.import_module("palaestra_check").ChildResult

    def run(code: int | None, stderr: str = "") -> object:
        return result(code == 0, stderr=stderr, returncode=code, error="" if code == 0 else "x")

    ran = [harness._ran(run(c), status=True) for c in (0, 1, 2, -9, None)]
    assert ran == [True, True, True, False, False]
    crash = run(1, "Traceback (most recent call last):\n  ...\nKeyError: 'x'\n")
    assert not harness._ran(crash, status=True)
    assert [harness._ran(run(c), status=False) for c in (0, 1)] == [True, False]


def test_cases_by_reference_need_a_python_answer_and_the_reference():
    case = hs.Case("usage error", by_reference=True)
    call = hs.python_call("emit([None])", None)
    with pytest.raises(ValueError, match="by_reference need"):
        hs.tests(answer=call, cases=[case], compare=hs.compare("equal"))
    with pytest.raises(ValueError, match="by_reference need"):
        files = {"files": {"a.py": ""}}
        hs.part(
            answer=hs.program(["x"]), cases=[case], compare=hs.compare("output"), reference=files
        )
    part = hs.part(
        answer=call, cases=[case], compare=hs.compare("equal"), reference={"files": {"a.py": ""}}
    )
    assert part["cases"] == [{"label": "usage error", "want": None, "by_reference": True}]
    assert part["reference"] == {"files": {"a.py": ""}}


def test_a_program_case_has_its_own_arguments_and_its_stderr_compared(
    compare, monkeypatch: pytest.MonkeyPatch
):
    """Case(args=) goes after the answer's argv ({in}: the case's directory); with
    program(stderr=N) the end of the stripped stderr is part of the output, compared."""
    want = {"stdout": "", "files": {}, "status": 2, "stderr": "error: unknown column: x"}
    assert compare("output", want, dict(want))[0][1]
    assert compare("output", want, dict(want, stderr="boom")) == [
        ("group", False, "expected 'error: unknown column: x' on stderr, got 'boom'")
    ]
    harness = importlib.import_module("palaestra_harness")
    check = importlib.import_module("palaestra_check")
    ran: list[list[str]] = []

    def run_command(argv, **kw):
        ran.append(argv)
        return check.ChildResult(False, stdout="", stderr="x" * 50 + "  bad\n", returncode=2)

    monkeypatch.setattr(harness, "run_command", run_command)
    monkeypatch.setattr(harness, "build", lambda ck, answer, limits: "/w")
    monkeypatch.setattr(harness, "case_dir", lambda files: "/case")
    monkeypatch.setattr(harness, "close_to_runs", lambda dirs: None)
    answer = hs.program(["python3", "-m", "pkg.cli"], status=True, stderr=5)
    cases = [hs.Case("c", args=["{in}/r.json", "--sort", "a"], want=want).data()]
    assert cases[0]["args"] == ["{in}/r.json", "--sort", "a"]
    ck = check.Checker()
    spec = {"answer": answer, "compare": hs.compare("output"), "limits": {}}
    harness.run_program(ck, spec, cases)
    assert ran == [["python3", "-m", "pkg.cli", "/case/r.json", "--sort", "a"]]
    assert ck.results[0][:3] == (
        "c",
        False,
        "expected 'error: unknown column: x' on stderr, got '  bad'",
    )
