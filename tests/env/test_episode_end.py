"""LAST's observation, the typed episode end and per-turn shaping rewards, on real sandboxes."""

from __future__ import annotations

from palaestra import CodeEnv
from palaestra.env import EpisodeEnd, TurnInfo, format_error_penalty
from palaestra.llm import LLMResponse, ScriptedPolicy
from palaestra.run import rollout
from palaestra.scaffolds import BashScaffold
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action

SOLVE = bash_action("echo 42 > answer.txt")


def env_for(path, **kwargs) -> CodeEnv:
    return CodeEnv(TaskSet.from_dir(path), **kwargs)


async def test_terminated_last_keeps_the_last_request_answered(make_task):
    async with env_for(make_task()) as env:
        episode = await rollout(env, ScriptedPolicy([SOLVE, SUBMIT_ACTION]))
    assert episode.terminated and isinstance(episode.end, EpisodeEnd) and episode.reward == 1.0
    final = episode.final_observation
    assert final is not None and final.messages == episode.turns[-1].observation.messages
    assert (
        final.metadata["turn"] == 1
        and "<returncode>0</returncode>" in final.messages[-1]["content"]
    )


async def test_step_limit_last_is_the_request_the_scaffold_would_send_next(make_task):
    policy = ScriptedPolicy([SOLVE, bash_action("echo bootstrap-marker")])
    async with env_for(make_task(), scaffold=BashScaffold(step_limit=2)) as env:
        ts = await env.reset(seed=0)
        ts = await env.step(await policy.complete(ts.observation))
        answered = ts.observation
        ts = await env.step(await policy.complete(ts.observation))
    assert ts.truncated and ts.end.reason == "step_limit" and ts.reward == 1.0
    # the answered conversation, then the last action and its output: the bootstrapping state
    assert ts.observation.messages[: len(answered.messages)] == answered.messages
    assert len(ts.observation.messages) == len(answered.messages) + 2
    assert ts.observation.messages[-2]["role"] == "assistant"
    assert "bootstrap-marker" in ts.observation.messages[-1]["content"]
    assert ts.observation.metadata["turn"] == 2 and ts.observation.metadata["env_id"] == env.env_id


async def test_agent_timeout_last_is_the_request_the_timed_out_action_answered(make_task):
    policy = ScriptedPolicy([bash_action("sleep 30")])
    async with env_for(make_task(), agent_timeout_sec=1.0) as env:
        episode = await rollout(env, policy)
    assert episode.truncated and episode.end_reason == "agent_timeout"
    assert episode.final_observation is not None
    assert episode.final_observation.messages == episode.turns[0].observation.messages


async def test_error_end_keeps_the_observation_and_the_end_replaces_loose_keys(make_task):
    task = make_task(test_sh="echo no reward file\n")
    async with env_for(task) as env:
        ts = await env.reset()
        ts = await env.step(SUBMIT_ACTION)
    assert ts.last() and ts.observation is not None and ts.observation.messages
    end = ts.end
    assert end.status == "error" and end.error_class == "VerifierError" and not end.infra_error
    assert end.to_dict()["status"] == "error" and end.to_dict()["verifier"]["status"] == "error"
    for key in ("status", "end_reason", "error_class", "error_message", "error", "rewards"):
        assert key not in ts.info
    assert {"episode_id", "task_id", "timings", "usage", "cost_usd", "executions"} <= set(ts.info)


async def test_format_error_penalty_is_reported_per_turn_beside_the_reward(make_task):
    script = ["no code here", SOLVE, "still nothing", SUBMIT_ACTION]
    async with env_for(make_task(), shaping=format_error_penalty(-0.5)) as env:
        episode = await rollout(env, ScriptedPolicy(script))
    assert [t.shaping_reward for t in episode.turns] == [-0.5, 0.0, -0.5, 0.0]
    assert episode.reward == 1.0 and episode.end.reward == 1.0 and episode.status == "passed"


async def test_shaping_sees_a_format_error_on_the_last_turn(make_task):
    seen: list[TurnInfo] = []

    def shaping(turn: TurnInfo) -> float:
        seen.append(turn)
        return -1.0 if turn.format_error else 0.25

    task = make_task()
    scaffold = BashScaffold(max_consecutive_format_errors=2)
    async with env_for(task, scaffold=scaffold, shaping=shaping) as env:
        episode = await rollout(env, ScriptedPolicy([SOLVE, "junk", "junk"]))
    assert episode.end_reason == "format_error_limit" and episode.reward == 1.0
    assert [t.shaping_reward for t in episode.turns] == [0.25, -1.0, -1.0]
    assert [(t.index, t.format_error, t.last) for t in seen] == [
        (0, False, False),
        (1, True, False),
        (2, True, True),
    ]
    assert isinstance(seen[0].action, LLMResponse) and "answer.txt" in seen[0].action.content

    # at the step limit the last turn's format error comes from the request it would send next
    async with env_for(task, scaffold=BashScaffold(step_limit=2), shaping=shaping) as env:
        episode = await rollout(env, ScriptedPolicy([SOLVE, "junk"]))
    assert episode.truncated and [t.shaping_reward for t in episode.turns] == [0.25, -1.0]


async def test_without_a_hook_no_shaping_reward(make_task):
    async with env_for(make_task()) as env:
        ts = await env.reset()
        ts = await env.step("no code here")
        assert ts.mid() and ts.info["shaping_reward"] is None and ts.reward == 0.0
        ts = await env.step(SUBMIT_ACTION)
        assert ts.last() and ts.info["shaping_reward"] is None
