"""The starter tasks on the declarative harness: their committed ``tests/`` files are what
``palaestra.tasks.starter_harness`` builds (the spec's expected values the reference's), the
pack in the source tree holds no copy of the harness runtime, a loaded starter task has it
byte for byte the generators' files, and the spec fixes every expected value before any agent
code runs."""

from __future__ import annotations

import marshal
import zlib

import pytest

from palaestra.tasks import pack_cache, starter_harness
from palaestra.tasks.generators.base import CHECK_RUNTIME
from palaestra.tasks.generators.harness_spec import HARNESS_RUNTIME, SPEC
from tests.tasks.starter.pack import PACK_DIR, TASKS

REBUILD = "PYTHONPATH=src python -m palaestra.tasks.starter_harness"
RUNTIME = {p.name: p.read_bytes() for p in (*CHECK_RUNTIME, *HARNESS_RUNTIME)}
#: Runtime files of one answer kind (PostgreSQL, a function check) that no starter task has.
ONE_KIND_ONLY = {"palaestra_pg.py", "palaestra_calls.py"}


def _spec(task_id: str) -> dict:
    return marshal.loads(zlib.decompress((PACK_DIR / task_id / "tests" / SPEC).read_bytes()))


@pytest.mark.parametrize("task_id", sorted(starter_harness.BUILDERS))
def test_committed_files_are_the_built_ones(task_id: str) -> None:
    built = starter_harness.BUILDERS[task_id]()
    tests = PACK_DIR / task_id / "tests"
    assert set(built) & set(RUNTIME) == set(), "the builder leaves the runtime to the loader"
    for name, content in built.items():
        data = content.encode() if isinstance(content, str) else content
        assert (tests / name).read_bytes() == data, f"{task_id}/tests/{name} is stale: {REBUILD}"
    assert not list(tests.glob("test_*.py")), "the hand-built hidden test is gone"


def test_the_source_pack_holds_no_copy_of_the_runtime() -> None:
    """One source of truth: no file of the pack is named as, or holds the bytes of, a runtime
    file of the generators."""
    contents = set(RUNTIME.values())
    copies = [
        p.relative_to(PACK_DIR).as_posix()
        for p in PACK_DIR.rglob("*")
        if p.is_file() and (p.name in RUNTIME or p.read_bytes() in contents)
    ]
    assert copies == []


def test_a_loaded_harness_task_has_the_runtime_byte_for_byte() -> None:
    """What ``load_tasks("starter")`` runs: every task with a spec has the generators' runtime
    files, identical, and their bytecode; the other tasks get nothing added."""
    with_spec = {p.parent.parent.name for p in PACK_DIR.glob(f"*/tests/{SPEC}")}
    assert with_spec == set(starter_harness.BUILDERS)
    for task in TASKS:
        tests = task.path / "tests"
        assert tests != PACK_DIR / task.id / "tests", "the pack runs from its cache copy"
        source = {p.name for p in (PACK_DIR / task.id / "tests").iterdir()}
        added = {p.name for p in tests.iterdir()} - source
        if task.id not in starter_harness.BUILDERS:
            assert added == set(), task.id
            continue
        assert added == set(RUNTIME) - ONE_KIND_ONLY | {"__pycache__"}, task.id
        for name in added - {"__pycache__"}:
            assert (tests / name).read_bytes() == RUNTIME[name], f"{task.id}: {name}"
        compiled = {p.name.split(".")[0] for p in (tests / "__pycache__").iterdir()}
        assert {n.removesuffix(".py") for n in added if n.endswith(".py")} <= compiled


def test_a_changed_task_or_harness_is_materialised_again(tmp_path, monkeypatch) -> None:
    """The cache copy is content-addressed: the same pack is one directory; a changed task
    file, or a changed harness, is another, holding the new bytes."""
    task = "optimization-easy-order-report"
    source = tmp_path / "src" / "starter"
    (source / task / "tests").mkdir(parents=True)
    for p in (PACK_DIR / task / "tests").iterdir():
        (source / task / "tests" / p.name).write_bytes(p.read_bytes())
    first = pack_cache.materialise("starter", source=source, root=tmp_path / "cache")
    assert pack_cache.materialise("starter", source=source, root=tmp_path / "cache") == first
    (source / task / "tests" / "gen_data.py").write_text("# changed\n")
    second = pack_cache.materialise("starter", source=source, root=tmp_path / "cache")
    assert second != first
    assert (second / task / "tests" / "gen_data.py").read_text() == "# changed\n"
    harness = tmp_path / "palaestra_harness.py"
    harness.write_bytes(RUNTIME["palaestra_harness.py"] + b"# a new harness\n")
    changed = tuple(harness if p.name == harness.name else p for p in HARNESS_RUNTIME)
    monkeypatch.setattr(pack_cache, "HARNESS_RUNTIME", changed)
    third = pack_cache.materialise("starter", source=source, root=tmp_path / "cache")
    assert third not in (first, second)
    assert (third / task / "tests" / harness.name).read_bytes() == harness.read_bytes()


def test_a_pack_that_ships_a_runtime_copy_is_refused(tmp_path) -> None:
    task = "optimization-easy-order-report"
    tests = tmp_path / "starter" / task / "tests"
    tests.mkdir(parents=True)
    (tests / SPEC).write_bytes((PACK_DIR / task / "tests" / SPEC).read_bytes())
    (tests / "palaestra_check.py").write_bytes(RUNTIME["palaestra_check.py"])
    with pytest.raises(ValueError, match="ships its own copy"):
        pack_cache.materialise("starter", source=tmp_path / "starter", root=tmp_path / "c")


OPTIMIZATION = sorted(t for t in starter_harness.BUILDERS if t.startswith("optimization-"))
CLICKSTREAM = "data-querying-hard-clickstream-report"


@pytest.mark.parametrize("task_id", OPTIMIZATION)
def test_spec_fixes_expected_values_and_bars_the_large_inputs(task_id: str) -> None:
    spec = _spec(task_id)
    assert spec["answer"]["kind"] == "program" and spec["compare"]["how"] == "output"
    cases = spec["cases"]
    assert all(c["want"] for c in cases), "every expected value is fixed at build time"
    timed = [c for c in cases if c.get("cpu")]
    assert timed and all(c.get("make") for c in timed), "large inputs are made from seeds"
    assert all(f"within {c['cpu']} s of CPU" in c["label"] for c in timed)
    assert spec["reference"]["files"], "a Python that makes other data runs the reference"


def test_a_changed_reference_changes_the_spec(monkeypatch, tmp_path) -> None:
    """The expected values come from the task's reference: a reference that prints something
    else makes other expected values (the build is not a fixed copy)."""
    task = "optimization-hard-access-log-report"
    before = _spec(task)["cases"][0]["want"]
    pack = tmp_path / "starter"
    (pack / task / "tests").mkdir(parents=True)
    for p in (PACK_DIR / task / "tests").iterdir():
        (pack / task / "tests" / p.name).write_bytes(p.read_bytes())
    ref = pack / task / "tests" / "reference.py"
    ref.write_text("print('something else')\n")
    monkeypatch.setattr(starter_harness, "PACK", pack)
    spec = marshal.loads(zlib.decompress(starter_harness.access_log()[SPEC]))
    assert spec["cases"][0]["want"] == {"stdout": "something else\n", "files": {}} != before


class _Checks:
    def __init__(self) -> None:
        self.seen: list[tuple[str, bool, str]] = []

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.seen.append((name, ok, detail))


def test_clickstream_report_is_compared_number_by_number() -> None:
    """The report's comparison (a function shipped in tests/): the reference's own report
    passes; a revenue a cent and a half off, a count one off, a missing key or no file fail."""
    import json
    import sys

    spec = _spec(CLICKSTREAM)
    assert spec["compare"] == {"how": "function", "module": "report_compare", "fn": "check"}
    assert [c["label"] for c in spec["cases"]] == ["edge", "sample", "large"]
    sys.path.insert(0, str(PACK_DIR / CLICKSTREAM / "tests"))
    try:
        import report_compare
    finally:
        sys.path.pop(0)
    want = spec["cases"][0]["want"]
    report = json.loads(want["files"]["report.json"])
    country = next(iter(report["revenue_eur_by_country"]))

    def verdict(changed: dict | None) -> tuple[bool, str]:
        ck = _Checks()
        files = {} if changed is None else {"report.json": json.dumps(changed)}
        report_compare.check(ck, "edge", want, {"stdout": "", "files": files}, {})
        ((_, ok, detail),) = ck.seen
        return ok, detail

    assert verdict(report) == (True, "")
    off = json.loads(json.dumps(report))
    off["revenue_eur_by_country"][country] += 0.015
    assert verdict(off)[0] is False and country in verdict(off)[1]
    fewer = json.loads(json.dumps(report))
    fewer["funnel"] = {k: v + 1 if isinstance(v, int) else v for k, v in fewer["funnel"].items()}
    assert verdict(fewer)[0] is False
    assert verdict({k: v for k, v in report.items() if k != "users"})[0] is False
    assert verdict(None) == (False, "report.py wrote no regular file OUT_JSON")
