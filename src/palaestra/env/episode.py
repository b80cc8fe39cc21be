"""The episode :class:`~palaestra.env.code_env.CodeEnv` is running: its state and its clock.

:class:`RunningEpisode` holds what one episode has: its task, sandbox, mediated client and
scaffold task, the counters (agent and policy time, usage, cost) and the turns played.
The functions here are the moves of the state machine on it: start the scaffold, run it until it
asks the policy something or ends (:func:`advance`, which keeps the agent clock), take the
policy's action into the record (:func:`take_action`), and end the episode early
(:func:`abandon_episode`). :func:`last_info` and :func:`last_observation` assemble what the
LAST time step reports.

The agent's time limit counts environment time only (commands and scaffold work), not the time
the policy takes to answer: :func:`advance` runs the clock, :func:`take_action` the policy's.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any

from palaestra.env.agent_user import agent_sandbox
from palaestra.env.end import EpisodeEnd
from palaestra.llm.client import MediatedClient
from palaestra.llm.types import LLMRequest, LLMResponse, Usage
from palaestra.sandbox.base import Sandbox
from palaestra.scaffolds import Scaffold
from palaestra.scaffolds.base import EndReason, Outcome
from palaestra.tasks import Task
from palaestra.verify.harbor import VerifierResult


@dataclass
class RunningEpisode:
    id: str
    task: Task
    sandbox: Sandbox
    client: MediatedClient
    scaffold_task: asyncio.Task[Outcome]
    agent_budget_s: float
    current: Task
    """What the scaffold works on: the task, or the step of a multi-step task now running."""
    done: bool = False
    agent_s: float = 0.0
    policy_s: float = 0.0
    observed_at: float = 0.0
    last_request: LLMRequest | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    #: Each observation answered so far with its action (a snapshot's prefix; ``info["step"]``).
    turns: list[tuple[LLMRequest, LLMResponse]] = field(default_factory=list)
    step_results: list[tuple[Task, VerifierResult]] = field(default_factory=list)


def start_scaffold(
    scaffold: Scaffold, unit: Task, sandbox: Sandbox, client: MediatedClient
) -> asyncio.Task[Outcome]:
    """The scaffold on ``unit`` (the task or a step), as its ``[agent] user``."""
    view = agent_sandbox(sandbox, unit.agent_user)
    return asyncio.create_task(scaffold.run(unit, view, client))


async def advance(ep: RunningEpisode) -> LLMRequest | Outcome:
    """Run the scaffold until it asks the policy something or ends (an error outcome when it
    failed, an ``agent_timeout`` one when the agent's time ran out)."""
    getter = asyncio.ensure_future(ep.client.next_request())
    started = time.perf_counter()
    remaining = max(ep.agent_budget_s - ep.agent_s, 0.0)
    try:
        done, _ = await asyncio.wait(
            (getter, ep.scaffold_task),
            timeout=remaining if math.isfinite(remaining) else None,
            return_when=asyncio.FIRST_COMPLETED,
        )
    finally:  # cancelled: the getter goes with it (the scaffold is abandon_episode()'s)
        if not getter.done():
            getter.cancel()
    now = time.perf_counter()
    ep.agent_s += now - started
    if getter in done:
        ep.observed_at = now
        ep.last_request = getter.result()
        return ep.last_request
    if ep.scaffold_task in done:
        try:
            return ep.scaffold_task.result()
        except Exception as e:  # the scaffold or its sandbox failed: an error episode
            return Outcome(EndReason.ERROR, len(ep.turns), str(e), exception=e)
    ep.scaffold_task.cancel()
    await asyncio.gather(ep.scaffold_task, return_exceptions=True)
    limit = f"agent time limit of {ep.agent_budget_s:g} s reached"
    return Outcome(EndReason.AGENT_TIMEOUT, len(ep.turns), limit)


def take_action(ep: RunningEpisode, action: LLMResponse) -> None:
    """Record the policy's answer to the waiting request (its time, usage and cost) and hand it
    to the scaffold."""
    ep.policy_s += time.perf_counter() - ep.observed_at
    assert ep.last_request is not None
    ep.turns.append((ep.last_request, action))
    ep.usage = ep.usage + action.usage
    if action.cost_usd is not None:
        ep.cost_usd = (ep.cost_usd or 0.0) + action.cost_usd
    ep.client.respond(action)


def observe(ep: RunningEpisode) -> dict[str, Any]:
    """What every time step's ``info`` says about the episode."""
    return {"episode_id": ep.id, "task_id": ep.task.id, "step": len(ep.turns)}


async def abandon_episode(ep: RunningEpisode) -> None:
    """End ``ep`` early: cancel its scaffold and close its sandbox."""
    if not ep.scaffold_task.done():
        ep.scaffold_task.cancel()
        await asyncio.gather(ep.scaffold_task, return_exceptions=True)
    await ep.sandbox.close()


def last_info(
    ep: RunningEpisode, end: EpisodeEnd, outcome: Outcome, shaping_reward: float | None
) -> dict[str, Any]:
    """The LAST time step's ``info``: the end, the task's labels, timings, usage, cost, the
    scaffold's executions, the backend's adjustments, and each verified step's result."""
    ep.timings["agent_s"] = ep.agent_s
    ep.timings["policy_s"] = ep.policy_s
    info = observe(ep)
    info.update(
        end=end,
        shaping_reward=shaping_reward,
        category=ep.task.category,
        difficulty=ep.task.difficulty,
        timings=dict(ep.timings),
        usage=ep.usage.model_dump(),
        cost_usd=ep.cost_usd,
        executions=outcome.executions,
        sandbox_adjustments=list(ep.sandbox.adjustments),
    )
    if ep.task.steps:  # each verified step: its name and what its verifier found
        info["steps"] = [{"step": t.step, **r.to_dict()} for t, r in ep.step_results]
    return info


def last_observation(ep: RunningEpisode, outcome: Outcome, env_id: str) -> LLMRequest:
    """LAST's observation: the request the turn-loop scaffold would have sent next, when it
    made one (at the step limit: the conversation with the last action's output, what a
    truncated episode bootstraps from); otherwise (a submission, a format-error limit, the
    agent's time running out mid-command, an error, a scaffold without a next request) the last
    request the policy answered."""
    observation = ep.last_request
    if outcome.next_request is not None:  # merge what the client adds to every request
        observation = outcome.next_request.model_copy(
            update={"metadata": {**outcome.next_request.metadata, "env_id": env_id}}
        )
    assert observation is not None  # reset() returned a request, or raised
    return observation
