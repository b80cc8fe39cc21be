"""The starter tasks that run no agent code (library-loans, archive-logs) on the harness's
``state`` answer: their specs fix the expected values from the task's own data, and their
comparisons read what the agent left without following links, regular files only, so a
link to a root-only file, a FIFO or a link in the archive fails at once (issue 29)."""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import sys
import zlib
from pathlib import Path
from types import ModuleType

import pytest

from palaestra.tasks import starter_harness_state
from palaestra.tasks.generators import harness_spec
from palaestra.tasks.generators.harness_spec import SPEC
from palaestra.tasks.starter_harness_calls import pack_module
from tests.tasks.starter.pack import PACK_DIR

LOANS = "data-querying-easy-library-loans"
ARCHIVE = "file-operations-easy-archive-logs"


def _spec(task_id: str) -> dict:
    return marshal.loads(zlib.decompress((PACK_DIR / task_id / "tests" / SPEC).read_bytes()))


class _Checks:
    def __init__(self) -> None:
        self.seen: list[tuple[str, bool, str]] = []

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.seen.append((name, ok, detail))


@pytest.fixture
def archive_check(monkeypatch) -> ModuleType:
    """The task's comparison, importing the jail's reader as it does in the checker."""
    monkeypatch.syspath_prepend(str(Path(harness_spec.__file__).parent))
    monkeypatch.delitem(sys.modules, "palaestra_jail", raising=False)
    return pack_module(ARCHIVE, "archive_check", PACK_DIR)


def test_specs_look_at_the_declared_paths_with_expected_values_fixed() -> None:
    loans = _spec(LOANS)
    assert loans["answer"] == {"kind": "state"} and loans["reward"] == "partial"
    (case,) = loans["cases"]
    assert case["path"] == "/app/answers.json"
    assert case["want"] == pack_module(LOANS, "library_data", PACK_DIR).answers()
    archive = _spec(ARCHIVE)
    assert archive["answer"] == {"kind": "state"} and archive.get("reward", "all") == "all"
    layout, incoming = archive["cases"]
    assert (layout["path"], incoming["path"]) == ("/app/archive", "/app/incoming")
    manifest = json.loads((PACK_DIR / ARCHIVE / "tests" / "manifest.json").read_text())
    assert sorted(layout["want"]["files"].values()) == sorted(manifest.values())
    assert layout["want"]["files"]["auth-api/2024/01/auth-api-2024-01-23.log"]
    assert "unsorted/app-31-02-2024.log" in layout["want"]["files"]  # 31 February
    assert set(starter_harness_state.BUILDERS) == {LOANS, ARCHIVE}


def test_loans_check_scores_keys_and_fails_a_link_or_bad_json() -> None:
    mod = pack_module(LOANS, "loans_check", PACK_DIR)
    want = pack_module(LOANS, "library_data", PACK_DIR).answers()
    near = dict(want, open_loans=want["open_loans"] + 1, avg_loan_days=want["avg_loan_days"])
    cases = [
        ({"type": "file", "text": json.dumps(want)}, len(want)),
        ({"type": "file", "text": json.dumps(near)}, len(want) - 1),
        ({"type": "link", "text": None}, 0),  # never read through: the checker is root
        ({"type": "other", "text": None}, 0),
        ({"type": "file", "text": "[1, 2]"}, 0),
        ({"type": "file", "text": "{not json"}, 0),
    ]
    for got, passed in cases:
        ck = _Checks()
        mod.check(ck, "answers.json", want, got, {})
        assert [name for name, _, _ in ck.seen] == list(want)
        assert sum(ok for _, ok, _ in ck.seen) == passed, got


def _layout(root, want: dict[str, str], texts: dict[str, bytes]) -> None:
    for rel in want:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(texts[rel])


def test_archive_check_refuses_fifos_and_links(tmp_path, archive_check) -> None:
    texts = {"db/2024/01/db-2024-01-01.log": b"one\n", "unsorted/README": b"two\n"}
    want = {rel: hashlib.sha256(data).hexdigest() for rel, data in texts.items()}
    archive = tmp_path / "archive"
    _layout(archive, want, texts)

    def verdict(path, kind="dir", **extra):
        ck = _Checks()
        archive_check.check(ck, "case", dict({"path": str(path)}, **extra), {"type": kind}, {})
        ((_, ok, detail),) = ck.seen
        return ok, detail

    assert verdict(archive, files=want) == (True, "")
    assert verdict(tmp_path / "incoming", "absent", empty=True) == (True, "")
    assert verdict(archive, "link", files=want)[0] is False  # the folder, or one on it, a link
    os.mkfifo(archive / "unsorted" / "pending.log")  # a plain open would block here
    ok, detail = verdict(archive, files=want)
    assert not ok and "unsorted/pending.log is not a regular file" in detail
    (archive / "unsorted" / "pending.log").unlink()
    kept = tmp_path / "kept"
    kept.write_bytes(texts["unsorted/README"])
    (archive / "unsorted" / "README").unlink()
    (archive / "unsorted" / "README").symlink_to(kept)  # its right bytes, elsewhere
    ok, detail = verdict(archive, files=want)
    assert not ok and "unsorted/README is a symlink" in detail
    ok, detail = verdict(archive, empty=True)
    assert not ok and "db/2024/01/db-2024-01-01.log is still there" in detail
