"""AdaRFT: a target difficulty that follows the policy's mean reward; a fresh task per draw.

Shi, Wu, Song, Zhou, Zhao (2025), *Efficient Reinforcement Finetuning via Adaptive Curriculum
Learning*, arXiv:2504.05520, Algorithm 1. After each batch with average reward R̄ the target
difficulty moves by

    T <- clip(T + η · tanh(α · (R̄ − β)), d_min, d_max)

and the next batch takes the problems whose difficulty is closest to T. The paper works on a
[0, 100] difficulty scale with β = 0.5 (learn at a balanced success rate), α = 2, η = 50, T₀ = 0
and batches of 1024 problems. Here difficulty is the generators' float in [0, 1] and, since a
generator makes a task at any difficulty, "the problem closest to T" is a *new* task generated
at T itself (quantised to the two decimals task ids carry), from a seed never drawn before.

Scale: η = 50 on [0, 100] per 1024-problem batch is η = 0.5 on [0, 1]. Updating once per GRPO
group (``window=1``) is a much smaller batch, so the default step here is η = 0.05; set
``window`` to the number of groups in a training batch to update once per batch as the paper
does (R̄ is then the mean reward over every episode of those groups).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from palaestra.rl.sampler import GroupOutcome, TaskDraw
from palaestra.tasks import generators


class AdaRFT:
    """A :class:`~palaestra.rl.sampler.TaskSampler` over generator ``families``.

    Each draw picks a family uniformly (from ``rng``), a difficulty ``T`` (plus a uniform
    jitter of ``± spread`` when set, to cover a neighbourhood of the target) and the next
    unused generator seed, counting up from ``first_seed`` (above the ``gen`` presets' 120
    seeds by default, so a drawn task is never one of the fixed packs'). Its env must resolve
    any generated id: ``make("gen")``, ``make("gen/<category>")`` or ``make("gen/<family>")``.
    Rewards are taken as they come: β = 0.5 assumes rewards in [0, 1] (``test.sh``'s).
    """

    def __init__(
        self,
        families: Sequence[str],
        *,
        target: float = 0.0,
        eta: float = 0.05,
        alpha: float = 2.0,
        beta: float = 0.5,
        window: int = 1,
        spread: float = 0.0,
        bounds: tuple[float, float] = (0.0, 1.0),
        first_seed: int = 10_000,
    ) -> None:
        if not families:
            raise ValueError(
                "AdaRFT needs at least one generator family; see `palaestra tasks families`"
            )
        self.families = [generators.get_family(name).name for name in families]  # clear errors
        low, high = bounds
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"AdaRFT bounds {bounds!r} must satisfy 0 <= low <= high <= 1")
        if not low <= target <= high:
            raise ValueError(f"AdaRFT target {target!r} is outside its bounds {bounds!r}")
        if window < 1 or eta < 0 or alpha <= 0 or spread < 0:
            raise ValueError("AdaRFT needs window >= 1, eta >= 0, alpha > 0 and spread >= 0")
        self.target = float(target)
        self.eta, self.alpha, self.beta = eta, alpha, beta
        self.window, self.spread, self.bounds = window, spread, (low, high)
        self.next_seed = first_seed
        self.draws = 0
        self.updates = 0
        self.skipped = 0  # outcomes with no reward (every episode errored)
        self.last_mean_reward: float | None = None
        self._pending: list[float] = []  # rewards of the groups since the last update
        self._pending_groups = 0

    def draw(self, rng: random.Random) -> TaskDraw:
        family = self.families[rng.randrange(len(self.families))]
        difficulty = self.target
        if self.spread:
            difficulty += rng.uniform(-self.spread, self.spread)
        difficulty = generators.quantise(min(max(difficulty, 0.0), 1.0))
        seed, self.next_seed = self.next_seed, self.next_seed + 1
        self.draws += 1
        task_id = generators.get_family(family).task_id(seed, difficulty)
        return TaskDraw(task_id=task_id, seed=seed, difficulty=difficulty)

    def update(self, outcome: GroupOutcome) -> None:
        if not outcome.rewards:
            self.skipped += 1
            return
        self._pending.extend(outcome.rewards)
        self._pending_groups += 1
        if self._pending_groups < self.window:
            return
        mean = sum(self._pending) / len(self._pending)
        self._pending, self._pending_groups = [], 0
        step = self.eta * math.tanh(self.alpha * (mean - self.beta))
        low, high = self.bounds
        self.target = min(max(self.target + step, low), high)
        self.last_mean_reward = mean
        self.updates += 1

    def state(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "updates": self.updates,
            "draws": self.draws,
            "skipped": self.skipped,
            "last_mean_reward": self.last_mean_reward,
            "next_seed": self.next_seed,
            "pending_groups": self._pending_groups,
        }
