"""A rollout stream's episodes in the results store, so a training run reports like an eval.

The stream writes to the same ``results.db`` as ``evaluate`` (:mod:`palaestra.run.store`):
one ``runs`` row for the stream, one ``episodes`` row per finished episode try with its steps.
A GRPO group's rows are written together when the group ends (complete, or dropped for an
error), never before: a stream cancelled mid-group leaves no row of that group. An errored
try that was retried has ``final = 0``; the try that counts has ``final = 1``. ``attempt``
counts the episodes run on a task so far in the stream (so ``pass@k`` reads as in an eval).

Rows come from :func:`palaestra.run.rows.episode_row`, the one mapping from episodes to
rows that ``evaluate`` uses too.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from palaestra.run.store import EpisodeRow, ResultStore


class StreamRecorder:
    """Writes a stream's rows to ``out_dir/results.db``; open with :meth:`open`."""

    def __init__(self, store: ResultStore, run_id: str) -> None:
        self._store = store
        self.run_id = run_id
        self._writes: set[asyncio.Task[int]] = set()

    @classmethod
    async def open(
        cls, out_dir: Path | str, identity: dict[str, Any], config: dict[str, Any]
    ) -> StreamRecorder:
        store = await ResultStore.open(out_dir)
        try:
            await store.begin_run(uuid.uuid4().hex[:12], identity=identity, config=config)
            run_id = await store.run_id()
        except BaseException:
            await store.aclose()
            raise
        assert run_id is not None
        return cls(store, run_id)

    async def write(self, rows: list[EpisodeRow]) -> None:
        """Write rows one transaction each; a write goes on if the caller is cancelled."""
        for row in rows:
            row.values.update(run_id=self.run_id, finished_at=time.time())
            task = asyncio.ensure_future(self._store.add_episode(row))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)
            await asyncio.shield(task)

    async def aclose(self, stop_reason: str | None) -> None:
        if self._writes:  # cancelled mid-write: the rows of finished episodes still land
            await asyncio.wait(self._writes)
        try:
            await self._store.finish_run(time.time(), stop_reason)
        finally:
            await self._store.aclose()


def stream_identity(env_id: Any, policy: Any, env: Any, size: int, seed: int) -> dict[str, Any]:
    """The ``runs`` row's identity of a stream of ``env_id`` (an id or a factory) with
    ``policy`` (a name or a client), ``env`` one of its environments, groups of ``size``."""
    scaffold = getattr(env, "scaffold", None)
    backend = getattr(env, "backend", None)
    return {
        "env_id": env_id if isinstance(env_id, str) else getattr(env, "env_id", "env"),
        "policy": policy
        if isinstance(policy, str)
        else getattr(policy, "name", type(policy).__name__),
        "scaffold": getattr(scaffold, "name", "unknown"),
        "sandbox": getattr(backend, "name", "unknown"),
        "attempts": size,  # per draw; the report's "planned" reads attempts x tasks
        "tasks": [],  # a stream draws its tasks as it goes
        "stream": {"seed": seed},
    }


def number_rows(
    task_id: str, seed: int, rows: list[list[EpisodeRow]], attempts: Counter[str]
) -> list[EpisodeRow]:
    """A finished draw's tries, one list per group member, flattened and numbered: each
    member's tries share one ``attempt`` number (``attempts`` counts them per task)."""
    known = [r.values["task_id"] for member in rows for r in member if r.values["task_id"]]
    task_id = task_id or (known[0] if known else "unknown")
    flat: list[EpisodeRow] = []
    for member in rows:
        if not member:
            continue
        attempt = attempts[task_id]
        attempts[task_id] += 1
        for row in member:
            row.values.update(task_id=row.values["task_id"] or task_id, attempt=attempt, seed=seed)
            flat.append(row)
    return flat
