"""What a :class:`~palaestra.rl.stream.RolloutStream` hands over and counts: :class:`Group`
and :class:`StreamStats`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from palaestra.env.types import EpisodeStatus
from palaestra.rl.sampler import GroupOutcome, TaskDraw
from palaestra.run.rollout import Episode


@dataclass
class Group:
    """``n`` episodes of one draw (same task, same seed), all finished without error."""

    draw: TaskDraw
    episodes: list[Episode]
    stale: bool = False
    """Some episode was more than ``max_staleness`` versions behind (kept: ``stale="keep"``)."""
    first_versions: list[int | None] = field(default_factory=list)
    """Per episode, the policy version of its first turn (the version when it started if the
    response carries none; None when the policy has no version)."""

    @property
    def rewards(self) -> list[float]:
        return [e.reward for e in self.episodes]

    @property
    def outcome(self) -> GroupOutcome:
        return GroupOutcome(
            self.draw,
            tuple(self.rewards),
            tuple(e.status == EpisodeStatus.PASSED for e in self.episodes),
        )


@dataclass
class StreamStats:
    """What a stream did so far. Episode counts are tries; group counts are draws.

    ``dropped_stale``: groups dropped for staleness, when they finished or when they were about
    to be handed over; ``admission_waits``: draws that waited before starting because they
    would have been taken after more than ``max_staleness`` updates
    (:mod:`palaestra.rl.admission`)."""

    started: int = 0
    finished: int = 0
    errors: int = 0
    retried: int = 0
    completed_groups: int = 0
    dropped_error: int = 0
    filtered: int = 0
    stale: int = 0
    dropped_stale: int = 0
    admission_waits: int = 0
    yielded: int = 0
    in_flight: int = 0
    buffered: int = 0
    max_in_flight: int = 0
    max_buffered: int = 0
    error_classes: Counter[str] = field(default_factory=Counter)
