"""A real coding-agent CLI prepared ahead (``CodeEnv.prepare``): its start-up runs before the
reset, up to its first request, which waits at the proxy for the reset to hand it out; the
episode then plays as a cold one does, token ids and all, and nothing is left behind."""

from __future__ import annotations

import pytest

from palaestra import CodeEnv
from palaestra.env.registry import load_tasks
from palaestra.rl.trajectory import to_trajectories
from palaestra.run import rollout
from palaestra.scaffolds import OraclePolicy, make_scaffold
from tests.procs import eventually, own_sandbox_processes
from tests.scaffolds.conftest import proxy_stopped
from tests.scaffolds.harness_support import TokenPolicy, installed
from tests.scaffolds.test_external import our_processes

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier


def first_request_waiting(env: CodeEnv) -> bool:
    prepared = env._prepared
    if prepared is None or not prepared.starting.done():
        return False
    return prepared.starting.result().client.waiting


async def test_a_prepared_codex_waits_at_its_first_request_then_plays_the_episode():
    installed("codex")
    tasks = load_tasks("starter:0:2")
    scaffold = make_scaffold("codex")
    async with CodeEnv(tasks, scaffold=scaffold) as env:
        policy = TokenPolicy(OraclePolicy.from_tasks(env.tasks))
        await env.prepare(options={"task_index": 0})
        assert await eventually(lambda: first_request_waiting(env), within=60)
        episode = await rollout(
            env, policy, options={"task_index": 0}, prepare_next={"options": {"task_index": 1}}
        )
        assert episode.reward == 1.0 and episode.end_reason == "submitted", episode.end.error
        assert "ready_wait_s" in episode.info["timings"]
        first = episode.turns[0].observation
        assert first.metadata["scaffold"] == "codex" and first.metadata["api"] == "responses"
        trajectories = to_trajectories(episode, on_break="error")  # token-exact, one sample
        assert trajectories.breaks == [] and len(trajectories) == 1
        # the next one was prepared while this one ran, and plays too
        assert env.prepared_task_id == tasks.ids[1]
        second = await rollout(env, OraclePolicy.from_tasks(env.tasks), options={"task_index": 1})
        assert second.reward == 1.0, second.end.error
        assert "ready_wait_s" in second.info["timings"]
        await env.prepare(options={"task_index": 0})
        assert await eventually(lambda: first_request_waiting(env), within=60)
    # closed with a harness waiting at its first request: nothing left
    assert our_processes() == [] and not own_sandbox_processes()
    assert await proxy_stopped(scaffold)
