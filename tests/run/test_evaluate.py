"""evaluate() on the real local sandbox: store contents, resume, retries, cost limits."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import httpx2
import openai
import pytest

from palaestra.env.registry import load_tasks, make
from palaestra.llm import LLMRequest, LLMResponse, ScriptedPolicy
from palaestra.run import RunMismatchError, episode_row, evaluate, rollout
from palaestra.run.export import export
from palaestra.run.store import read_episodes, read_run, read_steps
from palaestra.sandbox import default_backend
from palaestra.sandbox.base import SandboxBackend, SandboxError
from palaestra.scaffolds import BashScaffold
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action
from tests.procs import own_sandbox_processes

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier


async def test_oracle_run_fills_the_store(tmp_path):
    summary = await evaluate("starter", "oracle", concurrency=6, out_dir=tmp_path)
    assert summary["episodes"] == 18 and summary["pass_rate"] == 1.0, summary
    assert summary["errors"] == 0 and summary["pass_at_k"] == {1: 1.0}
    assert len(summary["by_category"]) == 6 and list(summary["by_difficulty"]) == [
        "easy",
        "medium",
        "hard",
    ]
    run = read_run(tmp_path)
    assert run["env_id"] == "starter" and run["policy"] == "oracle" and run["scaffold"] == "bash"
    assert run["finished_at"] is not None and run["stop_reason"] is None
    episodes = read_episodes(tmp_path)
    tasks = load_tasks("starter")
    assert sorted(e["task_id"] for e in episodes) == sorted(t.id for t in tasks)
    for e in episodes:
        task = tasks.get(e["task_id"])
        assert (e["category"], e["difficulty"]) == (task.category, task.difficulty)
        assert e["status"] == "passed" and e["reward"] == 1.0 and e["rewards"]["reward"] == 1.0
        assert e["steps"] == 2 and e["verified"] and e["final"] and e["try"] == 0
        assert e["cost_usd"] == 0.0  # the oracle costs nothing: 0, not unknown
        assert all(
            e[k] is not None and e[k] >= 0
            for k in ("sandbox_start_s", "agent_s", "verifier_s", "wall_s")
        )
    steps = read_steps(tmp_path)
    assert set(steps) == {e["id"] for e in episodes}
    for turns in steps.values():
        first, second = turns
        assert first["messages_from"] == 0 and first["new_messages"][0]["role"] == "system"
        assert first["execution"]["exit_code"] == 0 and "solve.sh" in first["execution"]["command"]
        # the second request adds the assistant's answer and the command's output
        assert second["messages_from"] == 2
        assert [m["role"] for m in second["new_messages"]] == ["assistant", "user"]
        assert "<returncode>0</returncode>" in second["new_messages"][1]["content"]
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["passed"] == 18
    assert not own_sandbox_processes()


async def test_nop_solves_no_starter_task(tmp_path):
    summary = await evaluate("starter", "nop", concurrency=6, out_dir=tmp_path)
    assert summary["passed"] == 0 and summary["errors"] == 0
    assert {e["status"] for e in read_episodes(tmp_path)} == {"failed"}


def _alternating(make_task):
    """One task, and a policy that solves the 1st and 3rd episode it sees, not the others."""
    tasks = TaskSet.from_dir(make_task().parent)
    seen: list[int] = []

    def answer(request):
        if request.metadata["turn"] == 0:
            seen.append(1)
            if len(seen) % 2 == 1:
                return bash_action("echo 42 > /app/answer.txt")
            return bash_action("echo 41 > /app/answer.txt")
        return SUBMIT_ACTION

    return tasks, ScriptedPolicy(answer)


async def test_pass_at_k_on_a_real_run(tmp_path, make_task):
    tasks, policy = _alternating(make_task)
    summary = await evaluate(
        str(tmp_path / "tasks"),
        policy,
        attempts=4,
        concurrency=1,
        out_dir=tmp_path / "run",
        tasks=tasks,
    )
    assert summary["episodes"] == 4 and summary["passed"] == 2
    assert summary["pass_at_k"][1] == pytest.approx(0.5)
    assert summary["pass_at_k"][2] == pytest.approx(1 - 1 / 6)  # 1 - C(2,2)/C(4,2)
    assert summary["pass_at_k"][3] == 1.0
    assert [e["attempt"] for e in read_episodes(tmp_path / "run")] == [0, 1, 2, 3]


async def test_rerun_resumes_and_a_different_config_is_refused(tmp_path):
    first = await evaluate("starter:0:2", "nop", attempts=2, concurrency=2, out_dir=tmp_path)
    assert first["episodes"] == 4 and first["skipped"] == 0 and not first["resumed"]
    again = await evaluate("starter:0:2", "nop", attempts=2, concurrency=2, out_dir=tmp_path)
    assert again["resumed"] and again["skipped"] == 4 and again["episodes"] == 4
    assert len(read_episodes(tmp_path, final_only=False)) == 4
    with pytest.raises(RunMismatchError, match=r"policy: stored 'nop', now 'oracle'.*--overwrite"):
        await evaluate("starter:0:2", "oracle", attempts=2, out_dir=tmp_path)
    with pytest.raises(RunMismatchError, match="attempts: stored 2, now 3"):
        await evaluate("starter:0:2", "nop", attempts=3, out_dir=tmp_path)
    fresh = await evaluate("starter:0:2", "oracle", out_dir=tmp_path, overwrite=True)
    assert fresh["passed"] == 2 and len(read_episodes(tmp_path)) == 2


class FlakyBackend(SandboxBackend):
    """The real local backend, failing its first ``failures`` creates (a flaky infrastructure)."""

    name = "flaky-local"

    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0

    async def create(self, spec):
        self.calls += 1
        if self.calls <= self.failures:
            raise SandboxError(f"could not start sandbox (simulated failure {self.calls})")
        return await default_backend("local").create(spec)


async def test_infrastructure_errors_are_retried_with_each_try_recorded(tmp_path):
    backend = FlakyBackend(failures=2)
    summary = await evaluate(
        "starter:0:1", "oracle", sandbox=backend, retries=2, retry_backoff_s=0.01, out_dir=tmp_path
    )
    assert summary["passed"] == 1 and summary["retried"] == 2 and backend.calls == 3
    tries = read_episodes(tmp_path, final_only=False)
    assert [(t["try"], t["final"], t["status"]) for t in tries] == [
        (0, False, "error"),
        (1, False, "error"),
        (2, True, "passed"),
    ]
    assert tries[0]["error_class"] == "SandboxError" and tries[0]["infra_error"]


class DiesOnce:
    """The bash scaffold, except that in its first episode the sandbox 'dies' mid-episode."""

    name = "bash"

    def __init__(self) -> None:
        self.runs = 0

    async def run(self, task, sandbox, llm):
        self.runs += 1
        if self.runs == 1:
            await llm.complete(LLMRequest(messages=[{"role": "user", "content": "go"}]))
            raise SandboxError("the sandbox died mid-episode")
        return await BashScaffold().run(task, sandbox, llm)


async def test_a_sandbox_dying_inside_the_scaffold_is_an_infrastructure_error(tmp_path):
    """The episode reaches LAST (status error, end reason error): its error class comes from
    CodeEnv's info as data, and makes the try an infrastructure error that is retried."""
    scaffold = DiesOnce()
    summary = await evaluate(
        "starter:0:1", "nop", scaffold=scaffold, retries=1, retry_backoff_s=0.01, out_dir=tmp_path
    )
    assert summary["retried"] == 1 and scaffold.runs == 2
    tries = read_episodes(tmp_path, final_only=False)
    assert [(t["try"], t["final"], t["status"], t["end_reason"]) for t in tries] == [
        (0, False, "error", "error"),
        (1, True, "failed", "submitted"),
    ]
    assert tries[0]["error_class"] == "SandboxError" and tries[0]["infra_error"]
    assert tries[0]["error_message"] == "the sandbox died mid-episode"
    assert summary["statuses"] == {"failed": 1} and summary["end_reasons"] == {"submitted": 1}


class MissingRootfsBackend(SandboxBackend):
    """The real local backend, given a root filesystem that is not there for every sandbox: a
    spec that fails the same way however often it is tried."""

    name = "missing-rootfs"

    def __init__(self, rootfs: Path) -> None:
        self.rootfs, self.calls = rootfs, 0

    async def create(self, spec):
        self.calls += 1
        return await default_backend("local").create(dataclasses.replace(spec, rootfs=self.rootfs))


async def test_deterministic_sandbox_errors_are_not_retried(tmp_path):
    backend = MissingRootfsBackend(tmp_path / "no-such-rootfs")
    summary = await evaluate(
        "starter:0:1",
        "oracle",
        sandbox=backend,
        retries=2,
        retry_backoff_s=0.01,
        out_dir=tmp_path / "run",
    )
    assert backend.calls == 1 and summary["retried"] == 0
    assert summary["errors_by_class"] == {"SandboxSpecError": {"count": 1, "rate": 1.0}}
    (first,) = summary["first_errors"]
    assert first["error_class"] == "SandboxSpecError" and not first["infra_error"]
    assert "no-such-rootfs is not a directory" in first["error_message"]


async def test_retries_are_bounded(tmp_path):
    backend = FlakyBackend(failures=10)
    summary = await evaluate(
        "starter:0:1", "oracle", sandbox=backend, retries=1, retry_backoff_s=0.01, out_dir=tmp_path
    )
    assert summary["errors"] == 1 and summary["errors_by_class"]["SandboxError"]["count"] == 1
    assert backend.calls == 2 and len(read_episodes(tmp_path, final_only=False)) == 2


async def test_transient_llm_errors_are_retried_but_policy_bugs_and_failures_are_not(tmp_path):
    calls = {"n": 0}

    def flaky(request):
        calls["n"] += 1
        if calls["n"] == 1:
            raise openai.APIConnectionError(request=httpx2.Request("POST", "http://llm/v1"))
        return SUBMIT_ACTION

    summary = await evaluate(
        "starter:0:1", ScriptedPolicy(flaky), retry_backoff_s=0.01, out_dir=tmp_path / "llm"
    )
    assert summary["retried"] == 1 and summary["episodes"] == 1
    tries = read_episodes(tmp_path / "llm", final_only=False)
    assert tries[0]["error_class"] == "APIConnectionError" and tries[1]["status"] == "failed"
    assert tries[0]["status"] == "error" and tries[0]["end_reason"] == "exception"

    def buggy(request):
        raise ValueError("policy bug")

    summary = await evaluate(
        "starter:0:1", ScriptedPolicy(buggy), retry_backoff_s=0.01, out_dir=tmp_path / "bug"
    )
    assert summary["retried"] == 0 and summary["errors_by_class"] == {
        "ValueError": {"count": 1, "rate": 1.0}
    }
    summary = await evaluate("starter:0:1", "nop", out_dir=tmp_path / "nop")
    assert summary["retried"] == 0 and summary["statuses"] == {"failed": 1}
    assert not own_sandbox_processes()


def _priced(cost: float):
    def answer(request):
        action = SUBMIT_ACTION if request.metadata["turn"] >= 2 else bash_action("true")
        return LLMResponse(content=action, cost_usd=cost)

    return ScriptedPolicy(answer)


async def test_trial_cost_limit_ends_the_episode_as_an_error(tmp_path):
    summary = await evaluate("starter:0:1", _priced(0.3), max_trial_cost_usd=0.5, out_dir=tmp_path)
    (episode,) = read_episodes(tmp_path)
    assert episode["status"] == "error" and episode["error_class"] == "TrialCostExceeded"
    assert episode["cost_usd"] == pytest.approx(0.6) and episode["steps"] == 2
    assert summary["retried"] == 0 and summary["cost"]["total_usd"] == pytest.approx(0.6)


async def test_run_cost_limit_stops_scheduling(tmp_path):
    # each episode answers 3 times at $0.2: $0.6 an episode; the bar is passed by the second
    summary = await evaluate(
        "starter:0:4", _priced(0.2), concurrency=1, max_cost_usd=1.0, out_dir=tmp_path
    )
    assert summary["episodes"] == 2 and summary["planned"] == 4
    assert summary["cost"]["total_usd"] == pytest.approx(1.2)
    assert summary["cost"]["per_trial_usd"] == pytest.approx(0.6)
    assert "max_cost_usd reached" in summary["stop_reason"]
    assert "max_cost_usd reached" in read_run(tmp_path)["stop_reason"]


async def test_export_jsonl_and_parquet(tmp_path):
    await evaluate("starter:0:2", "oracle", out_dir=tmp_path)
    assert export(tmp_path, tmp_path / "e.jsonl", "jsonl") == 2
    lines = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert {r["status"] for r in lines} == {"passed"} and len(lines[0]["steps_detail"]) == 2
    pq = pytest.importorskip("pyarrow.parquet")
    assert export(tmp_path, tmp_path / "e.parquet", "parquet") == 2
    table = pq.read_table(tmp_path / "e.parquet").to_pylist()
    assert sorted(r["task_id"] for r in table) == sorted(r["task_id"] for r in lines)
    assert len(json.loads(table[0]["steps_detail"])) == 2
    with pytest.raises(ValueError, match="choose jsonl, parquet or atif"):
        export(tmp_path, tmp_path / "e.csv", "csv")
    with pytest.raises(FileNotFoundError, match="no results.db"):
        export(tmp_path / "nope", tmp_path / "x", "jsonl")


def test_store_is_plain_sqlite_in_wal_mode(tmp_path):
    import asyncio

    asyncio.run(evaluate("starter:0:1", "nop", out_dir=tmp_path))
    with sqlite3.connect(tmp_path / "results.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "episodes", "steps"} <= tables


async def test_a_row_committed_while_the_run_is_cancelled_still_reaches_on_episode(
    tmp_path, monkeypatch
):
    """Ctrl-C during an episode's write: the store keeps the row (the write is shielded), and
    the live view (progress, --scalars, --tensorboard) must count it too, or a resumed run's
    counts and the streams disagree with the store."""
    import asyncio
    import threading

    from palaestra.run.store import ResultStore

    writing, cancelled = threading.Event(), threading.Event()
    real_add = ResultStore._add_episode

    def slow_add(self, row):
        writing.set()
        cancelled.wait(30)  # the cancellation lands while the row is being committed
        return real_add(self, row)

    monkeypatch.setattr(ResultStore, "_add_episode", slow_add)
    seen = []
    run = asyncio.ensure_future(
        evaluate("starter:0:1", "oracle", out_dir=tmp_path, on_episode=seen.append)
    )
    assert await asyncio.to_thread(writing.wait, 60)
    run.cancel()
    await asyncio.sleep(0)  # the cancellation is delivered to the run
    cancelled.set()
    with pytest.raises(asyncio.CancelledError):
        await run
    stored = read_episodes(tmp_path, final_only=False)
    assert len(stored) == 1 and [r["task_id"] for r in seen] == [stored[0]["task_id"]]
    assert read_run(tmp_path)["stop_reason"] == "interrupted"


async def test_evaluate_rows_are_the_row_mapper_of_a_rollout(tmp_path):
    """evaluate = rollout + episode_row: a row it stores is the mapper's output for the same
    episode played again (same task and seed), the columns that name or time the try aside."""
    script = [bash_action("echo 41 > answer.txt"), "no code", SUBMIT_ACTION]
    await evaluate("starter:0:1", ScriptedPolicy(list(script)), out_dir=tmp_path, seed=5)
    (stored,) = read_episodes(tmp_path)
    tasks = load_tasks("starter:0:1")
    task = tasks.get(stored["task_id"])
    async with make("starter:0:1", tasks=tasks) as env:
        episode = await rollout(
            env, ScriptedPolicy(list(script)), seed=5, options={"task_id": task.id}
        )
    row = episode_row(episode, task, attempt=0, seed=5)
    varying = {"episode_id", "wall_s", "sandbox_start_s", "agent_s", "policy_s", "verifier_s"}
    expected = {k: v for k, v in row.values.items() if k not in varying}
    expected["rewards"] = json.loads(expected["rewards"])
    assert {k: stored[k] for k in expected} == expected
    assert stored["status"] == "failed" and stored["steps"] == 3
    (steps,) = read_steps(tmp_path).values()

    def untimed(execution):  # a command's duration differs between two runs
        return {k: v for k, v in (execution or {}).items() if not k.endswith("_s")}

    assert [
        (s["turn"], s["messages_from"], s["new_messages"], untimed(s["execution"])) for s in steps
    ] == [(s.turn, s.messages_from, s.new_messages, untimed(s.execution)) for s in row.steps]
