"""``rollout`` on real sandboxes: failures come back as error episodes, cancellation propagates,
and nothing is left running either way."""

from __future__ import annotations

import asyncio

import pytest

from palaestra import CodeEnv
from palaestra.env.types import EpisodeStatus
from palaestra.llm import LLMRequest, LLMResponse, ScriptedPolicy
from palaestra.run import rollout
from palaestra.scaffolds.base import EndReason, Outcome
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action
from tests.procs import own_sandbox_processes, sandbox_processes


def sleeper(marker: str) -> str:
    """An action that leaves a process running in the sandbox, ``marker`` on its command line."""
    return bash_action(f"(sleep 60; echo {marker}) >/dev/null 2>&1 & echo started")


def env_for(path, **kwargs) -> CodeEnv:
    return CodeEnv(TaskSet.from_dir(path), **kwargs)


class _FailingPolicy:
    """Starts a background process in the sandbox, then raises on its second answer."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.calls = 0

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        if self.calls == 1:
            return LLMResponse(content=sleeper(self.marker))
        raise ValueError("the policy server returned garbage")


async def test_a_policy_exception_mid_episode_is_an_error_episode(make_task):
    async with env_for(make_task()) as env:
        episode = await rollout(env, _FailingPolicy("policy-fail-marker"))
        assert env.episode_id is None  # abandoned: the sandbox is gone now, not at close
        assert not [p for p in sandbox_processes() if "policy-fail-marker" in p]
        again = await rollout(
            env, ScriptedPolicy([bash_action("echo 42 > answer.txt"), SUBMIT_ACTION])
        )
    end = episode.end
    assert (end.status, end.reason) == (EpisodeStatus.ERROR, EndReason.EXCEPTION)
    assert (end.error_class, end.error_message) == (
        "ValueError",
        "the policy server returned garbage",
    )
    assert not end.infra_error and episode.reward == 0.0
    assert not episode.terminated and not episode.truncated and episode.final_observation is None
    assert len(episode.turns) == 1 and "policy-fail-marker" in episode.turns[0].action.content
    assert episode.episode_id is not None and episode.task_id == "answer-task"
    assert episode.turns[0].observation.metadata["episode_id"] == episode.episode_id
    assert again.status == "passed" and again.episode_id != episode.episode_id
    assert not own_sandbox_processes()


class _SilentScaffold:
    """Ends without asking the policy anything: reset() cannot return FIRST."""

    name = "silent"

    async def run(self, task, sandbox, llm):
        return Outcome(EndReason.ERROR, 0, "nothing to ask", error_class="ScaffoldError")


async def test_an_env_failure_at_reset_is_an_error_episode(make_task):
    async with env_for(make_task(), scaffold=_SilentScaffold()) as env:
        episode = await rollout(env, ScriptedPolicy([]), options={"task_id": "answer-task"})
    assert episode.status == "error" and episode.end_reason == "exception"
    assert (
        episode.end.error_class == "EpisodeError" and "nothing to ask" in episode.end.error_message
    )
    assert episode.turns == [] and episode.task_id == "answer-task" and episode.episode_id is None
    assert not own_sandbox_processes()


async def test_an_infrastructure_failure_is_marked_for_retry(make_task):
    async def answer(request):
        raise ConnectionResetError("peer went away")

    class _Policy:
        complete = staticmethod(answer)

    async with env_for(make_task()) as env:
        episode = await rollout(env, _Policy())
    assert episode.end.error_class == "ConnectionResetError" and episode.end.infra_error


async def test_a_cancelled_rollout_propagates_and_frees_the_sandbox(make_task):
    asked = asyncio.Event()

    class _Hanging:
        calls = 0

        async def complete(self, request):
            self.calls += 1
            if self.calls == 1:
                return LLMResponse(content=sleeper("cancel-marker"))
            asked.set()
            await asyncio.Event().wait()  # never answers

    async with env_for(make_task()) as env:
        task = asyncio.create_task(rollout(env, _Hanging()))
        await asyncio.wait_for(asked.wait(), 30)
        assert [p for p in sandbox_processes() if "cancel-marker" in p]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert env.episode_id is None
        assert not [p for p in sandbox_processes() if "cancel-marker" in p]
    assert not own_sandbox_processes()


async def test_a_cost_limit_ends_the_episode_as_an_error_with_the_turns_kept(make_task):
    policy = ScriptedPolicy(lambda req: LLMResponse(content=bash_action("true"), cost_usd=0.3))
    async with env_for(make_task()) as env:
        episode = await rollout(env, policy, max_cost_usd=0.5)
    assert episode.end.error_class == "TrialCostExceeded" and len(episode.turns) == 2
    assert episode.cost_usd == pytest.approx(0.6)
