"""The results store: one SQLite file (``results.db``) per run directory.

Three tables:

* ``runs``: one row per run directory: its id, env, policy, scaffold, sandbox, the config JSON
  that resuming must match, start/finish times, why it stopped early, the palaestra version.
* ``episodes``: one row per episode *try*, keyed by its ``episode_id`` (a retried infrastructure error leaves its own row
  with ``final = 0``; the try that counts has ``final = 1``): task, family/category/difficulty,
  attempt, seed, status (an :class:`~palaestra.env.types.EpisodeStatus`: ``passed | failed |
  error``), end reason (an :class:`~palaestra.scaffolds.base.EndReason`: ``submitted``,
  ``step_limit``, ``agent_timeout``, ...), error class and message, every reward key, steps,
  per-phase timings, tokens, USD cost (NULL when unknown), wall time, episode id.
* ``steps``: one row per turn: the request's new messages (the messages it adds to the previous
  request: ``messages_from`` says where they start, so request *t* is the concatenation of
  ``new_messages`` of turns 0..t), the tools the request offered (only where they differ from
  the turn before's; NULL: unchanged), the response (content, tool calls, token ids, logprobs),
  and what the scaffold ran for it (command, output, exit code) as JSON.

SQLite runs in one writer thread, never on the event loop, in WAL mode. Each episode is written
in one transaction as soon as it ends, so a crash loses at most the episodes in flight.

``PRAGMA user_version`` numbers the layout (:data:`SCHEMA_VERSION`); a store written by an
older palaestra is migrated when it is opened, for writing or reading.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from palaestra.env.types import EpisodeStatus
from palaestra.scaffolds.base import EndReason

DB_NAME = "results.db"

SCHEMA_VERSION = 2
"""The store's layout, in ``PRAGMA user_version``. Version 0 (no number) wrote a failed
episode cut by a limit with that limit as its ``status`` (``agent_timeout``, ``step_limit``);
since 1 ``status`` is always an :class:`EpisodeStatus` and the limit is in ``end_reason``;
since 2 ``steps.tools`` holds the tools a request offered."""

#: The SQL that brings a store from the version before each key to that version.
_MIGRATIONS = {
    1: "UPDATE episodes SET end_reason = status, status = 'failed' "
    "WHERE status IN ('agent_timeout', 'step_limit')",
    2: "ALTER TABLE steps ADD COLUMN tools TEXT",
}

_SCHEMA = """
BEGIN;
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    env_id TEXT NOT NULL,
    policy TEXT NOT NULL,
    scaffold TEXT NOT NULL,
    sandbox TEXT NOT NULL,
    config TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    stop_reason TEXT,
    palaestra_version TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS episodes (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    episode_id TEXT,
    task_id TEXT NOT NULL,
    family TEXT,
    category TEXT,
    difficulty TEXT,
    attempt INTEGER NOT NULL,
    try INTEGER NOT NULL DEFAULT 0,
    final INTEGER NOT NULL,
    seed INTEGER,
    status TEXT NOT NULL,
    end_reason TEXT,
    error_class TEXT,
    error_message TEXT,
    infra_error INTEGER NOT NULL DEFAULT 0,
    reward REAL NOT NULL,
    rewards TEXT NOT NULL,
    verified INTEGER NOT NULL,
    verifier_output TEXT,
    steps INTEGER NOT NULL,
    sandbox_start_s REAL,
    agent_s REAL,
    policy_s REAL,
    verifier_s REAL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    cost_usd REAL,
    wall_s REAL NOT NULL,
    finished_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS episodes_job ON episodes(run_id, task_id, attempt, final);
CREATE UNIQUE INDEX IF NOT EXISTS episodes_episode_id ON episodes(episode_id)
    WHERE episode_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS steps (
    episode INTEGER NOT NULL REFERENCES episodes(id),
    turn INTEGER NOT NULL,
    messages_from INTEGER NOT NULL,
    new_messages TEXT NOT NULL,
    response TEXT NOT NULL,
    execution TEXT,
    PRIMARY KEY (episode, turn)
    -- tools TEXT: added by migration 2, in every store (a new one too)
);
COMMIT;
"""

#: Columns of ``episodes`` a record maps to one to one (the rest are JSON or derived).
_EPISODE_COLUMNS = (
    "run_id",
    "episode_id",
    "task_id",
    "family",
    "category",
    "difficulty",
    "attempt",
    "try",
    "final",
    "seed",
    "status",
    "end_reason",
    "error_class",
    "error_message",
    "infra_error",
    "reward",
    "rewards",
    "verified",
    "verifier_output",
    "steps",
    "sandbox_start_s",
    "agent_s",
    "policy_s",
    "verifier_s",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cost_usd",
    "wall_s",
    "finished_at",
)


class RunMismatchError(ValueError):
    """The run directory holds results of a run configured differently."""


def _check_identity(path: Path, stored: dict[str, Any], identity: dict[str, Any]) -> None:
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


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.executescript(_SCHEMA)
    _migrate(conn)
    return conn


def _version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a store written by an older palaestra to :data:`SCHEMA_VERSION`, in one
    transaction (a new store only gets the number)."""
    if _version(conn) >= SCHEMA_VERSION:
        return
    with _transaction(conn):
        version = _version(conn)  # another process may have migrated it meanwhile
        for target in range(version + 1, SCHEMA_VERSION + 1):
            conn.execute(_MIGRATIONS[target])
        if version < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


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
            return _connect(run_dir / DB_NAME)

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
            _check_identity(self.path, json.loads(row[1]).get("identity", {}), identity)
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
        values = [checked.get(c) for c in _EPISODE_COLUMNS]
        with _transaction(self._conn):
            if row.values.get("episode_id") is not None:
                stored = self._conn.execute(
                    "SELECT id FROM episodes WHERE episode_id = ?", (row.values["episode_id"],)
                ).fetchone()
                if stored is not None:
                    return int(stored[0])
            cur = self._conn.execute(
                f"INSERT INTO episodes ({', '.join(_EPISODE_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(_EPISODE_COLUMNS))})",
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


class _transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")


# -- reading (blocking: call from a thread in async code) -----------------------------------


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
        if _version(conn) < SCHEMA_VERSION:  # written by an older palaestra: migrate it first
            _connect(path).close()
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
        _check_identity(db_path(run_dir), json.loads(row[0]).get("identity", {}), identity)


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
