"""RolloutStream end to end on the real local sandbox, with scripted policies for control flow."""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
from contextlib import aclosing
from pathlib import Path

import pytest

from palaestra.env.code_env import CodeEnv
from palaestra.env.registry import load_tasks
from palaestra.llm import LLMRequest, LLMResponse
from palaestra.llm.versions import VersionedPolicy
from palaestra.rl.sampler import GroupOutcome, TaskDraw, has_reward_variance
from palaestra.rl.stream import RolloutStream
from palaestra.rl.versions import turn_versions
from palaestra.run.report import run_data, write_report
from palaestra.run.store import read_episodes, read_run
from palaestra.scaffolds.oracle import NopPolicy, OraclePolicy
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action
from tests.procs import own_sandbox_processes

GENERATED = "gen/edit-distance:0:16"


async def until(predicate, timeout: float = 60.0) -> None:
    """Poll ``predicate`` (a stream's counters change inside the loop, no event to wait on)."""
    async with asyncio.timeout(timeout):
        for _ in itertools.count():
            if predicate():
                return
            await asyncio.sleep(0.02)


def other_tasks() -> set[asyncio.Task]:
    return asyncio.all_tasks() - {asyncio.current_task()}


class Answers:
    """Writes ``answer(request)`` to /app/answer.txt on turn 0, then submits. ``fail(i)``
    raises ``error`` (an infrastructure error by default: retried) on the i-th try it sees; ``hold(k)`` parks every turn 0 of the k-th episode it
    sees (counted by the stream's task running it, so a retry is the same episode) until
    ``release`` is set."""

    name = "answers"

    def __init__(
        self,
        answer=lambda r: "42",
        fail=lambda i: False,
        hold=lambda k: False,
        error=ConnectionResetError,
    ):
        self.answer, self.fail, self.hold, self.error = answer, fail, hold, error
        self.tries = 0
        self.episodes: list[asyncio.Task] = []
        self.release = asyncio.Event()

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if request.metadata["turn"] != 0:
            return LLMResponse(content=SUBMIT_ACTION)
        i, self.tries = self.tries, self.tries + 1
        task = asyncio.current_task()
        if task not in self.episodes:
            self.episodes.append(task)
        if self.hold(self.episodes.index(task)):
            await self.release.wait()
        if self.fail(i):
            raise self.error(f"policy failure on try {i}")
        return LLMResponse(content=bash_action(f"echo {self.answer(request)} > /app/answer.txt"))


@pytest.fixture
def task_dir(make_task) -> Path:
    return make_task().parent


@pytest.mark.slow
async def test_128_concurrent_episodes_in_groups_of_8_leave_nothing(tmp_path):
    oracle = OraclePolicy.from_tasks(load_tasks(GENERATED))
    stream = RolloutStream(GENERATED, oracle, concurrency=128, buffer=16, out_dir=tmp_path)
    groups = []
    async with stream:
        async for group in stream.groups(8, draws=16):
            groups.append(group)
    assert len(groups) == 16 and all(len(g.episodes) == 8 for g in groups)
    for g in groups:
        assert {e.task_id for e in g.episodes} == {g.draw.task_id}
        assert g.rewards == [1.0] * 8 and g.outcome.solve_rate == 1.0
    s = stream.stats
    assert (s.started, s.finished, s.errors, s.completed_groups, s.yielded) == (128, 128, 0, 16, 16)
    assert s.max_in_flight == 128 and s.in_flight == 0  # all 128 ran at once
    assert sorted(g.draw.seed for g in groups) == list(range(16))
    rows = read_episodes(tmp_path)
    assert len(rows) == 128 and {r["status"] for r in rows} == {"passed"}
    assert read_run(tmp_path)["stop_reason"] is None
    assert not own_sandbox_processes() and not other_tasks()


async def test_a_stream_cancelled_mid_group_leaves_no_sandbox_task_or_row(task_dir, tmp_path):
    policy = Answers(hold=lambda k: k % 2 == 1)  # half the members never answer
    stream = RolloutStream(str(task_dir), policy, concurrency=4, out_dir=tmp_path)
    got = []

    async def consume() -> None:
        async with stream:
            async for group in stream.groups(4, draws=3):
                got.append(group)

    consumer = asyncio.create_task(consume())
    await until(lambda: stream.stats.finished >= 2)  # 2 members done, 2 parked in their sandboxes
    assert stream.stats.in_flight == 2 and own_sandbox_processes()
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert got == [] and stream.stats.completed_groups == 0
    assert not own_sandbox_processes() and not other_tasks()
    assert read_episodes(tmp_path, final_only=False) == []  # finished members of it too
    assert read_run(tmp_path)["stop_reason"] == "closed"


async def test_a_consumer_breaking_out_closes_the_stream(task_dir):
    stream = RolloutStream(str(task_dir), Answers(), concurrency=6, buffer=1)
    async with aclosing(stream.groups(2)) as groups:
        async for _ in groups:
            break
    assert stream.stats.yielded == 1 and stream.stats.in_flight == 0
    assert not own_sandbox_processes() and not other_tasks()


@pytest.mark.slow
async def test_a_slow_consumer_bounds_episodes_in_flight_plus_buffered(task_dir):
    started = 0

    class Counting(CodeEnv):
        async def reset(self, **kwargs):
            nonlocal started
            started += 1
            return await super().reset(**kwargs)

    tasks = TaskSet.from_dir(task_dir)
    stream = RolloutStream(lambda: Counting(tasks), NopPolicy(), concurrency=3, buffer=2)
    consumed, ahead = 0, []
    async with stream:
        async for _ in stream.episodes(draws=16):
            consumed += 1
            ahead.append(started - consumed)
            # the trainer is slower than the environments: it comes back once they filled the
            # buffer (or ran out of work), then takes its time
            await until(lambda: stream.stats.buffered == 2 or started == 16)
            await asyncio.sleep(0.2)
            ahead.append(started - consumed)
    assert consumed == started == 16
    assert max(ahead) <= 3 + 2, ahead
    assert stream.stats.max_in_flight <= 3 and stream.stats.max_buffered == 2


async def test_infra_errors_are_retried_and_never_enter_a_group(task_dir, tmp_path):
    policy = Answers(fail=lambda i: i in (1, 4))
    stream = RolloutStream(
        str(task_dir), policy, concurrency=4, out_dir=tmp_path, retry_backoff_s=0.0
    )
    async with stream:
        groups = [g async for g in stream.groups(3, draws=3)]
    assert len(groups) == 3 and all(g.rewards == [1.0, 1.0, 1.0] for g in groups)
    s = stream.stats
    assert (s.errors, s.retried, s.dropped_error, s.started) == (2, 2, 0, 11)
    assert s.error_classes == {"ConnectionResetError": 2}
    rows = read_episodes(tmp_path, final_only=False)
    retried = [r for r in rows if not r["final"]]
    assert len(rows) == 11 and len(retried) == 2
    assert {r["status"] for r in retried} == {"error"} and all(r["try"] == 0 for r in retried)
    finals = read_episodes(tmp_path)
    assert len(finals) == 9 and {r["status"] for r in finals} == {"passed"}
    assert sorted(r["attempt"] for r in finals) == list(range(9))  # one task, 9 attempts


async def test_drop_group_and_exhausted_retries_drop_the_group(task_dir):
    policy = Answers(fail=lambda i: i == 0)
    stream = RolloutStream(str(task_dir), policy, concurrency=2, on_error="drop_group")
    async with stream:
        groups = [g async for g in stream.groups(2, draws=3)]
    assert len(groups) == 2 and all(g.rewards == [1.0, 1.0] for g in groups)
    assert stream.stats.dropped_error == 1 and stream.stats.errors == 1

    always = Answers(fail=lambda i: True)
    stream = RolloutStream(str(task_dir), always, concurrency=1, retries=2, retry_backoff_s=0)
    async with stream:
        assert [e async for e in stream.episodes(draws=2)] == []
    s = stream.stats
    assert (s.started, s.errors, s.retried, s.dropped_error) == (6, 6, 4, 2)

    with pytest.warns(DeprecationWarning, match="retries="):  # the old name still works
        stream = RolloutStream(str(task_dir), always, max_retries=1, retry_backoff_s=0)
    assert stream.retry.retries == 1
    assert not own_sandbox_processes()


class Recorder:
    """A sampler that alternates between two tasks and records every update."""

    def __init__(self, ids: list[str]) -> None:
        self.ids, self.n, self.updates = ids, 0, []

    def draw(self, rng: random.Random) -> TaskDraw:
        self.n += 1
        return TaskDraw(self.ids[self.n % 2], difficulty=0.5)

    def update(self, outcome: GroupOutcome) -> None:
        self.updates.append(outcome)


async def test_sampler_update_per_group_and_the_filter(make_task, tmp_path):
    root = tmp_path / "two"
    make_task("easy-task", root=root)
    make_task("coin-task", root=root)
    coin = iter(range(1000))

    def answer(request: LLMRequest) -> str:  # coin-task: alternately right and wrong (one group
        # runs at a time, so each gets consecutive answers: some right, some wrong)
        if request.metadata["task_id"] == "coin-task":
            return "42" if next(coin) % 2 else "41"
        return "42"

    sampler = Recorder(["easy-task", "coin-task"])
    stream = RolloutStream(
        str(root),
        Answers(answer),
        concurrency=3,
        sampler=sampler,
        group_filter=has_reward_variance,
    )
    async with stream:
        groups = [g async for g in stream.groups(3, draws=4)]
    assert len(sampler.updates) == 4 and stream.stats.filtered == 2
    by_task = {u.draw.task_id: [] for u in sampler.updates}
    for u in sampler.updates:
        by_task[u.draw.task_id].append(u)
        assert u.draw.difficulty == 0.5 and len(u.rewards) == 3
    assert all(u.rewards == (1.0, 1.0, 1.0) and all(u.passed) for u in by_task["easy-task"])
    for u in by_task["coin-task"]:
        assert set(u.rewards) == {0.0, 1.0} and u.passed == tuple(r == 1.0 for r in u.rewards)
    assert [g.draw.task_id for g in groups] == ["coin-task", "coin-task"]


async def test_stale_episodes_are_dropped_or_kept_and_counted(task_dir):
    for mode, yielded in (("drop", 2), ("keep", 4)):
        inner = Answers(hold=lambda k: k >= 2)
        policy = VersionedPolicy(inner)
        stream = RolloutStream(str(task_dir), policy, concurrency=4, max_staleness=1, stale=mode)
        episodes = []
        async with stream:
            async for episode in stream.episodes(draws=4):
                episodes.append(episode)
                if len(episodes) == 2:  # two held episodes are in flight across 2 updates
                    assert stream.stats.in_flight == 2
                    policy.bump()
                    policy.bump()
                    inner.release.set()
        assert len(episodes) == yielded and stream.stats.stale == 2, mode
        assert stream.stats.dropped_stale == (2 if mode == "drop" else 0)
        assert [turn_versions(e) for e in episodes[:2]] == [[0, 0], [0, 0]]
        if mode == "keep":  # first turn sent at version 0, the second after the updates
            assert [turn_versions(e) for e in episodes[2:]] == [[0, 2], [0, 2]]


def test_the_sync_iterator_works_from_plain_code_and_closes(task_dir):
    threads = threading.active_count()
    stream = RolloutStream(str(task_dir), NopPolicy(), concurrency=4)
    with stream.groups_sync(2, draws=3) as groups:
        got = [g.rewards for g in groups]
    assert got == [[0.0, 0.0]] * 3 and stream.stats.completed_groups == 3

    stream = RolloutStream(str(task_dir), NopPolicy(), concurrency=4, buffer=1)
    for _ in stream.episodes_sync():  # endless: the consumer stops it
        break
    assert stream.stats.yielded == 1
    assert threading.active_count() == threads and not own_sandbox_processes()


async def test_bad_options_are_named(task_dir):
    with pytest.raises(ValueError, match="policy_version"):
        RolloutStream(str(task_dir), NopPolicy(), max_staleness=1)
    with pytest.raises(ValueError, match="on_error"):
        RolloutStream(str(task_dir), NopPolicy(), on_error="ignore")  # type: ignore[arg-type]
    stream = RolloutStream(str(task_dir), NopPolicy(), concurrency=2)
    with pytest.raises(ValueError, match="raise concurrency"):
        await anext(stream.groups(4))


async def test_a_stream_run_reports_like_an_eval(tmp_path):
    env = "gen/edit-distance:0:2"
    stream = RolloutStream(env, NopPolicy(), concurrency=4, out_dir=tmp_path / "run")
    async with stream:
        assert len([g async for g in stream.groups(2, draws=2)]) == 2
    run = read_run(tmp_path / "run")
    assert run["env_id"] == env and run["policy"] == "nop" and run["scaffold"] == "bash"
    data = await asyncio.to_thread(run_data, tmp_path / "run", 100, 10)
    assert data["summary"]["episodes"] == 4 and data["summary"]["errors"] == 0
    assert len(data["episodes"]) == 4 and all(e["turns"] for e in data["episodes"])
    await asyncio.to_thread(write_report, [tmp_path / "run"], tmp_path / "report.html")


async def test_a_failing_sampler_ends_the_stream_with_its_error(task_dir, tmp_path):
    class Broken:
        def draw(self, rng: random.Random) -> TaskDraw:
            raise LookupError("the curriculum ran out of tasks")

        def update(self, outcome: GroupOutcome) -> None: ...

    stream = RolloutStream(str(task_dir), NopPolicy(), sampler=Broken(), out_dir=tmp_path)
    with pytest.raises(LookupError, match="ran out"):
        async with stream:
            [g async for g in stream.groups(2)]
    assert (
        read_run(tmp_path)["stop_reason"] == "failed: LookupError: the curriculum ran out of tasks"
    )
    assert not other_tasks()
