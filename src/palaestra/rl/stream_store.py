"""A rollout stream's episodes in the results store, so a training run reports like an eval.

The stream writes to the same ``results.db`` as ``evaluate`` (:mod:`palaestra.run.store`):
one ``runs`` row for the stream, one ``episodes`` row per finished episode try with its steps.
A GRPO group's rows are written together when the group ends (complete, or dropped for an
error), never before: a stream cancelled mid-group leaves no row of that group. An errored
try that was retried has ``final = 0``; the try that counts has ``final = 1``. ``attempt``
counts the episodes run on a task so far in the stream (so ``pass@k`` reads as in an eval).

Rows come from :func:`palaestra.run.rows.episode_row` and are written by
:class:`palaestra.run.recorder.RunRecorder`, the one recording path ``evaluate`` uses too;
this module holds what is the stream's own: the run's identity and the rows' numbering.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from palaestra.run.store import EpisodeRow


def stream_identity(
    env_id: Any,
    policy: Any,
    env: Any,
    size: int,
    seed: int,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``runs`` row's identity of a stream of ``env_id`` (an id or a factory) with
    ``policy`` (a name or a client), groups of ``size``. The scaffold and sandbox are read from
    ``env``, one of its environments, or, without one (the environments are Ray actors'), from
    the ``overrides`` the environments are made with (``bash`` and ``local`` by default)."""
    if env is not None:
        scaffold = getattr(getattr(env, "scaffold", None), "name", "unknown")
        sandbox = getattr(getattr(env, "backend", None), "name", "unknown")
    else:
        parts = overrides or {}
        scaffold = getattr(parts.get("scaffold", "bash"), "name", parts.get("scaffold", "bash"))
        sandbox = str(parts.get("sandbox", "local"))  # Ray takes it by name only
    return {
        "env_id": env_id if isinstance(env_id, str) else getattr(env, "env_id", "env"),
        "policy": policy
        if isinstance(policy, str)
        else getattr(policy, "name", type(policy).__name__),
        "scaffold": scaffold,
        "sandbox": sandbox,
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
