"""Which task the next episode of :class:`~palaestra.env.code_env.CodeEnv` runs."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Literal

from palaestra.tasks.source import TaskSet

#: How ``CodeEnv`` picks a task when ``reset`` names none: ``"random"`` (seeded by
#: ``reset(seed=)``), ``"cycle"`` (in order), or a function ``(rng, n_tasks) -> index``.
TaskPick = Literal["random", "cycle"] | Callable[[random.Random, int], int]


def pick_task(
    tasks: TaskSet, pick: TaskPick, rng: random.Random, cursor: int, options: dict[str, Any]
) -> tuple[str, int]:
    """The id of the next episode's task and the ``"cycle"`` cursor after it: ``options``'
    ``task_id`` (a listed id, or any id an open set resolves; raises naming close ids) or
    ``task_index``, else ``pick``'s choice."""
    if "task_id" in options:
        return tasks.check(options["task_id"]), cursor
    at, n = tasks.id_at, len(tasks)
    if "task_index" in options:
        return at(int(options["task_index"]) % n), cursor
    if pick == "random":
        return at(rng.randrange(n)), cursor
    if pick == "cycle":
        return at(cursor % n), cursor + 1
    return at(pick(rng, n) % n), cursor
