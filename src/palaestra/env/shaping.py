"""Per-turn shaping rewards: an optional hook CodeEnv calls after every action.

``CodeEnv(shaping=...)`` takes a function ``TurnInfo -> float``. Its value is reported on the
MID or LAST time step that follows the action, in ``info["shaping_reward"]`` (None there when no
hook is set), and ``rollout`` keeps it per turn (``Turn.shaping_reward``). It is never added to
``ts.reward``, the verifier's reward: a trainer that wants shaped returns adds the two itself,
so an evaluation's rewards never change because a hook was set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from palaestra.llm.types import LLMResponse
from palaestra.scaffolds.base import EndReason, Outcome


@dataclass(frozen=True)
class TurnInfo:
    """What the environment knows about one finished turn.

    ``index``: the turn's position (0 for the answer to the FIRST observation).
    ``action``: the policy's response. ``format_error``: the scaffold could not act on it (no
    or too many actions, malformed JSON or tool calls; the turn loop counts these towards
    ``max_consecutive_format_errors``). ``last``: the episode ended with this turn.
    """

    index: int
    action: LLMResponse
    format_error: bool
    last: bool


Shaping = Callable[[TurnInfo], float]


def format_error_penalty(penalty: float = -0.1) -> Shaping:
    """A shaping hook that gives ``penalty`` for a turn whose response was a format error and
    0.0 otherwise."""

    def shape(turn: TurnInfo) -> float:
        return penalty if turn.format_error else 0.0

    return shape


def final_metadata(outcome: Outcome) -> dict[str, Any]:
    """What the request after an episode's last action would say about that action: the
    scaffold's next request when it made one, else what the end itself tells."""
    if outcome.next_request is not None:
        return outcome.next_request.metadata
    return {"format_errors": int(outcome.reason is EndReason.FORMAT_ERROR_LIMIT)}


def shape_turn(
    shaping: Shaping | None,
    index: int,
    action: LLMResponse,
    metadata: dict[str, Any],
    *,
    last: bool,
) -> float | None:
    """``shaping``'s value for turn ``index`` (None without a hook); ``metadata`` is that of
    the request that follows the action, whose ``format_errors`` count (the turn loop's) says
    whether the action was a format error."""
    if shaping is None:
        return None
    format_error = metadata.get("format_errors", 0) > 0
    return float(shaping(TurnInfo(index, action, format_error, last)))
