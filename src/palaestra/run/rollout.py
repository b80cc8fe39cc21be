"""``rollout``: drive one episode of an environment with a policy and keep every transition.

``rollout`` never raises for the episode's own failure: an exception out of the policy or out
of the environment (at reset or mid-episode) ends the episode as data, a partial
:class:`Episode` whose ``end`` has status ``error``, reason ``exception``, the exception's class
and message, and the turns played so far; the environment's episode is abandoned (its sandbox
freed) and the environment can be reset again. Cancellation is not a failure: it abandons the
episode the same way and propagates ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from palaestra.env.end import EpisodeEnd
from palaestra.env.types import Environment, EpisodeStatus, TimeStep
from palaestra.llm.client import LLMClient
from palaestra.llm.types import LLMRequest, LLMResponse, Usage
from palaestra.scaffolds.base import EndReason


class TrialCostExceeded(RuntimeError):
    """An episode's accumulated policy cost passed the rollout's ``max_cost_usd``."""


@dataclass
class Turn:
    """One observation, the policy's action on it, and the shaping reward the environment
    gave that action (``info["shaping_reward"]`` of the next time step; None without a hook).

    ``observation`` is the request as the policy got it: the environment's observation with the
    episode id added to its metadata (see :func:`rollout`)."""

    observation: LLMRequest
    action: LLMResponse
    shaping_reward: float | None = None


@dataclass
class Episode:
    """A played episode: its turns, how it ended, and the environment's LAST info.

    ``end`` is the LAST time step's :class:`EpisodeEnd`, or one built from the exception that
    cut the episode short (then ``terminated`` and ``truncated`` are both False and ``info`` is
    the last time step's info seen, or empty when reset failed). ``final_observation`` is LAST's
    observation (what a truncated episode bootstraps from); None when LAST was never reached.
    """

    turns: list[Turn]
    end: EpisodeEnd
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    final_observation: LLMRequest | None = None
    episode_id: str | None = None
    task_id: str | None = None
    wall_s: float = 0.0

    @property
    def reward(self) -> float:
        """The verifier's reward (0.0 for an error episode)."""
        return self.end.reward

    @property
    def status(self) -> EpisodeStatus:
        """``passed``, ``failed`` or ``error``."""
        return self.end.status

    @property
    def end_reason(self) -> EndReason:
        """How the agent's part ended."""
        return self.end.reason

    @property
    def usage(self) -> Usage:
        """The policy's token usage over every turn."""
        total = Usage()
        for turn in self.turns:
            total = total + turn.action.usage
        return total

    @property
    def cost_usd(self) -> float | None:
        """The policy's cost over every turn (None when no response was priced)."""
        costs = [t.action.cost_usd for t in self.turns if t.action.cost_usd is not None]
        return sum(costs) if costs else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The whole conversation: the last observation's messages plus the final action."""
        if not self.turns:
            return []
        last = self.turns[-1]
        return [*last.observation.messages, last.action.to_message()]


def _routed(request: LLMRequest, episode_id: str | None) -> LLMRequest:
    """The request with the episode id in its metadata, so a policy serving many episodes at
    once (the local HF policy's conversation memory) tells them apart. The environment's
    observation does not carry it: it is a function of the seed and the task only."""
    if episode_id is None:
        return request
    return request.model_copy(update={"metadata": {**request.metadata, "episode_id": episode_id}})


async def _prepare(env: Environment[LLMRequest, LLMResponse], kwargs: Mapping[str, Any]) -> None:
    """``env.prepare(**kwargs)`` where the environment has it; a failure is left to the next
    reset, which would fail on the same task or options and says why in its own words."""
    prepare = getattr(env, "prepare", None)
    if prepare is None:
        return
    with contextlib.suppress(Exception):
        await prepare(**kwargs)


async def rollout(
    env: Environment[LLMRequest, LLMResponse],
    policy: LLMClient,
    *,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
    max_cost_usd: float | None = None,
    prepare_next: Mapping[str, Any] | None = None,
) -> Episode:
    """Reset ``env``, then answer every observation with ``policy`` until LAST.

    ``prepare_next``: the next reset's keyword arguments (``{"seed": ..., "options": ...}``);
    once this episode has started, an environment that can (:meth:`CodeEnv.prepare
    <palaestra.env.code_env.CodeEnv.prepare>`) starts that one ahead, while this one runs.
    Preparing is an optimisation: what it fails on, the next reset reports.

    Each observation goes to the policy with ``metadata["episode_id"]`` added (the FIRST info's
    episode id). ``max_cost_usd`` ends the episode as an error (``TrialCostExceeded``) once the
    policy's accumulated cost passes it. Failures come back as an error :class:`Episode` (see
    the module docstring); ``CancelledError`` propagates after the episode is abandoned.
    """
    started = time.perf_counter()
    turns: list[Turn] = []
    info: dict[str, Any] = {}
    task_id = (options or {}).get("task_id")
    cost = 0.0
    try:
        ts: TimeStep[LLMRequest] = await env.reset(seed=seed, options=options)
        info = ts.info
        if prepare_next is not None:
            await _prepare(env, prepare_next)
        episode_id = info.get("episode_id")
        while not ts.last():
            assert ts.observation is not None
            observation = _routed(ts.observation, episode_id)
            action = await policy.complete(observation)
            turn = Turn(observation, action)
            turns.append(turn)
            cost += action.cost_usd or 0.0
            if max_cost_usd is not None and cost > max_cost_usd:
                raise TrialCostExceeded(
                    f"the episode cost ${cost:.4f}, over its limit of ${max_cost_usd:g}"
                )
            ts = await env.step(action)
            info = ts.info
            turn.shaping_reward = info.get("shaping_reward")
    except asyncio.CancelledError:
        await env.abandon()
        raise
    except Exception as e:  # the episode did not reach LAST: its failure is data
        await env.abandon()
        return Episode(
            turns=turns,
            end=EpisodeEnd.from_exception(e),
            info=info,
            episode_id=info.get("episode_id"),
            task_id=info.get("task_id", task_id),
            wall_s=time.perf_counter() - started,
        )
    end = ts.end
    if end is None:
        raise TypeError(f"{type(env).__name__}'s LAST time step has no info['end'] (EpisodeEnd)")
    return Episode(
        turns=turns,
        end=end,
        terminated=ts.terminated,
        truncated=ts.truncated,
        info=info,
        final_observation=ts.observation,
        episode_id=info.get("episode_id"),
        task_id=info.get("task_id", task_id),
        wall_s=time.perf_counter() - started,
    )
