"""``rollout``: drive one episode of an environment with a policy and keep every transition."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from palaestra.env.types import Environment, EpisodeStatus, TimeStep
from palaestra.llm.client import LLMClient
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.scaffolds.base import EndReason


@dataclass
class Turn:
    """One observation and the policy's action on it."""

    observation: LLMRequest
    action: LLMResponse


@dataclass
class Episode:
    """A finished episode: its turns, its final reward, and the environment's LAST info."""

    turns: list[Turn]
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def task_id(self) -> str | None:
        return self.info.get("task_id")

    @property
    def status(self) -> EpisodeStatus | None:
        """``passed``, ``failed`` or ``error`` (the LAST info's ``status``)."""
        return self.info.get("status")

    @property
    def end_reason(self) -> EndReason | None:
        """How the agent's part ended (the LAST info's ``end_reason``)."""
        return self.info.get("end_reason")

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The whole conversation: the last observation's messages plus the final action."""
        if not self.turns:
            return []
        last = self.turns[-1]
        return [*last.observation.messages, last.action.to_message()]


async def rollout(
    env: Environment[LLMRequest, LLMResponse],
    policy: LLMClient,
    *,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
) -> Episode:
    """Reset ``env``, then answer every observation with ``policy`` until LAST."""
    started = time.perf_counter()
    ts: TimeStep[LLMRequest] = await env.reset(seed=seed, options=options)
    turns: list[Turn] = []
    while not ts.last():
        assert ts.observation is not None
        action = await policy.complete(ts.observation)
        turns.append(Turn(ts.observation, action))
        ts = await env.step(action)
    return Episode(
        turns=turns,
        reward=ts.reward if ts.reward is not None else 0.0,
        terminated=ts.terminated,
        truncated=ts.truncated,
        info=ts.info,
        wall_s=time.perf_counter() - started,
    )
