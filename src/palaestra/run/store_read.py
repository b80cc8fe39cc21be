"""Reading a run's ``results.db`` (blocking: call from a thread in async code): the run,
its episodes and their steps, and whether a run may resume there."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from palaestra.env.types import EpisodeStatus
from palaestra.run.store_schema import DB_NAME, SCHEMA_VERSION, connect, schema_version
from palaestra.scaffolds.base import EndReason


class RunMismatchError(ValueError):
    """The run directory holds results of a run configured differently."""


def check_identity(path: Path, stored: dict[str, Any], identity: dict[str, Any]) -> None:
    """Raise :class:`RunMismatchError` naming each difference of ``identity`` from ``stored``."""
    diffs = [
        f"{key}: stored {stored.get(key)!r}, now {identity.get(key)!r}"
        for key in sorted(set(stored) | set(identity))
        if stored.get(key) != identity.get(key)
    ]
    if diffs:
        raise RunMismatchError(
            f"{path} holds a run configured differently ({'; '.join(diffs)}). Resume it with "
            "the same options, write to a new --out directory, or pass --overwrite to discard "
            "its results"
        )


def db_path(run_dir: Path | str) -> Path:
    """``run_dir/results.db``; raises ``FileNotFoundError`` naming the fix when missing."""
    path = Path(run_dir) / DB_NAME
    if not path.is_file():
        raise FileNotFoundError(
            f"{run_dir} is not a run directory: it has no {DB_NAME}; pass the --out directory "
            "of a `palaestra eval` run"
        )
    return path


@contextmanager
def _readonly(run_dir: Path | str) -> Iterator[sqlite3.Connection]:
    path = db_path(run_dir)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        if schema_version(conn) < SCHEMA_VERSION:  # written by an older palaestra: migrate it first
            connect(path).close()
        conn.row_factory = sqlite3.Row
        yield conn
    finally:
        conn.close()


def read_run(run_dir: Path | str) -> dict[str, Any]:
    """The ``runs`` row, with ``config`` parsed."""
    with _readonly(run_dir) as conn:
        row = conn.execute("SELECT * FROM runs").fetchone()
    if row is None:
        raise ValueError(f"{run_dir}/{DB_NAME} holds no run yet")
    run = dict(row)
    run["config"] = json.loads(run["config"])
    return run


def check_resumable(run_dir: Path | str, identity: dict[str, Any]) -> None:
    """Raise :class:`RunMismatchError` now if ``run_dir`` holds a run whose identity is not
    ``identity`` (what :meth:`ResultStore.begin_run` would refuse); nothing when it holds none."""
    if not (Path(run_dir) / DB_NAME).is_file():
        return
    with _readonly(run_dir) as conn:
        row = conn.execute("SELECT config FROM runs").fetchone()
    if row is not None:
        check_identity(db_path(run_dir), json.loads(row[0]).get("identity", {}), identity)


def _episode_dict(row: sqlite3.Row) -> dict[str, Any]:
    record = dict(row)
    record["status"] = EpisodeStatus(record["status"])
    if record["end_reason"] is not None:
        record["end_reason"] = EndReason(record["end_reason"])
    record["rewards"] = json.loads(record["rewards"])
    record["verified"] = bool(record["verified"])
    record["final"] = bool(record["final"])
    record["infra_error"] = bool(record["infra_error"])
    return record


def read_episodes(run_dir: Path | str, *, final_only: bool = True) -> list[dict[str, Any]]:
    """Episode rows (without steps) in the order they finished."""
    where = "WHERE final = 1" if final_only else ""
    with _readonly(run_dir) as conn:
        rows = conn.execute(f"SELECT * FROM episodes {where} ORDER BY id").fetchall()
    return [_episode_dict(r) for r in rows]


def read_steps(run_dir: Path | str, episode_rowids: list[int] | None = None) -> dict[int, list]:
    """``episode row id -> [step dicts]`` (all episodes when ``episode_rowids`` is None)."""
    steps: dict[int, list[dict[str, Any]]] = {}
    with _readonly(run_dir) as conn:
        for row in _iter_steps(conn, episode_rowids):
            steps.setdefault(row["episode"], []).append(row)
    return steps


def _iter_steps(
    conn: sqlite3.Connection, episode_rowids: list[int] | None
) -> Iterator[dict[str, Any]]:
    if episode_rowids is None:
        rows = conn.execute("SELECT * FROM steps ORDER BY episode, turn")
    else:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (id INTEGER PRIMARY KEY)")
        conn.execute("DELETE FROM wanted")
        conn.executemany("INSERT INTO wanted VALUES (?)", ((i,) for i in episode_rowids))
        rows = conn.execute(
            "SELECT * FROM steps WHERE episode IN (SELECT id FROM wanted) ORDER BY episode, turn"
        )
    for row in rows:
        yield {
            "episode": row["episode"],
            "turn": row["turn"],
            "messages_from": row["messages_from"],
            "new_messages": json.loads(row["new_messages"]),
            "response": json.loads(row["response"]),
            "execution": json.loads(row["execution"]) if row["execution"] else None,
            "tools": json.loads(row["tools"]) if row["tools"] else None,
        }
