"""``evaluate``: run a policy over a task set, ``attempts`` times per task, resumably.

The plan is every (task, attempt) pair. Each episode is written to the run directory's
``results.db`` (see :mod:`palaestra.run.store`) as soon as it ends, and ``summary.json`` at the
end. Running again on the same directory with the same configuration skips the pairs already
done, so an interrupted run (Ctrl-C, kill -9, a crashed machine) resumes where it stopped.

Infrastructure errors (a sandbox that fails to start or dies, a transient LLM API error) are
retried up to ``retries`` times with exponential backoff; every try is stored (``final = 0`` for
the retried ones). Task failures, verifier-decided outcomes and policy bugs are never retried.
"""

from __future__ import annotations

import asyncio
import functools
import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palaestra.env.registry import load_tasks, make, make_policy
from palaestra.env.types import EpisodeStatus
from palaestra.llm import LLMClient
from palaestra.run import metrics
from palaestra.run.rollout import Turn
from palaestra.run.store import DB_NAME, EpisodeRow, ResultStore, StepRecord, read_episodes
from palaestra.sandbox.base import SandboxBackend, SandboxError
from palaestra.scaffolds import Scaffold
from palaestra.scaffolds.base import EndReason
from palaestra.tasks import Task
from palaestra.tasks.source import TaskSet

EpisodeRecord = dict[str, Any]

#: Exception class names of transient infrastructure failures, matched against the exception
#: raised out of an episode and against CodeEnv's ``info["error_class"]`` (``SandboxError``):
#: the scaffold reports its sandbox dying that way.
INFRA_ERRORS = frozenset(
    {
        "SandboxError", "SandboxClosedError", "ConnectionError", "ConnectionResetError",
        "ConnectionRefusedError", "BrokenPipeError", "TimeoutError", "APIConnectionError",
        "APITimeoutError", "RateLimitError", "InternalServerError",
    }
)  # fmt: skip


class TrialCostExceeded(RuntimeError):
    """An episode's accumulated policy cost passed ``max_trial_cost_usd``."""


@dataclass(frozen=True)
class Job:
    task_id: str
    attempt: int
    index: int  # position in the plan: the episode's seed is ``seed + index``


def is_infra_error(exc: BaseException) -> bool:
    if isinstance(exc, SandboxError | ConnectionError | TimeoutError):
        return True
    return any(cls.__name__ in INFRA_ERRORS for cls in type(exc).__mro__)


def _steps(turns: list[Turn], trajectory: list[dict[str, Any]]) -> list[StepRecord]:
    executions = {t.get("turn"): t for t in trajectory}
    steps: list[StepRecord] = []
    previous: list[dict[str, Any]] = []
    for i, turn in enumerate(turns):
        messages = turn.observation.messages
        start = len(previous) if messages[: len(previous)] == previous else 0
        response = turn.action.model_dump(exclude_none=True, exclude_defaults=True)
        response["finish_reason"] = turn.action.finish_reason
        steps.append(StepRecord(i, start, messages[start:], response, executions.get(i)))
        previous = messages
    return steps


async def _run_episode(
    env: Any, policy: LLMClient, task: Task, job: Job, seed: int, max_trial_cost: float | None
) -> EpisodeRow:
    """One try of a job, as a store row; exceptions out of the episode become error rows."""
    values: dict[str, Any] = {
        "task_id": task.id, "family": task.config.metadata.get("family"),
        "category": task.category, "difficulty": task.difficulty, "attempt": job.attempt,
        "seed": seed, "reward": 0.0, "rewards": "{}", "verified": 0, "steps": 0,
        "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0, "infra_error": 0,
    }  # fmt: skip
    turns: list[Turn] = []
    cost = 0.0
    started = time.perf_counter()
    try:
        ts = await env.reset(seed=seed, options={"task_id": task.id})
        while not ts.last():
            action = await policy.complete(ts.observation)
            turns.append(Turn(ts.observation, action))
            cost += action.cost_usd or 0.0
            if max_trial_cost is not None and cost > max_trial_cost:
                raise TrialCostExceeded(
                    f"the episode cost ${cost:.4f}, over --max-trial-cost-usd ${max_trial_cost:g}"
                )
            ts = await env.step(action)
    except Exception as e:  # the episode did not reach LAST: infrastructure, policy, cost cap
        usage = [t.action.usage for t in turns]
        costs = [t.action.cost_usd for t in turns if t.action.cost_usd is not None]
        values.update(
            episode_id=env.episode_id, status=EpisodeStatus.ERROR,
            end_reason=EndReason.EXCEPTION, error_class=type(e).__name__, error_message=str(e),
            infra_error=int(is_infra_error(e)), steps=len(turns),
            prompt_tokens=sum(u.prompt_tokens for u in usage),
            completion_tokens=sum(u.completion_tokens for u in usage),
            cached_tokens=sum(u.cached_tokens for u in usage),
            cost_usd=sum(costs) if costs else None, wall_s=time.perf_counter() - started,
        )  # fmt: skip
        return EpisodeRow(values, _steps(turns, []))
    info = ts.info
    timings = info["timings"]
    values.update(
        episode_id=info["episode_id"], status=info["status"], end_reason=info["end_reason"],
        error_class=info["error_class"], error_message=info["error_message"],
        infra_error=int(info["error_class"] in INFRA_ERRORS), reward=ts.reward or 0.0,
        rewards=json.dumps(info["rewards"]), verified=int(info["verified"]),
        verifier_output=(info["verifier"] or {}).get("output", ""), steps=info["step"],
        sandbox_start_s=timings.get("sandbox_start_s"), agent_s=timings.get("agent_s"),
        policy_s=timings.get("policy_s"), verifier_s=timings.get("verifier_s"),
        prompt_tokens=info["usage"]["prompt_tokens"],
        completion_tokens=info["usage"]["completion_tokens"],
        cached_tokens=info["usage"]["cached_tokens"], cost_usd=info["cost_usd"],
        wall_s=time.perf_counter() - started,
    )  # fmt: skip
    return EpisodeRow(values, _steps(turns, info["trajectory"]))


def _policy_name(policy: str | LLMClient) -> str:
    return policy if isinstance(policy, str) else getattr(policy, "name", type(policy).__name__)


def _name(part: str | Scaffold | SandboxBackend) -> str:
    return part if isinstance(part, str) else part.name


async def evaluate(
    env_id: str,
    policy: str | LLMClient,
    *,
    attempts: int = 1,
    concurrency: int = 8,
    out_dir: Path | str | None = None,
    seed: int = 0,
    retries: int = 2,
    retry_backoff_s: float = 1.0,
    max_cost_usd: float | None = None,
    max_trial_cost_usd: float | None = None,
    overwrite: bool = False,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
    tasks: TaskSet | None = None,
    scaffold: str | Scaffold = "bash",
    sandbox: str | SandboxBackend = "local",
    **env_overrides: Any,
) -> dict[str, Any]:
    """Evaluate ``policy`` on every task ``env_id`` selects, ``attempts`` times each.

    Returns the summary (:func:`palaestra.run.metrics.summarize` plus run facts). With
    ``out_dir`` the results go to ``out_dir/results.db`` and ``out_dir/summary.json``, and a
    second call resumes (a run configured differently raises
    :class:`~palaestra.run.store.RunMismatchError` unless ``overwrite``); without it they go
    to a temporary directory removed afterwards.

    ``on_episode`` is called with every stored try (``final`` says whether it counts).
    ``max_cost_usd`` stops scheduling episodes once the run's cost passes it (in-flight ones
    finish); ``max_trial_cost_usd`` ends an episode as an error once its cost passes it.
    """
    if attempts < 1 or concurrency < 1 or retries < 0:
        raise ValueError("attempts and concurrency must be at least 1, retries at least 0")
    tasks = tasks if tasks is not None else load_tasks(env_id)
    agent = make_policy(policy, tasks) if isinstance(policy, str) else policy
    temp = out_dir is None
    if out_dir is None:
        out_dir = await asyncio.to_thread(tempfile.mkdtemp, prefix="palaestra-eval-")
    out = Path(out_dir)
    if overwrite:
        for suffix in ("", "-wal", "-shm"):
            await asyncio.to_thread((out / (DB_NAME + suffix)).unlink, missing_ok=True)
    identity = {
        "env_id": env_id, "policy": _policy_name(policy), "scaffold": _name(scaffold),
        "sandbox": _name(sandbox), "attempts": attempts, "seed": seed,
        "tasks": [t.id for t in tasks],
        "env_overrides": {k: repr(v) for k, v in sorted(env_overrides.items())},
    }  # fmt: skip
    store = await ResultStore.open(out)
    stop_reason: str | None = None
    started = time.perf_counter()
    writes: set[asyncio.Future[int]] = set()  # episode rows being written
    try:
        resumed = await store.begin_run(
            uuid.uuid4().hex[:12],
            identity=identity,
            config={
                "concurrency": concurrency,
                "retries": retries,
                "max_cost_usd": max_cost_usd,
                "max_trial_cost_usd": max_trial_cost_usd,
            },  # fmt: skip
        )
        run_id = await store.run_id()
        done = await store.done_jobs()
        n = len(tasks)
        plan = [Job(t.id, a, a * n + i) for a in range(attempts) for i, t in enumerate(tasks)]
        todo = [job for job in plan if (job.task_id, job.attempt) not in done]
        spent = await store.total_cost()
        queue: asyncio.Queue[Job] = asyncio.Queue()
        for job in todo:
            queue.put_nowait(job)
        retried = 0

        def over_budget() -> bool:
            return max_cost_usd is not None and spent > max_cost_usd

        def stored(row: EpisodeRow, write: asyncio.Future[int]) -> None:
            nonlocal spent
            writes.discard(write)
            if write.cancelled() or write.exception() is not None:
                return
            spent += row.values.get("cost_usd") or 0.0
            if on_episode is not None:
                on_episode(row.values)

        async def store_try(row: EpisodeRow, final: bool, attempt_try: int) -> None:
            row.values.update(final=int(final), run_id=run_id,
                              finished_at=time.time(), **{"try": attempt_try})  # fmt: skip
            # A write goes on when its caller is cancelled (Ctrl-C), so what follows a stored
            # row (cost, on_episode) hangs on the write, not on this coroutine; it runs before
            # this coroutine resumes.
            write = asyncio.ensure_future(store.add_episode(row))
            writes.add(write)
            write.add_done_callback(functools.partial(stored, row))
            await asyncio.shield(write)

        async def worker() -> None:
            nonlocal retried, stop_reason
            async with make(env_id, tasks=tasks, scaffold=scaffold, sandbox=sandbox,
                            **env_overrides) as env:  # fmt: skip
                while not queue.empty() and stop_reason is None:
                    if over_budget():
                        stop_reason = f"max_cost_usd reached: ${spent:.4f} > ${max_cost_usd:g}"
                        return
                    job = queue.get_nowait()
                    task = tasks.get(job.task_id)
                    for attempt_try in range(retries + 1):
                        row = await _run_episode(
                            env, agent, task, job, seed + job.index, max_trial_cost_usd
                        )
                        final = not row.values["infra_error"] or attempt_try == retries
                        await store_try(row, final, attempt_try)
                        if final:
                            break
                        retried += 1
                        await asyncio.sleep(retry_backoff_s * 2**attempt_try)

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(concurrency, len(todo))):
                    group.create_task(worker())
        except asyncio.CancelledError:
            stop_reason = "interrupted"
            raise
        if stop_reason is None and over_budget() and not queue.empty():
            stop_reason = f"max_cost_usd reached: ${spent:.4f} > ${max_cost_usd:g}"
        records = await asyncio.to_thread(read_episodes, out)
        wall_s = time.perf_counter() - started
        ran = sum(1 for r in records if (r["task_id"], r["attempt"]) not in done)
        summary = {
            "env_id": env_id,
            "policy": identity["policy"],
            "scaffold": identity["scaffold"],
            "sandbox": identity["sandbox"],
            "attempts": attempts,
            "concurrency": concurrency,
            "out_dir": None if temp else str(out),
            "planned": len(plan),
            "resumed": resumed,
            "skipped": len(plan) - len(todo),
            "retried": retried,
            "stop_reason": stop_reason,
            **metrics.summarize(records),
            "run_wall_s": wall_s,
            "episodes_per_s": ran / wall_s if wall_s > 0 else 0.0,
        }
        if not temp:
            text = json.dumps(summary, indent=2)
            await asyncio.to_thread((out / "summary.json").write_text, text)
        return summary
    finally:
        if writes:  # cancelled mid-write: the rows land, and are counted, before the run ends
            await asyncio.wait(writes)
        await store.finish_run(time.time(), stop_reason)
        await store.aclose()
        if temp:
            await asyncio.to_thread(shutil.rmtree, out, ignore_errors=True)
