"""The baseline curriculum: every listed task equally likely, whatever happens."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from palaestra.rl.curricula.tally import difficulties_of, draw_of, unique_ids
from palaestra.rl.sampler import GroupOutcome, TaskDraw


class Uniform:
    """Draws uniformly from a fixed list of task ids; ``update`` only counts outcomes.

    ``difficulties`` (optional) gives each id's difficulty for the draws; generated ids
    (``<family>-dNNN-sSEED``) carry theirs already.
    """

    def __init__(
        self, task_ids: Iterable[str], *, difficulties: Mapping[str, float] | None = None
    ) -> None:
        self.task_ids = unique_ids(task_ids, "Uniform")
        self._difficulty = difficulties_of(self.task_ids, difficulties)
        self.draws = 0
        self.updates = 0

    def draw(self, rng: random.Random) -> TaskDraw:
        task_id = self.task_ids[rng.randrange(len(self.task_ids))]
        self.draws += 1
        return draw_of(task_id, rng, self._difficulty[task_id])

    def update(self, outcome: GroupOutcome) -> None:
        self.updates += 1

    def state(self) -> dict[str, Any]:
        return {"tasks": len(self.task_ids), "draws": self.draws, "updates": self.updates}
