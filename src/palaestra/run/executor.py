"""Where episodes run: the executor contract and the in-process one.

An :class:`EpisodeExecutor` plays one episode on request and returns it as plain data (an
:class:`~palaestra.run.rollout.Episode`); what to do with it (the store row, retries of
infrastructure errors, groups) stays with the caller: ``evaluate`` and ``RolloutStream`` both
run their tries through :class:`~palaestra.run.retry.RetryPolicy`, make each try's store row
with :func:`~palaestra.run.rows.episode_row` and write it with
:class:`~palaestra.run.recorder.RunRecorder`, whatever runs the episodes. :class:`LocalExecutor` runs them in this
process; :class:`~palaestra.run.ray_executor.RayExecutor` on the actors of a Ray cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from palaestra.env.types import Environment
from palaestra.llm.client import LLMClient
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.run.rollout import Episode, rollout

EnvFactory = Callable[[], Environment[LLMRequest, LLMResponse]]


class EpisodeExecutor(Protocol):
    """Runs episodes; every call is one episode, any number of calls may run at once."""

    async def run(
        self,
        seed: int | None,
        options: dict[str, Any] | None,
        max_cost_usd: float | None = None,
        prepare_next: dict[str, Any] | None = None,
    ) -> Episode:
        """Reset with ``seed`` and ``options``, play to the end (see
        :func:`~palaestra.run.rollout.rollout`), return the episode. ``prepare_next``: the
        caller's next call's ``seed`` and ``options``, which an executor may start ahead (a
        hint: it changes no episode)."""
        ...

    async def aclose(self) -> None:
        """Free everything the executor holds. Idempotent."""
        ...


class LocalExecutor:
    """Episodes in this process: one environment per episode in flight, reused afterwards.

    An environment whose episode raised or was cancelled is closed (its state is unknown);
    the close goes on, and :meth:`aclose` waits for it, when the caller is cancelled.
    """

    def __init__(self, make_env: EnvFactory, policy: LLMClient) -> None:
        self.make_env = make_env
        self.policy = policy
        self._idle: list[Environment[LLMRequest, LLMResponse]] = []
        self._closing: set[asyncio.Future[None]] = set()

    async def run(
        self,
        seed: int | None,
        options: dict[str, Any] | None,
        max_cost_usd: float | None = None,
        prepare_next: dict[str, Any] | None = None,
    ) -> Episode:
        env = self._take(seed, options)
        try:
            episode = await rollout(
                env,
                self.policy,
                seed=seed,
                options=options,
                max_cost_usd=max_cost_usd,
                prepare_next=prepare_next,
            )
        except BaseException:
            close = asyncio.ensure_future(env.close())
            self._closing.add(close)
            close.add_done_callback(self._closing.discard)
            await asyncio.shield(close)
            raise
        self._idle.append(env)
        return episode

    def _take(
        self, seed: int | None, options: dict[str, Any] | None
    ) -> Environment[LLMRequest, LLMResponse]:
        """The idle environment that prepared this episode (``prepare_next`` of the caller's
        previous call, :meth:`CodeEnv.prepare <palaestra.env.code_env.CodeEnv.prepare>`), else
        one that prepared none (another caller's next episode is left to it), else any."""
        for wanted in (_prepared_for(seed, options), _unprepared):
            for i, env in enumerate(self._idle):
                if wanted(env):
                    return self._idle.pop(i)
        return self._idle.pop() if self._idle else self.make_env()

    def spare(self) -> Environment[LLMRequest, LLMResponse]:
        """An idle environment (made now when there is none), left in the pool: what a caller
        reads the parts from (its scaffold, its sandbox backend) without running an episode."""
        if not self._idle:
            self._idle.append(self.make_env())
        return self._idle[-1]

    async def aclose(self) -> None:
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
        idle, self._idle = self._idle, []
        await asyncio.gather(*(env.close() for env in idle), return_exceptions=True)


def _prepared_for(
    seed: int | None, options: dict[str, Any] | None
) -> Callable[[Environment[LLMRequest, LLMResponse]], bool]:
    def ready(env: Environment[LLMRequest, LLMResponse]) -> bool:
        check = getattr(env, "is_prepared_for", None)
        return bool(check is not None and check(seed=seed, options=options))

    return ready


def _unprepared(env: Environment[LLMRequest, LLMResponse]) -> bool:
    return getattr(env, "prepared_task_id", None) is None
