"""Staleness bounded at the update: which draws may start, and which finished items may be
handed to the trainer.

The bound (AReaL's η, prime-rl's async level): no sample trains weights more than
``max_staleness`` versions newer than the ones that produced its first turn. Judging it when
an episode *finishes* is not enough: a finished group then waits in the buffer, and the trainer
may update several times before it takes it. So a :class:`StalenessGate` judges twice:

* **Consumption** (the guarantee). When the stream hands an item to the consumer, its lag is
  the policy's version now minus its oldest first-turn version; above ``max_staleness`` it is
  dropped (``stale="drop"``, counted in ``StreamStats.dropped_stale``) or marked
  (``stale="keep"``). A consumer that trains on what it takes before the next update (as
  :func:`palaestra.rl.trainer.train` does) therefore never trains on a sample more than
  ``max_staleness`` versions old. Items already stale when they finish are dropped then, to
  free the buffer (counted the same way).
* **Admission** (less waste). With ``update_every=G`` (the consumer updates at most once per
  ``G`` items it takes), a draw starts only if, counting the items already started and not yet
  taken, it would be taken before more than ``max_staleness`` further updates: with ``y`` items
  taken, ``o`` outstanding (running or buffered) and an update possibly pending (the consumer
  took a full batch and has not come back), the updates before the new item is taken are at
  most ``(y + o) // G - y // G + pending``. A draw that has to wait is counted in
  ``StreamStats.admission_waits``. Items finish out of order, so admission alone cannot
  guarantee the bound; it keeps the drops at consumption rare. It never stalls a stream: with
  nothing outstanding the bound can only be exceeded through a pending update, and the
  consumer ends that by coming back for an item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from palaestra.rl.versions import StalePolicy


def lag(first_versions: Sequence[int | None], current: int | None) -> int | None:
    """Versions between the oldest known first turn and ``current`` (None when unknown)."""
    known = [v for v in first_versions if v is not None]
    if current is None or not known:
        return None
    return current - min(known)


@dataclass
class StalenessGate:
    """The stream's staleness bound; see the module docstring. ``max_staleness`` None: no
    bound (everything admitted and handed over)."""

    max_staleness: int | None = None
    stale: StalePolicy = "drop"
    update_every: int | None = None

    def __post_init__(self) -> None:
        if self.update_every is not None and self.update_every < 1:
            raise ValueError(f"update_every={self.update_every} must be >= 1 (or None)")

    def admits(self, *, taken: int, outstanding: int, consumer_waiting: bool) -> bool:
        """Whether a new draw may start now: ``taken`` items handed to the consumer so far,
        ``outstanding`` started and not yet taken or dropped, ``consumer_waiting`` whether the
        consumer is waiting for an item (then no update of its is pending)."""
        if self.max_staleness is None or self.update_every is None:
            return True
        return self.updates_before_taken(taken, outstanding, consumer_waiting) <= self.max_staleness

    def updates_before_taken(self, taken: int, outstanding: int, consumer_waiting: bool) -> int:
        """At most how many updates happen before a draw started now is taken (in order)."""
        g = self.update_every or 1
        pending = int(taken > 0 and taken % g == 0 and not consumer_waiting)
        return (taken + outstanding) // g - taken // g + pending

    def stale_count(self, first_versions: Sequence[int | None], current: int | None) -> int:
        """How many of an item's episodes are more than ``max_staleness`` versions behind."""
        if self.max_staleness is None or current is None:
            return 0
        return sum(1 for v in first_versions if v is not None and current - v > self.max_staleness)
