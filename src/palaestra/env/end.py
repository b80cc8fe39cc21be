"""``EpisodeEnd``: how an episode ended, as one typed value.

CodeEnv's LAST time step carries it in ``info["end"]`` (read it as ``ts.end``); ``rollout``
builds one itself when the episode never reached LAST (an exception out of the policy or the
environment: ``reason = exception``). Everything that reports an episode (``evaluate``'s store
rows, a trainer dropping error episodes) reads this value, never strings parsed back.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from palaestra.env.types import EpisodeStatus
from palaestra.scaffolds.base import EndReason, Outcome
from palaestra.verify.harbor import VerifierResult

#: Exception class names of transient infrastructure failures: a sandbox that fails to start or
#: dies (the scaffold reports that as ``SandboxError``), a dropped connection, an LLM API's
#: transient errors. An episode that ended on one says nothing about the task or the policy;
#: the retry policy (:mod:`palaestra.run.retry`) runs it again.
INFRA_ERRORS = frozenset(
    {
        "SandboxError",
        "SandboxClosedError",
        "ConnectionError",
        "ConnectionResetError",
        "ConnectionRefusedError",
        "BrokenPipeError",
        "TimeoutError",
        "APIConnectionError",
        "APITimeoutError",
        "RateLimitError",
        "InternalServerError",
    }
)


#: Exception class names of failures that repeat on every try although they come from the
#: infrastructure's side: a sandbox that cannot be made from the task's spec or image (no
#: interpreter for the helper, an image that cannot be had, a failing build). They are never
#: retried; they win over :data:`INFRA_ERRORS` (``SandboxSpecError`` is a ``SandboxError``).
DETERMINISTIC_ERRORS = frozenset({"SandboxSpecError", "BuildError"})


def is_infra_error(error: BaseException | str | None) -> bool:
    """Is ``error`` a transient infrastructure failure, worth another try?

    The one classification of errors, for everything that decides on a retry: ``error`` is the
    exception (judged by its class and every class it derives from), or, where only the name is
    left (a scaffold's or verifier's ``error_class``), the class name (a built-in exception's
    name is judged with its bases, so ``ConnectionAbortedError`` counts as a
    ``ConnectionError``). :data:`DETERMINISTIC_ERRORS` win over :data:`INFRA_ERRORS`; None
    (no error) is not one."""
    if error is None:
        return False
    if isinstance(error, str):
        builtin = getattr(builtins, error, None)
        known = isinstance(builtin, type) and issubclass(builtin, BaseException)
        names = [c.__name__ for c in builtin.__mro__] if known else [error]
    else:
        names = [c.__name__ for c in type(error).__mro__]
    if any(name in DETERMINISTIC_ERRORS for name in names):
        return False
    return any(name in INFRA_ERRORS for name in names)


@dataclass(frozen=True)
class EpisodeEnd:
    """How an episode ended.

    ``status``: passed / failed by the reward against the env's pass threshold, or error.
    ``reason``: how the agent's part ended (:class:`EndReason`).
    ``reward``: the verifier's reward (0.0 when it gave none); ``rewards`` its whole breakdown
    (``reward.json``'s keys). ``verified``: whether the verifier ran; ``verifier`` its result.
    ``error_class`` / ``error_message``: what failed, for an ``error`` status (the exception's
    class name; ``ScaffoldError`` when the scaffold reported it, ``VerifierError`` /
    ``VerifierTimeout`` when the verifier gave no reward). ``infra_error``: the failure is a
    transient infrastructure one (:func:`is_infra_error`), worth a retry.
    """

    status: EpisodeStatus
    reason: EndReason
    reward: float = 0.0
    rewards: Mapping[str, float] = field(default_factory=dict)
    verified: bool = False
    error_class: str | None = None
    error_message: str | None = None
    infra_error: bool = False
    verifier: VerifierResult | None = None

    @classmethod
    def from_exception(cls, exc: BaseException) -> EpisodeEnd:
        """The end of an episode that an exception cut short (it never reached LAST)."""
        return cls(
            EpisodeStatus.ERROR,
            EndReason.EXCEPTION,
            error_class=type(exc).__name__,
            error_message=str(exc),
            infra_error=is_infra_error(exc),
        )

    @property
    def error(self) -> str | None:
        """The error for people to read, ``"SandboxError: the sandbox died"``; None without."""
        if self.error_class is None:
            return None
        return f"{self.error_class}: {self.error_message or ''}"

    @property
    def truncated(self) -> bool:
        """A limit cut the agent short (the reason is ``step_limit`` or ``agent_timeout``)."""
        return self.reason.truncated

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: enums as their strings, the verifier's result as a dict."""
        return {
            "status": str(self.status),
            "reason": str(self.reason),
            "reward": self.reward,
            "rewards": dict(self.rewards),
            "verified": self.verified,
            "error_class": self.error_class,
            "error_message": self.error_message,
            "infra_error": self.infra_error,
            "verifier": self.verifier.to_dict() if self.verifier is not None else None,
        }


def classify_end(
    outcome: Outcome, result: VerifierResult | None, pass_threshold: float
) -> EpisodeEnd:
    """How an episode ended, from the scaffold's ``outcome`` and the verifier's ``result``
    (None: it did not run): an error when either failed, else passed or failed by the reward
    against ``pass_threshold``."""
    reward = result.reward if result is not None and result.reward is not None else 0.0
    error_class = error_message = cause = None
    if outcome.reason is EndReason.ERROR:
        error_class, error_message = outcome.error_class, outcome.message
        cause = outcome.exception
    elif result is not None and not result.ok:
        error_class, error_message = result.error_class, result.error
    if error_class is not None:
        status = EpisodeStatus.ERROR
    elif reward >= pass_threshold:
        status = EpisodeStatus.PASSED
    else:
        status = EpisodeStatus.FAILED
    return EpisodeEnd(
        status=status,
        reason=outcome.reason,
        reward=reward,
        rewards=dict(result.rewards) if result is not None else {},
        verified=result is not None,
        error_class=error_class,
        error_message=error_message,
        infra_error=is_infra_error(cause or error_class),
        verifier=result,
    )


def error_text(error_class: str | None, message: str | None) -> str:
    """An error for people to read: ``"SandboxError: boom"`` (the message alone without a class)."""
    return f"{error_class}: {message or ''}" if error_class else message or ""
