"""Staleness: how many policy versions behind an episode is when it finishes (AReaL-style).

The trainer updates the policy while episodes run; an episode started on version ``v`` and
finished when the policy is at ``v + k`` is ``k`` versions stale. Off-policy corrections only
hold for small ``k``, so a stream with ``max_staleness`` drops (or keeps and counts) episodes
whose first turn is more than that many versions behind. Episodes in flight are never
interrupted by an update: staleness is judged once, when they finish.
"""

from __future__ import annotations

from typing import Literal

from palaestra.run.rollout import Episode

StalePolicy = Literal["drop", "keep"]


def first_version(episode: Episode, started_at: int | None = None) -> int | None:
    """The policy version of the episode's first turn: the one its response carries, else
    ``started_at`` (the policy's version when the episode began)."""
    if episode.turns and episode.turns[0].action.policy_version is not None:
        return episode.turns[0].action.policy_version
    return started_at


def turn_versions(episode: Episode) -> list[int | None]:
    """The policy version of every turn, in order (None where the response has none)."""
    return [turn.action.policy_version for turn in episode.turns]


def staleness(episode: Episode, current: int, started_at: int | None = None) -> int | None:
    """Versions between the episode's first turn and ``current`` (None when unknown)."""
    first = first_version(episode, started_at)
    return None if first is None else current - first


def check_staleness_options(max_staleness: int | None, stale: str, version: int | None) -> None:
    """One clear line for a bad combination of staleness options."""
    if stale not in ("drop", "keep"):
        raise ValueError(f"stale={stale!r}: choose 'drop' or 'keep'")
    if max_staleness is None:
        return
    if max_staleness < 0:
        raise ValueError(f"max_staleness={max_staleness} must be >= 0 (or None for no limit)")
    if version is None:
        raise ValueError(
            "max_staleness needs a policy with an integer policy_version (HFLocalPolicy, "
            "OpenAIChatPolicy, or wrap it: palaestra.llm.versions.VersionedPolicy(policy))"
        )
