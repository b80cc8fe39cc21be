"""A learnability band: keep drawing tasks the policy sometimes solves, drop the rest.

A task solved always or never gives a GRPO group no signal (every advantage is zero), so after
``min_attempts`` episodes a task whose observed solve rate is exactly 0 or 1 is evicted. What
remains is drawn uniformly, or (``weighting="variance"``) in proportion to p(1 − p), the
variance of its pass/fail reward: highest at p = 1/2, where a group is most informative. That is
the *learnability* of "sampling for learnability" (Rutherford et al. 2024, *No Regrets*,
arXiv:2408.15099), brought to LLM RL by Foster et al. 2025, *Learning to Reason at the Frontier
of Learnability* (LILO, arXiv:2502.12272). p is smoothed as (solved + 1) / (attempts + 2), so an
untried task counts as p = 1/2 and is favoured.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from palaestra.rl.curricula.tally import (
    CurriculumExhausted,
    IdBag,
    Tally,
    difficulties_of,
    draw_of,
    unique_ids,
    unknown,
)
from palaestra.rl.sampler import GroupOutcome, TaskDraw

Weighting = Literal["uniform", "variance"]


class LearnabilityBand:
    """A :class:`~palaestra.rl.sampler.TaskSampler` over a fixed list of task ids that evicts
    the tasks it has seen solved always, or never, in at least ``min_attempts`` episodes.
    ``draw`` raises :class:`CurriculumExhausted` once every task is evicted."""

    def __init__(
        self,
        task_ids: Iterable[str],
        *,
        min_attempts: int = 8,
        weighting: Weighting = "uniform",
        difficulties: Mapping[str, float] | None = None,
    ) -> None:
        ids = unique_ids(task_ids, "LearnabilityBand")
        if min_attempts < 1:
            raise ValueError(f"LearnabilityBand needs min_attempts >= 1, got {min_attempts}")
        if weighting not in ("uniform", "variance"):
            raise ValueError(f"unknown weighting {weighting!r}; use 'uniform' or 'variance'")
        self.min_attempts, self.weighting = min_attempts, weighting
        self._difficulty = difficulties_of(ids, difficulties)
        self.tallies = {task_id: Tally() for task_id in ids}
        self.active = IdBag(ids)
        self.evicted: dict[str, float] = {}  # task id -> the solve rate (0.0 or 1.0) it left at

    def weight(self, task_id: str) -> float:
        """p(1 − p) with the smoothed solve rate p."""
        t = self.tallies[task_id]
        p = (t.solved + 1) / (t.attempts + 2)
        return p * (1 - p)

    def draw(self, rng: random.Random) -> TaskDraw:
        if not self.active:
            raise CurriculumExhausted(
                f"the learnability band evicted all {len(self.tallies)} tasks (each solved "
                f"always or never in >= {self.min_attempts} episodes); give it tasks nearer the "
                "policy's level, e.g. other difficulties"
            )
        if self.weighting == "uniform":
            task_id = self.active.choice(rng)
        else:
            ids = list(self.active)
            task_id = rng.choices(ids, weights=[self.weight(t) for t in ids])[0]
        return draw_of(task_id, rng, self._difficulty[task_id])

    def update(self, outcome: GroupOutcome) -> None:
        task_id = outcome.draw.task_id
        tally = self.tallies.get(task_id)
        if tally is None:
            raise unknown("LearnabilityBand", outcome)
        tally.add(outcome)
        rate = tally.rate
        if task_id in self.active and tally.attempts >= self.min_attempts and rate in (0.0, 1.0):
            self.active.remove(task_id)
            self.evicted[task_id] = rate

    def state(self) -> dict[str, Any]:
        rates = [t.rate for t in self.tallies.values() if t.rate is not None]
        return {
            "active": len(self.active),
            "evicted_solved": sum(r == 1.0 for r in self.evicted.values()),
            "evicted_unsolved": sum(r == 0.0 for r in self.evicted.values()),
            "mean_solve_rate": sum(rates) / len(rates) if rates else None,
        }
