"""The policy boundary: dm_env semantics, async.

An episode is ``reset()`` then ``step(action)`` until a LAST time step::

    FIRST  reward=None discount=None   the first observation
    MID    reward=0.0  discount=1.0    every further observation
    LAST   reward=r    discount=0.0    terminated: the agent finished (the verifier ran)
    LAST   reward=r    discount=1.0    truncated: a step or time limit ended it;
                                        ``ts.end.verified`` says whether the verifier ran
                                        (r is 0.0 when it did not)

A time step keeps dm_env's four fields (``step_type``, ``reward``, ``discount``,
``observation``) plus ``info``. LAST keeps an observation too: the final request of the
episode, what a truncated episode bootstraps from (CodeEnv documents which request it is), and
``info["end"]``, an :class:`~palaestra.env.end.EpisodeEnd` saying how the episode ended
(``ts.end`` reads it).

Calling ``step`` after LAST (or before any reset) raises :class:`EpisodeError`; call ``reset``.
"""

from __future__ import annotations

import abc
import enum
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from palaestra.env.end import EpisodeEnd

Obs = TypeVar("Obs")
Act = TypeVar("Act")


class StepType(enum.IntEnum):
    FIRST = 0
    MID = 1
    LAST = 2


class EpisodeStatus(enum.StrEnum):
    """How an episode came out: :attr:`EpisodeEnd.status <palaestra.env.end.EpisodeEnd>` and
    the results store's ``status``. How the agent's part ended (a submission, a limit, an
    error) is the separate :class:`~palaestra.scaffolds.base.EndReason`, ``EpisodeEnd.reason``."""

    PASSED = "passed"
    """The verifier's reward reached the pass threshold (also after a truncation)."""
    FAILED = "failed"
    """The reward is below the threshold (or the verifier did not run on a truncation)."""
    ERROR = "error"
    """Infrastructure, scaffold, verifier or policy failure: the episode says nothing about the
    policy; ``EpisodeEnd.error_class`` and ``EpisodeEnd.error_message`` say what failed."""


class EpisodeError(RuntimeError):
    """The environment was driven out of order (step after LAST, step before reset, ...)."""


@dataclass(frozen=True)
class TimeStep(Generic[Obs]):
    step_type: StepType
    reward: float | None
    discount: float | None
    observation: Obs | None
    info: dict[str, Any] = field(default_factory=dict)

    def first(self) -> bool:
        return self.step_type is StepType.FIRST

    def mid(self) -> bool:
        return self.step_type is StepType.MID

    def last(self) -> bool:
        return self.step_type is StepType.LAST

    @property
    def end(self) -> EpisodeEnd | None:
        """How the episode ended (``info["end"]``): set on LAST, None before."""
        return self.info.get("end")

    @property
    def terminated(self) -> bool:
        """LAST because the episode really ended (no value to bootstrap)."""
        return self.step_type is StepType.LAST and self.discount == 0.0

    @property
    def truncated(self) -> bool:
        """LAST because a limit cut the episode short (bootstrapping is allowed)."""
        return self.step_type is StepType.LAST and self.discount != 0.0


def restart(observation: Obs, info: dict[str, Any]) -> TimeStep[Obs]:
    return TimeStep(StepType.FIRST, None, None, observation, info)


def transition(observation: Obs, info: dict[str, Any]) -> TimeStep[Obs]:
    return TimeStep(StepType.MID, 0.0, 1.0, observation, info)


def termination(reward: float, observation: Obs, info: dict[str, Any]) -> TimeStep[Obs]:
    """LAST with discount 0.0; ``observation`` is the episode's final one."""
    return TimeStep(StepType.LAST, reward, 0.0, observation, LastInfo(info))


def truncation(reward: float, observation: Obs, info: dict[str, Any]) -> TimeStep[Obs]:
    """LAST with discount 1.0; ``observation`` is what a value estimate bootstraps from."""
    return TimeStep(StepType.LAST, reward, 1.0, observation, LastInfo(info))


def renamed_argument(owner: str, old: str, new: str, value: Any) -> Any:
    """``value``, passed as ``owner``'s deprecated argument ``old``, with a DeprecationWarning
    pointing at ``owner``'s caller to pass ``new`` instead."""
    warnings.warn(f"{owner}({old}=...) is deprecated: pass {new}=...", DeprecationWarning, 3)
    return value


class LastInfo(dict[str, Any]):
    """LAST's ``info``: a plain dict, but for its deprecated key names, which still read (with a
    DeprecationWarning): ``info["trajectory"]`` is ``info["executions"]``, the scaffold's
    record of each executed action (a trajectory is the trainer's token-exact sample)."""

    RENAMED = {"trajectory": "executions"}

    def __missing__(self, key: str) -> Any:
        if key in self.RENAMED and self.RENAMED[key] in self:
            return self._renamed(key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        if key not in self and key in self.RENAMED and self.RENAMED[key] in self:
            return self._renamed(key)
        return super().get(key, default)

    def _renamed(self, key: str) -> Any:
        new = self.RENAMED[key]
        warnings.warn(f'info["{key}"] is deprecated: use info["{new}"]', DeprecationWarning, 3)
        return self[new]


class Environment(abc.ABC, Generic[Obs, Act]):
    """An async RL environment. Use ``async with env:`` or ``await env.close()``."""

    @abc.abstractmethod
    async def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> TimeStep[Obs]:
        """Start a new episode (ending any current one) and return its FIRST time step."""

    @abc.abstractmethod
    async def step(self, action: Act) -> TimeStep[Obs]:
        """Apply ``action`` and return the next time step (MID or LAST)."""

    async def abandon(self) -> None:
        """End the running episode now, if any, without a LAST time step, freeing what it
        holds (its sandbox). ``rollout`` calls it when the policy or the environment fails
        mid-episode, or the rollout is cancelled; ``reset`` and ``close`` do it too."""

    async def close(self) -> None:
        """Free every resource. Idempotent."""

    async def __aenter__(self) -> Environment[Obs, Act]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
