"""Scaffolds: agent harnesses that live inside the environment.

A scaffold turns a task into LLM requests and the LLM's responses into sandbox commands. It
runs as one asyncio task per episode and ends with an :class:`Outcome`. It never sees rewards.
"""

from __future__ import annotations

import enum
import functools
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from palaestra.llm.client import LLMClient
    from palaestra.llm.types import LLMRequest
    from palaestra.sandbox.base import Sandbox
    from palaestra.tasks import Task


class EndReason(enum.StrEnum):
    """How the agent's part of an episode ended: one vocabulary from the scaffold's
    :class:`Outcome` to ``EpisodeEnd.reason`` (CodeEnv's LAST ``info["end"]``) and the results
    store's ``end_reason``.

    Its values are plain strings (in JSON, SQLite, comparisons with ``"submitted"``).
    """

    SUBMITTED = "submitted"
    """The agent said it is done (termination)."""
    STEP_LIMIT = "step_limit"
    """The scaffold's step budget ran out (truncation)."""
    AGENT_TIMEOUT = "agent_timeout"
    """The environment stopped the scaffold when the task's agent time ran out (truncation)."""
    FORMAT_ERROR_LIMIT = "format_error_limit"
    """Too many malformed responses in a row (termination: the agent gave up being understood)."""
    ERROR = "error"
    """The scaffold itself (or its sandbox) failed."""
    EXCEPTION = "exception"
    """The episode never reached its end: the environment or the policy raised out of it. Set
    by the runner that drove the episode, never by a scaffold."""

    @property
    def truncated(self) -> bool:
        """A limit cut the episode short (bootstrapping is allowed)."""
        return self in (EndReason.STEP_LIMIT, EndReason.AGENT_TIMEOUT)


#: The error class of an ``error`` outcome whose scaffold reported the failure itself (no
#: exception to name).
SCAFFOLD_ERROR = "ScaffoldError"


@dataclass
class Outcome:
    """How a scaffold's run ended. ``reason`` is coerced to :class:`EndReason` (a plain string
    such as ``"submitted"`` is accepted); ``turns``: how many requests the policy answered;
    ``executions``: one record per executed action (the store's ``steps.execution``). For an
    ``error`` end, ``message`` is the error's message and ``error_class`` its class name
    (:data:`SCAFFOLD_ERROR` when not given); ``exception``: the exception caught, when one was
    (its class names the error and classifies it).

    ``next_request``: the request the scaffold would have sent next, when a limit stopped it
    between turns (the turn loop at its step limit): the environment's LAST observation, what
    a truncated episode bootstraps from. None when there is none.

    ``status``, ``steps`` and ``trajectory`` are the deprecated names of ``reason``, ``turns``
    and ``executions`` (as keywords and attributes)."""

    reason: EndReason
    turns: int
    message: str = ""
    executions: list[dict[str, Any]] = field(default_factory=list)
    error_class: str | None = None
    next_request: LLMRequest | None = None
    exception: BaseException | None = None

    def __post_init__(self) -> None:
        self.reason = EndReason(self.reason)
        if self.error_class is None and self.exception is not None:
            self.error_class = type(self.exception).__name__
        if self.reason is EndReason.ERROR and self.error_class is None:
            self.error_class = SCAFFOLD_ERROR

    @property
    def truncated(self) -> bool:
        return self.reason.truncated

    @property
    def status(self) -> EndReason:
        _renamed("status")
        return self.reason

    @property
    def steps(self) -> int:
        _renamed("steps")
        return self.turns

    @property
    def trajectory(self) -> list[dict[str, Any]]:
        _renamed("trajectory")
        return self.executions


#: The old names of :class:`Outcome`'s fields (one name per concept: ``status`` is an episode's
#: :class:`~palaestra.env.types.EpisodeStatus`, ``steps`` a multi-step task's steps,
#: ``trajectory`` the trainer's token-exact sample).
_OUTCOME_RENAMED = {"status": "reason", "steps": "turns", "trajectory": "executions"}


def _renamed(old: str, stacklevel: int = 3) -> None:
    warnings.warn(
        f"Outcome.{old} is deprecated: use Outcome.{_OUTCOME_RENAMED[old]}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def _accept_old_names(init: Any) -> Any:
    @functools.wraps(init)
    def __init__(self: Outcome, *args: Any, **kwargs: Any) -> None:
        for old, new in _OUTCOME_RENAMED.items():
            if old in kwargs:
                _renamed(old)
                kwargs[new] = kwargs.pop(old)
        init(self, *args, **kwargs)

    return __init__


Outcome.__init__ = _accept_old_names(Outcome.__init__)  # type: ignore[method-assign]


class Scaffold(Protocol):
    name: str

    async def run(self, task: Task, sandbox: Sandbox, llm: LLMClient) -> Outcome: ...
