"""Episodes prepared ahead (``CodeEnv.prepare``, palaestra.env.ahead) on the real local sandbox:
the reset takes the episode that was started for it, the same episode a cold reset starts; one
prepared for another task is closed; nothing is left behind; the agent's clock starts at the
reset."""

from __future__ import annotations

import asyncio
import time

import pytest

from palaestra import CodeEnv, EpisodeError
from palaestra.env.healthcheck import HealthcheckError
from palaestra.run import evaluate, rollout
from palaestra.run.executor import LocalExecutor
from palaestra.scaffolds import BashScaffold, OraclePolicy
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action
from tests.procs import eventually, own_sandbox_processes

UNHEALTHY = """
[environment.healthcheck]
command = "false"
interval_sec = 0.05
retries = 2
"""
SLOW_TEST = """\
sleep 0.5
if [ "$(cat /app/answer.txt 2>/dev/null)" = "42" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""
#: How long the slow scaffold takes before its first request (its "start-up").
START_S = 2.0


class SlowStart(BashScaffold):
    """The bash scaffold after a start-up of START_S, each start counted."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[str] = []

    async def run(self, task, sandbox, llm):
        self.starts.append(task.id)
        await asyncio.sleep(START_S)
        return await super().run(task, sandbox, llm)


class StartClock(BashScaffold):
    """The bash scaffold, the time of each start kept."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[float] = []

    async def run(self, task, sandbox, llm):
        self.started.append(time.monotonic())
        return await super().run(task, sandbox, llm)


@pytest.fixture
def three(make_task, tmp_path) -> TaskSet:
    root = tmp_path / "three"
    for i in range(3):
        make_task(f"t{i}", root=root)
    return TaskSet.from_dir(root)


def prepared_ready(env: CodeEnv) -> bool:
    prepared = env._prepared
    return prepared is not None and prepared.starting.done()


async def test_the_reset_takes_the_prepared_episode_and_the_agent_clock_starts_there(three):
    scaffold = SlowStart()
    async with CodeEnv(three, scaffold=scaffold, pick="cycle") as env:
        await env.prepare()
        assert env.prepared_task_id == "t0" and env.is_prepared_for()
        assert not env.is_prepared_for(options={"task_id": "t1"})
        assert await eventually(lambda: scaffold.starts == ["t0"])  # before any reset
        assert prepared_ready(env)
        await asyncio.sleep(START_S)  # its start-up is over: the request waits
        first = await env.reset()
        assert first.info["task_id"] == "t0" and scaffold.starts == ["t0"]
        assert env.prepared_task_id is None
        await env.step(bash_action("echo 42 > /app/answer.txt"))
        last = await env.step(SUBMIT_ACTION)
        assert last.reward == 1.0
        timings = last.info["timings"]
        assert timings["ready_wait_s"] < START_S and timings["agent_s"] < START_S
        # cold, the start-up is the agent's time, as before
        cold = await rollout(env, OraclePolicy.from_tasks(env.tasks))
        assert cold.task_id == "t1" and cold.reward == 1.0
        assert "ready_wait_s" not in cold.info["timings"]
        assert cold.info["timings"]["agent_s"] >= START_S
    assert not own_sandbox_processes()


async def test_prepare_reads_the_pick_without_advancing_it(three):
    """A prepared episode is the one the same reset picks cold: seeded, cycled, named."""

    async def picks(prepare: bool, pick: str) -> list[str]:
        async with CodeEnv(three, pick=pick) as env:
            seen = []
            for seed in (3, None, None, 11, None):
                if prepare:
                    await env.prepare(seed=seed)
                seen.append((await env.reset(seed=seed)).info["task_id"])
            return seen

    assert await picks(True, "random") == await picks(False, "random")
    assert (
        await picks(True, "cycle") == await picks(False, "cycle") == ["t0", "t1", "t2", "t0", "t1"]
    )


async def test_a_reset_on_another_task_closes_the_prepared_one(three):
    scaffold = SlowStart()
    async with CodeEnv(three, scaffold=scaffold) as env:
        await env.prepare(options={"task_id": "t2"})
        await env.prepare(options={"task_id": "t2"})  # already under way: nothing new
        assert await eventually(lambda: scaffold.starts == ["t2"])
        await env.prepare(options={"task_id": "t1"})  # another: the first is closed
        assert await eventually(lambda: scaffold.starts == ["t2", "t1"])
        assert env.prepared_task_id == "t1"
        first = await env.reset(options={"task_id": "t0"})
        assert first.info["task_id"] == "t0" and env.prepared_task_id is None
        assert len(env.backend._open) == 1  # t0's: the prepared t1's is closed
        assert scaffold.starts == ["t2", "t1", "t0"]
        await env.prepare(options={"task_id": "t1"})
        assert await eventually(lambda: prepared_ready(env))
        assert len(env.backend._open) == 2
    # closed with an episode prepared and one running: no sandbox left
    assert not env.backend._open and not own_sandbox_processes()


async def test_a_prepared_episode_that_fails_to_start_fails_its_reset(make_task, tmp_path):
    root = tmp_path / "broken"
    make_task("ok", root=root)
    make_task("unhealthy", root=root, extra_toml=UNHEALTHY)
    tasks = TaskSet.from_dir(root)
    async with CodeEnv(tasks) as env:
        await env.prepare(options={"task_id": "unhealthy"})
        with pytest.raises(HealthcheckError, match="failed 2 consecutive") as prepared:
            await env.reset(options={"task_id": "unhealthy"})
        episode = await rollout(env, OraclePolicy.from_tasks(tasks), options={"task_id": "ok"})
        assert episode.reward == 1.0  # the env goes on
    async with CodeEnv(tasks) as env:
        with pytest.raises(HealthcheckError) as cold:
            await env.reset(options={"task_id": "unhealthy"})
    assert str(prepared.value) == str(cold.value)
    assert not own_sandbox_processes()


async def test_prepare_refuses_to_call_a_pick_function_ahead(three):
    calls = []

    def curriculum(rng, n: int) -> int:
        calls.append(n)
        return 0

    async with CodeEnv(three, pick=curriculum) as env:
        with pytest.raises(ValueError, match=r"needs the task named: options=\{'task_id'"):
            await env.prepare()
        assert calls == []
        await env.prepare(options={"task_index": 2})
        assert env.prepared_task_id == "t2" and calls == []
        await env.close()
        with pytest.raises(EpisodeError, match="closed"):
            await env.prepare()


async def test_evaluate_prepares_each_worker_s_next_episode(make_task, tmp_path):
    """evaluate(prepare_ahead=True): each episode but the first is started while the one
    before it runs (one worker here); the results are those of a cold run."""
    root = tmp_path / "three"
    for i in range(3):  # a verifier of 0.5 s: the next sandbox is made well before it ends
        make_task(f"t{i}", root=root, test_sh=SLOW_TEST)
    three = TaskSet.from_dir(root)
    runs = {}
    for ahead in (False, True):
        scaffold, ended = StartClock(), []
        summary = await evaluate(
            str(tmp_path / "three"),
            "oracle",
            tasks=three,
            attempts=2,
            concurrency=1,
            scaffold=scaffold,
            prepare_ahead=ahead,
            out_dir=tmp_path / f"run-{ahead}",
            on_episode=lambda record, ended=ended: ended.append(time.monotonic()),
        )
        assert summary["pass_rate"] == 1.0 and summary["episodes"] == 6
        assert summary["retried"] == 0
        # how many episodes had started when each one ended
        runs[ahead] = [sum(t < end for t in scaffold.started) for end in ended]
    assert runs[False] == [1, 2, 3, 4, 5, 6]
    assert runs[True] == [2, 3, 4, 5, 6, 6]
    assert not own_sandbox_processes()


async def test_the_local_executor_plays_an_episode_on_the_env_that_prepared_it(three):
    made: list[CodeEnv] = []

    def make_env() -> CodeEnv:
        made.append(CodeEnv(three))
        return made[-1]

    executor = LocalExecutor(make_env, OraclePolicy.from_tasks(three))
    try:
        first = executor.run(0, {"task_id": "t0"}, None, {"seed": 1, "options": {"task_id": "t1"}})
        other = executor.run(2, {"task_id": "t2"})
        a, b = await asyncio.gather(first, other)
        assert a.reward == b.reward == 1.0 and len(made) == 2
        preparer = next(env for env in made if env.prepared_task_id == "t1")
        second = await executor.run(1, {"task_id": "t1"})
        assert second.reward == 1.0 and "ready_wait_s" in second.info["timings"]
        assert preparer.prepared_task_id is None and len(made) == 2
    finally:
        await executor.aclose()
    assert not own_sandbox_processes()


async def test_concurrent_prepares_and_a_close_leave_one_episode_or_none(three):
    env = CodeEnv(three)
    await env.prepare(options={"task_id": "t0"})
    await asyncio.gather(*(env.prepare(options={"task_id": t}) for t in ("t1", "t2", "t1")))
    assert env.prepared_task_id in {"t1", "t2"}
    assert await eventually(lambda: prepared_ready(env))
    assert len(env.backend._open) == 1  # the others were closed
    # a prepare that is closing the last one when the env closes starts nothing
    preparing = asyncio.ensure_future(env.prepare(options={"task_id": "t0"}))
    closing = asyncio.ensure_future(env.close())
    assert await asyncio.gather(preparing, closing) == [None, None]
    assert env.prepared_task_id is None and not env.backend._open
    assert not own_sandbox_processes()


async def test_a_reset_cancelled_while_its_prepared_episode_starts_leaves_nothing(three):
    async with CodeEnv(three) as env:
        await env.prepare(options={"task_id": "t1"})
        resetting = asyncio.ensure_future(env.reset(options={"task_id": "t1"}))
        await asyncio.sleep(0)  # the reset waits for the sandbox being made
        assert not resetting.done()
        resetting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await resetting
        assert env.prepared_task_id is None
        assert await eventually(lambda: not env.backend._open)
        episode = await rollout(env, OraclePolicy.from_tasks(three), options={"task_id": "t1"})
        assert episode.reward == 1.0  # the env goes on
    assert not own_sandbox_processes()


async def test_forks_do_not_share_the_episode_their_parent_prepared(three):
    async with CodeEnv(three, pick="cycle") as env:
        await env.reset()
        await env.step(bash_action("echo 41 > /app/answer.txt"))
        await env.prepare()  # the parent's next episode: t1
        snapshot = await env.snapshot()
        forks = await env.fork(snapshot, 2)
        assert [fork.prepared_task_id for fork, _ in forks] == [None, None]
        for fork, _ in forks:
            await fork.close()  # closes nothing of the parent's
        assert env.prepared_task_id == "t1"
        assert (await env.reset()).info["task_id"] == "t1"
        assert "ready_wait_s" in env._episode.timings
    assert not own_sandbox_processes()
