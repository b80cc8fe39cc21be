"""The results store's layout: its tables, their version and the migrations, opening a
connection, and a transaction.

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

``PRAGMA user_version`` numbers the layout (:data:`SCHEMA_VERSION`); a store written by an
older palaestra is migrated when it is opened, for writing or reading.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

DB_NAME = "results.db"

SCHEMA_VERSION = 2
"""The store's layout, in ``PRAGMA user_version``. Version 0 (no number) wrote a failed
episode cut by a limit with that limit as its ``status`` (``agent_timeout``, ``step_limit``);
since 1 ``status`` is always an :class:`EpisodeStatus` and the limit is in ``end_reason``;
since 2 ``steps.tools`` holds the tools a request offered."""

#: The SQL that brings a store from the version before each key to that version.
MIGRATIONS = {
    1: "UPDATE episodes SET end_reason = status, status = 'failed' "
    "WHERE status IN ('agent_timeout', 'step_limit')",
    2: "ALTER TABLE steps ADD COLUMN tools TEXT",
}

SCHEMA = """
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
EPISODE_COLUMNS = (
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


def connect(path: Path) -> sqlite3.Connection:
    """A connection for writing (WAL) to the store at ``path``, its tables made and migrated."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.executescript(SCHEMA)
    _migrate(conn)
    return conn


def schema_version(conn: sqlite3.Connection) -> int:
    """The layout version of the store behind ``conn``."""
    return conn.execute("PRAGMA user_version").fetchone()[0]


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a store written by an older palaestra to :data:`SCHEMA_VERSION`, in one
    transaction (a new store only gets the number)."""
    if schema_version(conn) >= SCHEMA_VERSION:
        return
    with transaction(conn):
        version = schema_version(conn)  # another process may have migrated it meanwhile
        for target in range(version + 1, SCHEMA_VERSION + 1):
            conn.execute(MIGRATIONS[target])
        if version < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


class transaction:
    """``with transaction(conn):`` one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an
    exception)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
