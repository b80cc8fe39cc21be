"""The results store: one SQLite file (``results.db``) per run directory.

Its layout (tables, version, migrations) is :mod:`palaestra.run.store_schema`; reading it
:mod:`palaestra.run.store_read` (re-exported here). This module writes it:
:class:`ResultStore`.

SQLite runs in one writer thread, never on the event loop, in WAL mode. Each episode is written
in one transaction as soon as it ends, so a crash loses at most the episodes in flight.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from palaestra.env.types import EpisodeStatus
from palaestra.run.store_read import (
    RunMismatchError,
    check_identity,
    check_resumable,
    db_path,
    read_episodes,
    read_run,
    read_steps,
)
from palaestra.run.store_schema import (
    DB_NAME,
    EPISODE_COLUMNS,
    SCHEMA_VERSION,
    connect,
    transaction,
)
from palaestra.scaffolds.base import EndReason

__all__ = [
    "DB_NAME",
    "SCHEMA_VERSION",
    "EpisodeRow",
    "ResultStore",
    "RunMismatchError",
    "StepRecord",
    "check_resumable",
    "db_path",
    "palaestra_version",
    "read_episodes",
    "read_run",
    "read_steps",
]


def palaestra_version() -> str:
    try:
        return version("palaestra")
    except PackageNotFoundError:
        return "unknown"


@dataclass
class StepRecord:
    """One turn of an episode, as stored."""

    turn: int
    messages_from: int
    new_messages: list[dict[str, Any]]
    response: dict[str, Any]
    execution: dict[str, Any] | None = None
    #: The tools the request offered, where they differ from the turn before's (else None).
    tools: list[dict[str, Any]] | None = None


@dataclass
class EpisodeRow:
    """One episode try: the ``episodes`` columns plus its steps."""

    values: dict[str, Any]
    steps: list[StepRecord] = field(default_factory=list)


class ResultStore:
    """Async access to ``results.db``: every call runs in the store's single writer thread.

    Open with ``await ResultStore.open(run_dir)``; close with ``await store.aclose()``.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection, executor: ThreadPoolExecutor):
        self.path = path
        self._conn = conn
        self._executor = executor

    @classmethod
    async def open(cls, run_dir: Path | str) -> ResultStore:
        run_dir = Path(run_dir)
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="palaestra-store")
        loop = asyncio.get_running_loop()

        def _open() -> sqlite3.Connection:
            run_dir.mkdir(parents=True, exist_ok=True)
            return connect(run_dir / DB_NAME)

        try:
            conn = await loop.run_in_executor(executor, _open)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(run_dir / DB_NAME, conn, executor)

    async def _call(self, fn: Any, *args: Any) -> Any:
        # shield: once handed to the writer thread a write completes even if the caller is
        # cancelled (Ctrl-C), so the database never holds half an episode.
        future = asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        return await asyncio.shield(future)

    async def aclose(self) -> None:
        await self._call(self._conn.close)
        self._executor.shutdown(wait=True)

    # -- runs -----------------------------------------------------------------------------

    async def begin_run(
        self, run_id: str, *, identity: dict[str, Any], config: dict[str, Any]
    ) -> bool:
        """Record the run, or check that the stored one matches; True when it resumes.

        ``identity`` holds what results depend on (env, policy, scaffold, sandbox, attempts,
        seed): a stored run with other values raises :class:`RunMismatchError` naming them.
        """
        return await self._call(self._begin_run, run_id, identity, config)

    def _begin_run(self, run_id: str, identity: dict[str, Any], config: dict[str, Any]) -> bool:
        row = self._conn.execute("SELECT run_id, config FROM runs").fetchone()
        if row is not None:
            check_identity(self.path, json.loads(row[1]).get("identity", {}), identity)
            self._conn.execute(
                "UPDATE runs SET finished_at = NULL, stop_reason = NULL WHERE run_id = ?",
                (row[0],),
            )
            return True
        self._conn.execute(
            "INSERT INTO runs (run_id, env_id, policy, scaffold, sandbox, config, started_at, "
            "palaestra_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                identity["env_id"],
                identity["policy"],
                identity["scaffold"],
                identity["sandbox"],
                json.dumps({"identity": identity, **config}),
                time.time(),
                palaestra_version(),
            ),
        )
        return False

    async def run_id(self) -> str | None:
        row = await self._call(lambda: self._conn.execute("SELECT run_id FROM runs").fetchone())
        return row[0] if row else None

    async def finish_run(self, finished_at: float, stop_reason: str | None) -> None:
        await self._call(
            lambda: self._conn.execute(
                "UPDATE runs SET finished_at = ?, stop_reason = ?", (finished_at, stop_reason)
            )
        )

    async def done_jobs(self) -> dict[tuple[str, int], int]:
        """``(task_id, attempt) -> count`` of final episodes already stored."""
        rows = await self._call(
            lambda: self._conn.execute(
                "SELECT task_id, attempt, COUNT(*) FROM episodes WHERE final = 1 "
                "GROUP BY task_id, attempt"
            ).fetchall()
        )
        return {(t, a): n for t, a, n in rows}

    async def total_cost(self) -> float:
        """USD spent so far, over every try (retried ones cost money too)."""
        row = await self._call(
            lambda: self._conn.execute("SELECT COALESCE(SUM(cost_usd), 0) FROM episodes").fetchone()
        )
        return float(row[0])

    # -- episodes -------------------------------------------------------------------------

    async def add_episode(self, row: EpisodeRow) -> int:
        """Write one episode try and its steps in one transaction; return its row id.

        Idempotent by ``episode_id``: an episode already stored (delivered twice, say by a
        cluster that retried its transfer) is not written again; its row id is returned."""
        return await self._call(self._add_episode, row)

    def _add_episode(self, row: EpisodeRow) -> int:
        # The vocabulary is checked here: a row never holds a status or end reason it does not
        # define (ValueError names the bad value).
        checked = {
            **row.values,
            "status": EpisodeStatus(row.values["status"]),
            "end_reason": EndReason(row.values["end_reason"]),
        }
        values = [checked.get(c) for c in EPISODE_COLUMNS]
        with transaction(self._conn):
            if row.values.get("episode_id") is not None:
                stored = self._conn.execute(
                    "SELECT id FROM episodes WHERE episode_id = ?", (row.values["episode_id"],)
                ).fetchone()
                if stored is not None:
                    return int(stored[0])
            cur = self._conn.execute(
                f"INSERT INTO episodes ({', '.join(EPISODE_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(EPISODE_COLUMNS))})",
                values,
            )
            rowid = cur.lastrowid
            assert rowid is not None
            self._conn.executemany(
                "INSERT INTO steps (episode, turn, messages_from, new_messages, response, "
                "execution, tools) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        rowid,
                        s.turn,
                        s.messages_from,
                        json.dumps(s.new_messages),
                        json.dumps(s.response),
                        json.dumps(s.execution) if s.execution is not None else None,
                        json.dumps(s.tools) if s.tools is not None else None,
                    )
                    for s in row.steps
                ],
            )
        return rowid
