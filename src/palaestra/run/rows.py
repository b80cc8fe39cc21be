"""``episode_row``: a played :class:`Episode` as a results-store row, the one mapping from
episodes to ``results.db`` (``evaluate`` writes what it returns; a training run can too)."""

from __future__ import annotations

import json
from typing import Any

from palaestra.env.tools import ToolTask
from palaestra.run.rollout import Episode, Turn
from palaestra.run.store import EpisodeRow, StepRecord
from palaestra.tasks import Task


def _steps(turns: list[Turn], executions: list[dict[str, Any]]) -> list[StepRecord]:
    """Each turn with the messages it added to the conversation, the tools its request offered
    where they changed, and the scaffold's record of executing its action (its execution
    record of the same turn)."""
    by_turn = {t.get("turn"): t for t in executions}
    steps: list[StepRecord] = []
    previous: list[dict[str, Any]] = []
    previous_tools: list[dict[str, Any]] | None = None
    for i, turn in enumerate(turns):
        messages, tools = turn.observation.messages, turn.observation.tools
        start = len(previous) if messages[: len(previous)] == previous else 0
        response = turn.action.model_dump(exclude_none=True, exclude_defaults=True)
        response["finish_reason"] = turn.action.finish_reason
        changed = (tools or []) if tools != previous_tools else None  # []: none any more
        steps.append(StepRecord(i, start, messages[start:], response, by_turn.get(i), changed))
        previous, previous_tools = messages, tools
    return steps


def episode_row(
    episode: Episode,
    task: Task | ToolTask | None = None,
    *,
    attempt: int,
    seed: int | None,
    try_index: int = 0,
    final: bool = True,
) -> EpisodeRow:
    """The store row of one episode try: the ``try_index``-th try of ``attempt``, ``final``
    when it counts (the run's columns, ``run_id`` and ``finished_at``, are the writer's).
    Without ``task`` (a stream that draws its tasks as it goes), the task's id, category and
    difficulty come from the episode."""
    end, info = episode.end, episode.info
    if task is not None:
        task_id, category, difficulty = task.id, task.category, task.difficulty
        family = task.family if isinstance(task, ToolTask) else task.config.metadata.get("family")
    else:
        task_id, category = episode.task_id, info.get("category")
        difficulty, family = info.get("difficulty"), info.get("family")
    timings: dict[str, float] = info.get("timings", {})
    usage = episode.usage
    values: dict[str, Any] = {
        "episode_id": episode.episode_id,
        "task_id": task_id,
        "family": family,
        "category": category,
        "difficulty": difficulty,
        "attempt": attempt,
        "seed": seed,
        "status": end.status,
        "end_reason": end.reason,
        "error_class": end.error_class,
        "error_message": end.error_message,
        "infra_error": int(end.infra_error),
        "reward": end.reward,
        "rewards": json.dumps(dict(end.rewards)),
        "verified": int(end.verified),
        "verifier_output": end.verifier.output if end.verifier is not None else None,
        "steps": len(episode.turns),
        "sandbox_start_s": timings.get("sandbox_start_s"),
        "agent_s": timings.get("agent_s"),
        "policy_s": timings.get("policy_s"),
        "verifier_s": timings.get("verifier_s"),
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
        "cost_usd": episode.cost_usd,
        "wall_s": episode.wall_s,
        "try": try_index,
        "final": int(final),
    }
    return EpisodeRow(values, _steps(episode.turns, info.get("executions", [])))
