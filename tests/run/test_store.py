"""The results store's status vocabulary: it round-trips, it is checked, old stores migrate."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from palaestra.env.types import EpisodeStatus
from palaestra.run import metrics
from palaestra.run.export import export
from palaestra.run.report import run_data
from palaestra.run.store import (
    DB_NAME,
    SCHEMA_VERSION,
    EpisodeRow,
    ResultStore,
    read_episodes,
)
from palaestra.scaffolds.base import EndReason

OLD_STORE = Path(__file__).parent / "data" / "results_v0.sql"
IDENTITY = {
    "env_id": "e",
    "policy": "p",
    "scaffold": "bash",
    "sandbox": "local",
    "attempts": 1,
    "seed": 0,
    "tasks": [],
    "env_overrides": {},
}


def _row(task_id: str, status: str, end_reason: str, **extra) -> EpisodeRow:
    values = {
        "task_id": task_id,
        "attempt": 0,
        "try": 0,
        "final": 1,
        "status": status,
        "end_reason": end_reason,
        "reward": float(status == "passed"),
        "rewards": "{}",
        "verified": 1,
        "steps": 1,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cached_tokens": 0,
        "infra_error": 0,
        "wall_s": 0.5,
        "finished_at": 1.0,
        **extra,
    }
    return EpisodeRow(values)


def _user_version(run_dir: Path) -> int:
    with sqlite3.connect(run_dir / DB_NAME) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]


async def test_the_vocabulary_round_trips_through_the_store(tmp_path):
    pairs = [(status, reason) for status in EpisodeStatus for reason in EndReason]
    store = await ResultStore.open(tmp_path)
    try:
        await store.begin_run("r", identity=IDENTITY, config={})
        for i, (status, reason) in enumerate(pairs):
            await store.add_episode(_row(f"t{i}", status, reason, run_id="r"))
        # a plain string of the vocabulary is accepted; anything else is refused, unwritten
        await store.add_episode(_row("plain", "failed", "step_limit", run_id="r"))
        for status, reason in (("step_limit", "step_limit"), ("failed", "timeout")):
            with pytest.raises(ValueError, match="is not a valid"):
                await store.add_episode(_row("bad", status, reason, run_id="r"))
    finally:
        await store.aclose()
    records = read_episodes(tmp_path)
    assert [(r["status"], r["end_reason"]) for r in records] == [
        *pairs,
        (EpisodeStatus.FAILED, EndReason.STEP_LIMIT),
    ]
    assert all(
        type(r["status"]) is EpisodeStatus and type(r["end_reason"]) is EndReason for r in records
    )
    assert _user_version(tmp_path) == SCHEMA_VERSION
    summary = metrics.summarize(records)
    assert summary["statuses"] == {"error": 6, "failed": 7, "passed": 6}
    assert summary["end_reasons"] == {
        "agent_timeout": 3,
        "error": 3,
        "exception": 3,
        "format_error_limit": 3,
        "step_limit": 4,
        "submitted": 3,
    }
    assert json.loads(json.dumps(summary))["statuses"] == summary["statuses"]
    assert export(tmp_path, tmp_path / "e.jsonl", "jsonl") == len(pairs) + 1
    lines = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert [(r["status"], r["end_reason"]) for r in lines[:2]] == [
        ("passed", "submitted"),
        ("passed", "step_limit"),
    ]


def _old_store(run_dir: Path) -> Path:
    run_dir.mkdir()
    with sqlite3.connect(run_dir / DB_NAME) as conn:
        conn.executescript(OLD_STORE.read_text())
    assert _user_version(run_dir) == 0
    return run_dir


def _pairs(records: list[dict]) -> dict[tuple[str, int], tuple[str, str]]:
    return {(r["task_id"], r["try"]): (r["status"], r["end_reason"]) for r in records}


OLD_AS_NEW = {
    ("t-pass", 0): ("passed", "submitted"),
    ("t-fail", 0): ("failed", "submitted"),
    ("t-timeout", 0): ("failed", "agent_timeout"),  # stored as status 'agent_timeout'
    ("t-steps", 0): ("failed", "step_limit"),  # stored as status 'step_limit'
    ("t-trunc-pass", 0): ("passed", "step_limit"),
    ("t-crash", 0): ("error", "error"),
    ("t-crash", 1): ("failed", "submitted"),
    ("t-verifier", 0): ("error", "submitted"),
    ("t-policy", 0): ("error", "exception"),
}


def test_an_old_store_is_migrated_when_reported(tmp_path):
    run_dir = _old_store(tmp_path / "old")
    with sqlite3.connect(run_dir / DB_NAME) as conn:
        old = dict(conn.execute("SELECT task_id, status FROM episodes WHERE final = 1"))
    assert old["t-timeout"] == "agent_timeout" and old["t-steps"] == "step_limit"
    assert _pairs(read_episodes(run_dir, final_only=False)) == OLD_AS_NEW
    assert _user_version(run_dir) == SCHEMA_VERSION
    data = run_data(run_dir)
    assert data["summary"]["statuses"] == {"error": 2, "failed": 4, "passed": 2}
    assert data["summary"]["end_reasons"]["agent_timeout"] == 1
    assert data["summary"]["errors_by_class"] == {
        "VerifierError": {"count": 1, "rate": 0.125},
        "ValueError": {"count": 1, "rate": 0.125},
    }
    assert _pairs(read_episodes(run_dir, final_only=False)) == OLD_AS_NEW  # migrating is once


async def test_an_old_store_resumes(tmp_path):
    run_dir = _old_store(tmp_path / "old")
    with sqlite3.connect(run_dir / DB_NAME) as conn:
        identity = json.loads(conn.execute("SELECT config FROM runs").fetchone()[0])["identity"]
    store = await ResultStore.open(run_dir)
    try:
        assert _user_version(run_dir) == SCHEMA_VERSION
        assert await store.begin_run("new", identity=identity, config={}) is True
        assert set(await store.done_jobs()) == {(t, 0) for t in identity["tasks"]}
        await store.add_episode(
            _row("t-new", "failed", "agent_timeout", run_id=await store.run_id())
        )
    finally:
        await store.aclose()
    pairs = _pairs(read_episodes(run_dir, final_only=False))
    assert pairs == {**OLD_AS_NEW, ("t-new", 0): ("failed", "agent_timeout")}


async def test_an_episode_delivered_twice_is_stored_once(tmp_path):
    """A row is keyed by its episode id: a second delivery of the same episode (a cluster
    retrying a transfer) writes nothing and returns the first row's id."""
    store = await ResultStore.open(tmp_path)
    try:
        await store.begin_run("r", identity=IDENTITY, config={})
        first = await store.add_episode(
            _row("t", "passed", "submitted", run_id="r", episode_id="ep-1")
        )
        again = await store.add_episode(
            _row("t", "passed", "submitted", run_id="r", episode_id="ep-1")
        )
        other = await store.add_episode(
            _row("t", "failed", "submitted", run_id="r", episode_id="ep-2", attempt=1)
        )
    finally:
        await store.aclose()
    assert again == first != other
    assert [r["episode_id"] for r in read_episodes(tmp_path)] == ["ep-1", "ep-2"]
