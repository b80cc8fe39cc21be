"""INTELLECT-3-style difficulty pools: easy / normal / hard by observed solve rate.

prime-rl (the trainer behind INTELLECT-3) keeps every problem in one of three pools, all
``normal`` at first. After each group it re-files the problem by that group's average reward:
above ``easy_border`` (default 0.8) into ``easy``, below ``hard_border`` (0.2) into ``hard``,
else ``normal``; a batch then takes ``easy_fraction`` (0.1) of its problems from the easy pool,
``hard_fraction`` (0.1) from the hard pool and the rest from the normal pool, a pool too small
being made up from the normal one (``DifficultyPoolBufferConfig`` and ``Buffer`` in
PrimeIntellect-ai/prime-rl, ``src/prime_rl/orchestrator``). Its online difficulty filter then
drops rollouts whose group has zero advantage: here :func:`palaestra.rl.sampler.has_reward_variance`,
passed to the rollout stream as its group filter (see ``docs/rl.md``).

This sampler files tasks by the group's *solve rate* (the fraction of episodes that passed), so
it behaves the same whatever the reward strategy; for ``test.sh`` rewards (0 or 1) the two are
equal. Each draw picks a pool with the given ratios, then a task uniformly inside it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from palaestra.rl.curricula.tally import (
    IdBag,
    Tally,
    difficulties_of,
    draw_of,
    unique_ids,
    unknown,
)
from palaestra.rl.sampler import GroupOutcome, TaskDraw

Pool = Literal["easy", "normal", "hard"]
POOLS: tuple[Pool, ...] = ("easy", "normal", "hard")


class DifficultyPools:
    """A :class:`~palaestra.rl.sampler.TaskSampler` over a fixed list of task ids.

    ``easy_above`` / ``hard_below``: the solve rates (strict bounds) that file a task as easy
    or hard after a group. ``easy_fraction`` / ``hard_fraction``: how many draws go to those
    pools; the rest go to ``normal``. A draw aimed at an empty pool falls back to ``normal``
    (then to whichever pool has tasks) and is counted in ``state()["fallbacks"]``.
    ``initial`` files some tasks before any outcome (a prior, e.g. from an earlier run).
    """

    def __init__(
        self,
        task_ids: Iterable[str],
        *,
        easy_above: float = 0.8,
        hard_below: float = 0.2,
        easy_fraction: float = 0.1,
        hard_fraction: float = 0.1,
        initial: Mapping[str, Pool] | None = None,
        difficulties: Mapping[str, float] | None = None,
    ) -> None:
        ids = unique_ids(task_ids, "DifficultyPools")
        if not 0.0 <= hard_below <= easy_above <= 1.0:
            raise ValueError(
                f"DifficultyPools needs 0 <= hard_below <= easy_above <= 1, got hard_below="
                f"{hard_below}, easy_above={easy_above}"
            )
        if min(easy_fraction, hard_fraction) < 0 or easy_fraction + hard_fraction > 1:
            raise ValueError(
                "DifficultyPools needs easy_fraction, hard_fraction >= 0 with a sum <= 1, got "
                f"{easy_fraction} + {hard_fraction}"
            )
        self.easy_above, self.hard_below = easy_above, hard_below
        self.fractions: dict[Pool, float] = {
            "easy": easy_fraction,
            "hard": hard_fraction,
            "normal": 1.0 - easy_fraction - hard_fraction,
        }
        self._difficulty = difficulties_of(ids, difficulties)
        self._pool_of: dict[str, Pool] = {}
        self._pools: dict[Pool, IdBag] = {pool: IdBag() for pool in POOLS}
        for task_id in ids:
            pool = (initial or {}).get(task_id, "normal")
            if pool not in POOLS:
                raise ValueError(f"initial pool {pool!r} of {task_id!r}: use one of {POOLS}")
            self._file(task_id, pool)
        self.tallies = {task_id: Tally() for task_id in ids}
        self.drawn: dict[Pool, int] = dict.fromkeys(POOLS, 0)
        self.fallbacks = 0
        self.moves = 0

    def _file(self, task_id: str, pool: Pool) -> None:
        old = self._pool_of.get(task_id)
        if old is not None:
            self._pools[old].remove(task_id)
        self._pools[pool].add(task_id)
        self._pool_of[task_id] = pool

    def pool_of(self, task_id: str) -> Pool:
        return self._pool_of[task_id]

    def pool(self, pool: Pool) -> list[str]:
        """The ids in ``pool``, in the sampler's internal order."""
        return list(self._pools[pool])

    def draw(self, rng: random.Random) -> TaskDraw:
        u = rng.random()
        easy, hard = self.fractions["easy"], self.fractions["hard"]
        aimed: Pool = "easy" if u < easy else "hard" if u < easy + hard else "normal"
        pool = aimed
        if not self._pools[pool]:
            pool = next(p for p in ("normal", "hard", "easy") if self._pools[p])
            self.fallbacks += 1
        task_id = self._pools[pool].choice(rng)
        self.drawn[pool] += 1
        return draw_of(task_id, rng, self._difficulty[task_id])

    def update(self, outcome: GroupOutcome) -> None:
        task_id = outcome.draw.task_id
        if task_id not in self._pool_of:
            raise unknown("DifficultyPools", outcome)
        rate = outcome.solve_rate
        if rate is None:  # every episode errored: nothing observed
            return
        self.tallies[task_id].add(outcome)
        pool: Pool = (
            "easy" if rate > self.easy_above else "hard" if rate < self.hard_below else "normal"
        )
        if pool != self._pool_of[task_id]:
            self.moves += 1
            self._file(task_id, pool)

    def state(self) -> dict[str, Any]:
        return {
            "sizes": {pool: len(self._pools[pool]) for pool in POOLS},
            "drawn": dict(self.drawn),
            "fallbacks": self.fallbacks,
            "moves": self.moves,
        }
