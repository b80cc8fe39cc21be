"""``RetryPolicy``: which episode tries run again, and after how long; the one retry rule of
``evaluate``, ``RolloutStream`` and the Ray executor's callers.

An episode that ends on a transient infrastructure error (``EpisodeEnd.infra_error``, decided
by :func:`palaestra.env.end.is_infra_error`: a sandbox that fails to start or dies, a dropped
connection, a transient LLM API error) runs again, up to ``retries`` more times, after a backoff
of ``backoff_s * 2**try`` seconds. Every other end is final at once: a deterministic error (a
policy bug, a task or verifier failure, a sandbox that cannot be made from the task's spec)
would fail the same way again, and a passed or failed episode is a result.

:meth:`RetryPolicy.run` is the try loop both runners use: it plays tries until one is final
and hands each to the caller as it ends (the caller records it: a store row, a group's member).
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from palaestra.env.end import EpisodeEnd
from palaestra.env.types import EpisodeStatus
from palaestra.run.rollout import Episode

Sleep = Callable[[float], Awaitable[object]]


@dataclass(frozen=True)
class RetryPolicy:
    """Retry infrastructure errors ``retries`` times, ``backoff_s * 2**try`` seconds apart.

    ``sleep`` waits out a backoff (``asyncio.sleep``; a test passes its own to see the delays).
    """

    retries: int = 2
    backoff_s: float = 1.0
    sleep: Sleep = field(default=asyncio.sleep, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.retries < 0 or self.backoff_s < 0:
            raise ValueError(
                f"retries={self.retries} and retry backoff {self.backoff_s:g}s must be >= 0"
            )

    @classmethod
    def of(
        cls,
        retries: int | RetryPolicy,
        backoff_s: float | None = None,
        *,
        max_retries: int | None = None,
        owner: str = "",
    ) -> RetryPolicy:
        """The policy a runner's ``retries`` / ``retry_backoff_s`` arguments name: a count
        (with ``backoff_s``, 1 s when None) or a policy (then ``backoff_s`` stays None).
        ``max_retries`` is the deprecated name of ``retries`` in ``owner``'s arguments: given,
        it wins, with a DeprecationWarning pointing at the runner's caller."""
        if max_retries is not None:
            warnings.warn(
                f"{owner}(max_retries=...) is deprecated: pass retries=... (as to evaluate)",
                DeprecationWarning,
                stacklevel=3,
            )
            retries = max_retries
        if isinstance(retries, RetryPolicy):
            if backoff_s is not None:
                raise ValueError("retry_backoff_s: set the backoff in the RetryPolicy passed")
            return retries
        return cls(retries, 1.0 if backoff_s is None else backoff_s)

    def should_retry(self, end: EpisodeEnd, try_index: int) -> bool:
        """Whether the try ``try_index`` (0 for the first) that ended with ``end`` runs again."""
        return end.status == EpisodeStatus.ERROR and end.infra_error and try_index < self.retries

    def delay(self, try_index: int) -> float:
        """Seconds to wait after the try ``try_index`` before the next one."""
        return self.backoff_s * 2**try_index

    async def run(
        self,
        play: Callable[[], Awaitable[Episode]],
        on_try: Callable[[Episode, int, bool], Awaitable[None]] | None = None,
    ) -> Episode:
        """Play tries until one is final and return it; after each, ``on_try(episode,
        try_index, final)`` (the caller records it), then the backoff when another follows."""
        try_index = 0
        while True:
            episode = await play()
            final = not self.should_retry(episode.end, try_index)
            if on_try is not None:
                await on_try(episode, try_index, final)
            if final:
                return episode
            await self.sleep(self.delay(try_index))
            try_index += 1
