"""Snapshots of CodeEnv episodes, restore and fork, on the real local sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from palaestra import CodeEnv, EpisodeError
from palaestra.llm import LLMResponse
from palaestra.scaffolds import BashScaffold
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action


def snapshot_dirs(env: CodeEnv) -> list[Path]:
    run_dir = Path(env.backend.state_dir) / env.backend.run_id  # type: ignore[attr-defined]
    return sorted(run_dir.glob("snap-*")) if run_dir.is_dir() else []


async def test_forks_diverge_and_the_parent_is_untouched(make_task):
    # Local only: the env layer is the same on every backend (backend.restore); Docker's
    # snapshots are tested at the sandbox level (tests/sandbox/test_snapshot.py).
    env = CodeEnv(TaskSet.from_dir(make_task()))
    forks: list[CodeEnv] = []
    try:
        await env.reset(seed=3)
        action = LLMResponse(
            content=bash_action("echo 41 > answer.txt && echo base > base.txt"),
            prompt_token_ids=[1, 2, 3],
            completion_token_ids=[7, 8],
        )
        ts = await env.step(action)
        snapshot = await env.snapshot()
        assert snapshot.observation == ts.observation and snapshot.steps == 1
        assert snapshot.turns[0][1].completion_token_ids == [7, 8]  # the prefix, ids and all
        assert len(snapshot_dirs(env)) == 1

        pairs = await env.fork(snapshot, 2)
        forks = [fork for fork, _ in pairs]
        for _, first in pairs:
            assert first.first() and first.reward is None
            assert first.observation == snapshot.observation  # the same messages, exactly
            assert first.info["step"] == 1 and first.info["restored_from"] == snapshot.id
            assert first.info["episode_id"] not in (ts.info["episode_id"],)
        assert pairs[0][1].info["episode_id"] != pairs[1][1].info["episode_id"]

        for i, fork in enumerate(forks):
            await fork.step(bash_action(f"echo {i} > fork{i}.txt"))
        seen = [await fork.step(bash_action("ls /app | tr '\\n' ' '")) for fork in forks]
        parent = await env.step(bash_action("ls /app | tr '\\n' ' '"))
        listing = [ts.observation.messages[-1]["content"] for ts in (*seen, parent)]
        assert "fork0.txt" in listing[0] and "fork1.txt" not in listing[0]
        assert "fork1.txt" in listing[1] and "fork0.txt" not in listing[1]
        assert "base.txt" in listing[2] and "fork" not in listing[2]

        # Each fork's episode goes on to its own end; the prefix counts in its executions.
        await forks[0].step(bash_action("echo 42 > answer.txt"))
        passed = await forks[0].step(SUBMIT_ACTION)
        failed = await forks[1].step(SUBMIT_ACTION)
        assert passed.last() and passed.reward == 1.0 and passed.info["step"] == 5
        assert failed.last() and failed.reward == 0.0 and failed.info["step"] == 4
        assert [t["turn"] for t in passed.info["executions"]] == [0, 1, 2, 3, 4]
    finally:
        for fork in forks:
            await fork.close()
        await env.close()
    assert snapshot.released and snapshot_dirs(env) == []  # released by the env's close


async def test_restore_after_the_parent_went_on(make_task):
    env = CodeEnv(TaskSet.from_dir(make_task()), scaffold=BashScaffold(step_limit=3))
    async with env:
        await env.reset(seed=5)
        ts = await env.step(bash_action("echo 42 > answer.txt"))
        async with await env.snapshot() as snapshot:
            await env.step(bash_action("rm answer.txt && echo later > later.txt"))
            first = await env.restore(snapshot)
            assert first.first() and first.observation == ts.observation
            assert first.info["step"] == 1 and first.info["episode_id"] != ts.info["episode_id"]
            ts = await env.step(bash_action("ls /app | tr '\\n' ' '; cat answer.txt"))
            shown = ts.observation.messages[-1]["content"]
            assert "answer.txt" in shown and "42" in shown and "later.txt" not in shown
            # The step limit counts the turns before the snapshot: this is turn 3 of 3.
            last = await env.step(bash_action("echo again"))
            assert last.last() and last.truncated and last.info["end"].reason == "step_limit"
            assert last.reward == 1.0  # verified on truncation: the restored answer is there
            again = await env.restore(snapshot)  # a snapshot restores any number of times
            assert again.observation == snapshot.observation
            terminal = CodeEnv(env.tasks, scaffold="terminus")  # a live tmux session: no state
            with pytest.raises(EpisodeError, match="cannot resume"):
                await terminal.restore(snapshot)
        assert snapshot.released and snapshot_dirs(env) == []
        with pytest.raises(EpisodeError, match="released"):
            await env.restore(snapshot)


async def test_snapshot_needs_an_episode_waiting_for_an_action(make_task):
    async with CodeEnv(TaskSet.from_dir(make_task())) as env:
        with pytest.raises(EpisodeError, match="waiting for an action"):
            await env.snapshot()
        await env.reset()
        last = await env.step(SUBMIT_ACTION)
        assert last.last()
        with pytest.raises(EpisodeError, match="waiting for an action"):
            await env.snapshot()


async def test_a_restored_episode_runs_as_the_tasks_agent_user(make_task):
    task = make_task(extra_toml='user = "nobody"\n')  # appended to [agent]
    async with CodeEnv(TaskSet.from_dir(task)) as env:
        await env.reset(seed=1)
        async with await env.snapshot() as snapshot:
            await env.restore(snapshot)
            ts = await env.step(bash_action("id -un"))
    assert "<output>\nnobody\n</output>" in ts.observation.messages[-1]["content"]
