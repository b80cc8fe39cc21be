"""The declarative hidden test: its comparisons (``palaestra_compare.py``), called as the harness
calls them, on a real ``Checker``, and the builder's further parts (run: orders-pipeline in
test_debugging.py)."""

from __future__ import annotations

import importlib
import marshal
import os
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


def test_path_checks_what_a_path_is_or_holds(compare):
    assert compare("path", {"type": "dir"}, {"type": "dir", "text": None}) == [("group", True, "")]
    assert compare("path", {"type": "absent"}, {"type": "link", "text": None}) == [
        ("group", False, "found: link")
    ]
    file = {"type": "file", "text": " word\n\n"}
    assert compare("path", {"text": "word", "strip": "blanks"}, file)[0][1] is True
    assert compare("path", {"text": " word", "strip": "trailing_newlines"}, file)[0][1] is True
    assert compare("path", {"text": "word\n"}, file)[0][1] is False  # exact without strip
    # a link or a missing file has no text: empty once stripped, None when exact
    assert compare("path", {"text": "", "strip": "blanks"}, {"type": "link", "text": None}) == [
        ("group", True, "")
    ]
    (exact,) = compare("path", {"text": "word"}, {"type": "absent", "text": None})
    assert exact == ("group", False, "expected 'word', got None")


def test_state_looks_without_following_links(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.syspath_prepend(str(RUNTIME))
    harness = importlib.import_module("palaestra_harness")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.txt").write_text("in d\n")
    (tmp_path / "via").symlink_to(tmp_path / "d")
    (tmp_path / "l.txt").symlink_to(tmp_path / "d" / "f.txt")
    os.mkfifo(tmp_path / "fifo")
    assert harness.look(str(tmp_path / "d")) == {"type": "dir", "text": None}
    assert harness.look(str(tmp_path / "d" / "f.txt")) == {"type": "file", "text": "in d\n"}
    for linked in ("via/f.txt", "l.txt", "via"):
        assert harness.look(str(tmp_path / linked)) == {"type": "link", "text": None}
    assert harness.look(str(tmp_path / "fifo")) == {"type": "other", "text": None}
    assert harness.look(str(tmp_path / "none")) == {"type": "absent", "text": None}
    with pytest.raises(ValueError, match="need the path"):
        hs.tests(answer=hs.state(), cases=[hs.Case("c", want={})], compare=hs.compare("path"))


def test_a_case_tree_holds_links_and_empty_folders(monkeypatch: pytest.MonkeyPatch):
    import shutil

    monkeypatch.syspath_prepend(str(RUNTIME))
    harness = importlib.import_module("palaestra_harness")
    tree = {
        "dirs": ["root/empty/nested"],
        "hardlinks": {"root/x/again.bin": "root/a.bin"},
        "symlinks": {"root/to-a": "a.bin", "root/gone": "does/not/exist"},
    }
    where = Path(harness.case_dir({"root/a.bin": b"abc"}, tree))
    try:
        root = where / "root"
        assert (root / "empty" / "nested").is_dir() and not any((root / "empty/nested").iterdir())
        assert os.stat(root / "x/again.bin").st_ino == os.stat(root / "a.bin").st_ino
        assert os.readlink(root / "to-a") == "a.bin" and (root / "to-a").read_bytes() == b"abc"
        assert os.readlink(root / "gone") == "does/not/exist"
        for d in (root, root / "x", root / "empty", root / "empty/nested"):
            assert d.stat().st_mode & 0o7777 == 0o755 and d.stat().st_uid == 0
    finally:
        shutil.rmtree(where)


def test_json_keys_checks_the_key_set_when_asked(compare):
    labels = {"parse_label": "{label}: JSON", "object_label": "{label}: object"}
    labels["key_label"] = "{label}: {key}"
    got = {"stdout": '{"a": 1, "b": 2, "extra": 3}', "files": {}}
    plain = compare("json_keys", {"a": 1, "b": 2}, got, **labels)
    assert [r[:2] for r in plain] == [("group: a", True), ("group: b", True)]
    (keys, *rest) = compare("json_keys", {"a": 1, "b": 2}, got, keys_label="{label} keys", **labels)
    assert keys[:2] == ("group keys", False) and [r[1] for r in rest] == [True, True]


def test_a_writable_case_is_the_runs_and_its_tree_reads_back_whole(
    monkeypatch: pytest.MonkeyPatch,
):
    import shutil

    monkeypatch.syspath_prepend(str(RUNTIME))
    cases = importlib.import_module("palaestra_cases")
    where = Path(cases.case_dir({"f/a.txt": "A", "r.txt": "R"}, {"dirs": ["f/sub"]}, True))
    try:
        assert {p.stat().st_uid for p in (where / "f", where / "f/a.txt", where / "r.txt")} == {
            65534
        }
        assert where.stat().st_uid == 0 and where.stat().st_mode & 0o7777 == 0o1777
        (where / "f" / "link").symlink_to("/etc/passwd")
        os.mkfifo(where / "f" / "fifo")
        assert cases.read_tree(str(where / "f")) == {
            "a.txt": ["file", "A"],
            "fifo": ["other"],
            "link": ["link", "/etc/passwd"],
            "sub": ["dir"],
        }
        (where / "f" / "sub" / "é.txt").write_bytes(b"caf\xc3\xa9 \xff")
        want = {**hs.tree_of(where / "f"), "fifo": ["other"]}
        assert cases.read_tree(str(where / "f")) == want  # the builder's view is the checker's
        (where / "f" / "sub" / "é.txt").unlink()
        (where / "via").symlink_to(where / "f")
        assert cases.read_tree(str(where / "via")) is None
        assert cases.read_tree(str(where / "none")) is None
    finally:
        shutil.rmtree(where)


def test_each_runs_several_comparisons_and_tree_one_check_a_folder(compare):
    want = [{"n": 1}, {"trees": {"out": {"a": ["file", "A"]}, "gone": None}}]
    got = {"stdout": '{"n": 1}', "files": {}, "trees": {"out": {"a": ["file", "B"]}, "gone": None}}
    keys = hs.compare("json_keys", parse_label="p", object_label="o", key_label="{label}: {key}")
    checks = compare("each", want, got, of=[keys, hs.compare("tree")])
    assert [c[:2] for c in checks] == [
        ("group: n", True),
        ("group: out", False),
        ("group: gone", True),
    ]
    assert checks[1][2] == "a"
    (renamed,) = compare("each", want[:1], got, of=[dict(keys, label="{label} report")])
    assert renamed[:2] == ("group report: n", True)
    got["trees"]["out"] = None
    assert compare("tree", want[1], got)[0][1:] == (False, "(the folder is missing, or a link)")


def test_kept_finds_a_file_rewritten_in_place_or_replaced(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, compare
):
    monkeypatch.syspath_prepend(str(RUNTIME))
    cases = importlib.import_module("palaestra_cases")
    for name in ("same", "rewritten", "replaced", "gone"):
        (tmp_path / name).write_text(name)
    cases.age(str(tmp_path))
    before = cases.stamps(str(tmp_path))
    (tmp_path / "rewritten").write_text("rewritten")  # the same bytes, the same inode
    (tmp_path / "new").write_text("replaced")
    os.replace(tmp_path / "new", tmp_path / "replaced")
    (tmp_path / "gone").unlink()
    after = cases.stamps(str(tmp_path))
    harness = importlib.import_module("palaestra_harness")
    changed = harness._changed(before, after)
    assert changed == ["gone", "replaced", "rewritten"]
    want = {"kept": {"dst": ["same", "rewritten"]}}
    assert compare("kept", want, {"rewritten": {"dst": changed}}) == [
        ("group: dst kept", False, "rewritten")
    ]
    assert compare("kept", want, {"rewritten": {"dst": ["gone"]}})[0][1] is True


def test_status_and_paths_are_one_check_each(compare):
    assert compare("status", {"status": 1}, {"status": 1})[0][:2] == ("group", True)
    assert compare("status", {"status": 1}, {"status": 0})[0][:2] == ("group", False)
    looked = {"/tmp/x/a": {"type": "absent"}, "/tmp/x/b": {"type": "file", "text": "B"}}
    want = {"paths": {"/tmp/x/a": "absent", "/tmp/x/b": "absent"}}
    assert compare("paths", want, {"looked": looked}) == [("group", False, "/tmp/x/b")]
    want["paths"]["/tmp/x/b"] = "file"
    assert compare("paths", want, {"looked": looked}) == [("group", True, "")]


def test_a_tree_with_modes_and_gzip_archives_reads_back(monkeypatch: pytest.MonkeyPatch):
    import gzip
    import shutil

    monkeypatch.syspath_prepend(str(RUNTIME))
    cases = importlib.import_module("palaestra_cases")
    files = {"d/a.log": "plain", "d/a.log.2.gz": gzip.compress(b"old", mtime=0), "d/b.gz": "no"}
    where = Path(cases.case_dir(files, {"modes": {"d/a.log": 0o600}}, True))
    try:
        assert cases.read_tree(str(where / "d"), True, True) == {
            "a.log": ["file", "plain", 0o600],
            "a.log.2.gz": ["file", "old", 0o644],
            "b.gz": ["other"],
        }
        assert cases.read_tree(str(where / "d"))["a.log"] == ["file", "plain"]
    finally:
        shutil.rmtree(where)


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
    monkeypatch.setattr(harness, "case_dir", lambda files, tree=None, writable=None: "/case")
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
