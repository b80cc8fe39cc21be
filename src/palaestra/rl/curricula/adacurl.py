"""AdaCuRL: difficulty buckets merged into training one at a time, earlier ones revisited.

Li, Huang, Wei, Xiong, Wang, Chu (2025), *AdaCuRL: Adaptive Curriculum Reinforcement Learning
with Invalid Sample Mitigation and Historical Revisiting*, arXiv:2511.09478. It sorts the data
into buckets by estimated difficulty, trains on the easiest bucket first, merges the next
bucket into training once the policy's accuracy on the current one is high enough (adaptive
curriculum scheduling), and keeps replaying data of the buckets already learnt so they are not
forgotten (historical revisiting). Its other parts (coarse-to-fine difficulty estimation with
the policy itself, adaptive reference, sparse KL) belong to the trainer, not to a sampler.

Here: buckets are lists of task ids, easiest first (:meth:`AdaCuRL.by_difficulty` builds them
from the generators' difficulty float, the tiers by default). The newest merged bucket is the
*frontier*; a draw comes from an earlier merged bucket with probability ``revisit`` (uniform
over them), else from the frontier. When the solve rate over the last ``window`` groups drawn
from the frontier reaches ``threshold``, the next bucket is merged and becomes the frontier.
The thresholds, window and revisit rate are this implementation's knobs, not the paper's.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from palaestra.rl.curricula.tally import difficulties_of, draw_of, unique_ids, unknown
from palaestra.rl.sampler import GroupOutcome, TaskDraw

#: The tier boundaries of the generators' difficulty float: easy / medium / hard buckets.
TIER_EDGES = (1 / 3, 2 / 3)


class AdaCuRL:
    """A :class:`~palaestra.rl.sampler.TaskSampler` over difficulty ``buckets`` (easiest
    first). ``threshold``: the frontier's solve rate that merges the next bucket; ``window``:
    how many frontier groups that rate is measured over; ``revisit``: the probability that a
    draw goes to an earlier merged bucket instead of the frontier."""

    def __init__(
        self,
        buckets: Sequence[Sequence[str]],
        *,
        threshold: float = 0.8,
        window: int = 8,
        revisit: float = 0.2,
        difficulties: Mapping[str, float] | None = None,
    ) -> None:
        if not buckets:
            raise ValueError("AdaCuRL needs at least one bucket of task ids")
        for i, bucket in enumerate(buckets):
            if not bucket:
                raise ValueError(f"AdaCuRL bucket {i} is empty; drop it or give it tasks")
        ids = unique_ids((t for bucket in buckets for t in bucket), "AdaCuRL")
        if not 0.0 <= threshold <= 1.0 or not 0.0 <= revisit <= 1.0 or window < 1:
            raise ValueError("AdaCuRL needs threshold and revisit in [0, 1] and window >= 1")
        self.buckets = [list(bucket) for bucket in buckets]
        self.threshold, self.window, self.revisit = threshold, window, revisit
        self._bucket_of = {t: i for i, bucket in enumerate(self.buckets) for t in bucket}
        self._difficulty = difficulties_of(ids, difficulties)
        self.frontier = 0
        self._recent: deque[tuple[int, int]] = deque(maxlen=window)  # (solved, attempts)
        self.drawn = [0] * len(self.buckets)
        self.merged_at: list[int] = [0]  # the update count at which each bucket was merged
        self.updates = 0

    @classmethod
    def by_difficulty(
        cls,
        task_ids: Iterable[str],
        *,
        edges: Sequence[float] = TIER_EDGES,
        difficulties: Mapping[str, float] | None = None,
        **kwargs: Any,
    ) -> AdaCuRL:
        """Buckets split at ``edges`` (bucket i holds difficulties in [edges[i-1], edges[i])),
        from ``difficulties`` or the generated ids themselves; the tiers by default."""
        ids = unique_ids(task_ids, "AdaCuRL.by_difficulty")
        known = difficulties_of(ids, difficulties)
        missing = [t for t, d in known.items() if d is None]
        if missing:
            raise ValueError(
                f"AdaCuRL.by_difficulty: no difficulty for {', '.join(missing[:3])}; pass "
                "difficulties={task_id: float} or use generated ids (<family>-dNNN-sSEED)"
            )
        buckets: list[list[str]] = [[] for _ in range(len(edges) + 1)]
        for task_id in ids:
            d = known[task_id]
            assert d is not None
            buckets[sum(d >= edge for edge in edges)].append(task_id)
        return cls(buckets, difficulties=difficulties, **kwargs)

    def draw(self, rng: random.Random) -> TaskDraw:
        bucket = self.frontier
        if self.frontier > 0 and rng.random() < self.revisit:
            bucket = rng.randrange(self.frontier)
        ids = self.buckets[bucket]
        task_id = ids[rng.randrange(len(ids))]
        self.drawn[bucket] += 1
        return draw_of(task_id, rng, self._difficulty[task_id])

    def update(self, outcome: GroupOutcome) -> None:
        bucket = self._bucket_of.get(outcome.draw.task_id)
        if bucket is None:
            raise unknown("AdaCuRL", outcome)
        self.updates += 1
        if bucket != self.frontier or not outcome.passed:
            return  # revisits keep old skills; only the frontier's mastery moves the schedule
        self._recent.append((sum(outcome.passed), len(outcome.passed)))
        if len(self._recent) == self.window and self.frontier_rate() >= self.threshold:
            if self.frontier + 1 < len(self.buckets):
                self.frontier += 1
                self.merged_at.append(self.updates)
                self._recent.clear()

    def frontier_rate(self) -> float | None:
        """The solve rate over the frontier's last ``window`` groups (None before any)."""
        attempts = sum(n for _, n in self._recent)
        return sum(s for s, _ in self._recent) / attempts if attempts else None

    def state(self) -> dict[str, Any]:
        return {
            "frontier": self.frontier,
            "buckets": [len(b) for b in self.buckets],
            "frontier_rate": self.frontier_rate(),
            "drawn": list(self.drawn),
            "merged_at": list(self.merged_at),
            "updates": self.updates,
        }
