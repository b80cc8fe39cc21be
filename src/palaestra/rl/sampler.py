"""The contract between a rollout stream and a curriculum.

A :class:`TaskSampler` decides which task the next episode (or GRPO group) runs; the stream
feeds every finished group back to it as a :class:`GroupOutcome`, so the task mix can follow
the policy. A :data:`GroupFilter` decides whether a finished group reaches the trainer at all
(for instance, dropping groups whose rewards are all equal: they carry no GRPO signal).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class TaskDraw:
    """What the next episode or group runs: ``env.reset(seed=seed, options={"task_id": ...})``.

    ``seed`` is the environment's reset seed (with ``task_id`` given it no longer picks the
    task; it seeds what else the environment randomises); None lets the stream choose.
    ``difficulty`` is the task's numeric difficulty in [0, 1] when the sampler knows it (the
    generators' difficulty float), else None; it is carried into the outcome unchanged.
    """

    task_id: str
    seed: int | None = None
    difficulty: float | None = None


@dataclass(frozen=True)
class GroupOutcome:
    """The results of one draw: one entry per episode that did not error."""

    draw: TaskDraw
    rewards: tuple[float, ...]
    passed: tuple[bool, ...]

    @property
    def solve_rate(self) -> float | None:
        return sum(self.passed) / len(self.passed) if self.passed else None

    @property
    def mean_reward(self) -> float | None:
        return sum(self.rewards) / len(self.rewards) if self.rewards else None


class TaskSampler(Protocol):
    """Chooses tasks and learns from their outcomes. Called from one event loop, never
    concurrently; ``draw`` must not block (no I/O).

    An exception from ``draw`` (for instance a curriculum with no task left) ends the stream
    with that exception; it is never swallowed. Samplers may also offer ``state() -> dict``,
    a JSON-able snapshot that streams and trainers log.
    """

    def draw(self, rng: random.Random) -> TaskDraw: ...

    def update(self, outcome: GroupOutcome) -> None: ...


GroupFilter = Callable[[GroupOutcome], bool]
"""True to keep a finished group for the trainer, False to drop it (the stream counts drops)."""


def has_reward_variance(outcome: GroupOutcome) -> bool:
    """The online filter of DAPO / INTELLECT-3: a group whose rewards are all equal has zero
    advantage everywhere under GRPO, so it teaches nothing; keep only groups that differ."""
    return len(set(outcome.rewards)) > 1
