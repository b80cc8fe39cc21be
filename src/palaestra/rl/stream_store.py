"""A rollout stream's episodes in the results store, so a training run reports like an eval.

The stream writes to the same ``results.db`` as ``evaluate`` (:mod:`palaestra.run.store`):
one ``runs`` row for the stream, one ``episodes`` row per finished episode try with its steps.
A GRPO group's rows are written together when the group ends (complete, or dropped for an
error), never before: a stream cancelled mid-group leaves no row of that group. An errored
try that was retried has ``final = 0``; the try that counts has ``final = 1``. ``attempt``
counts the episodes run on a task so far in the stream (so ``pass@k`` reads as in an eval).

The mapping from an :class:`~palaestra.run.rollout.Episode` to a row reads only what every
episode has (status, end reason, reward, turns) plus the LAST info's optional extras (usage,
timings, rewards, verifier output), so it serves both the loose ``info`` keys and a typed
``info["end"]``. The turns become step rows exactly as ``evaluate`` writes them.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

from palaestra.env.types import EpisodeStatus
from palaestra.run.evaluate import _steps, is_infra_error
from palaestra.run.rollout import Episode
from palaestra.run.store import EpisodeRow, ResultStore
from palaestra.scaffolds.base import EndReason


def _end(info: dict[str, Any], key: str, default: Any = None) -> Any:
    """``info["end"].<key>`` when the env reports a typed end, else ``info[key]``."""
    end = info.get("end")
    if end is not None and hasattr(end, key):
        return getattr(end, key)
    return info.get(key, default)


def episode_row(episode: Episode, **values: Any) -> EpisodeRow:
    """The store row of a finished episode; ``values`` adds the job columns (attempt, seed)."""
    info = episode.info
    usage = info.get("usage") or {}
    timings = info.get("timings") or {}
    verifier = _end(info, "verifier")
    output = verifier.get("output", "") if isinstance(verifier, dict) else ""
    output = getattr(verifier, "output", output) or ""
    row = {
        "episode_id": info.get("episode_id"), "task_id": episode.task_id,
        "category": info.get("category"), "difficulty": info.get("difficulty"),
        "status": episode.status, "end_reason": episode.end_reason or EndReason.EXCEPTION,
        "error_class": _end(info, "error_class"), "error_message": _end(info, "error_message"),
        "reward": episode.reward, "rewards": json.dumps(dict(_end(info, "rewards") or {})),
        "verified": int(bool(_end(info, "verified"))), "verifier_output": output,
        "steps": len(episode.turns), "sandbox_start_s": timings.get("sandbox_start_s"),
        "agent_s": timings.get("agent_s"), "policy_s": timings.get("policy_s"),
        "verifier_s": timings.get("verifier_s"),
        "prompt_tokens": usage.get("prompt_tokens", 0),
        "completion_tokens": usage.get("completion_tokens", 0),
        "cached_tokens": usage.get("cached_tokens", 0), "cost_usd": info.get("cost_usd"),
        "wall_s": episode.wall_s, "infra_error": int(bool(_end(info, "infra_error", False))),
    }  # fmt: skip
    return EpisodeRow(
        {**row, **values}, _steps(episode.turns, episode.info.get("trajectory") or [])
    )


def failure_row(error: BaseException, task_id: str, wall_s: float, **values: Any) -> EpisodeRow:
    """The store row of a try that raised before reaching LAST."""
    row = {
        "task_id": task_id, "status": EpisodeStatus.ERROR, "end_reason": EndReason.EXCEPTION,
        "error_class": type(error).__name__, "error_message": str(error), "reward": 0.0,
        "rewards": "{}", "verified": 0, "steps": 0, "prompt_tokens": 0,
        "completion_tokens": 0, "cached_tokens": 0, "wall_s": wall_s,
        "infra_error": int(is_infra_error(error)),
    }  # fmt: skip
    return EpisodeRow({**row, **values})


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
