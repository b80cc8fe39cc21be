"""``evaluate``: run a policy over a task set, ``attempts`` times per task, resumably.

The plan is every (task, attempt) pair. Each episode is written to the run directory's
``results.db`` (see :mod:`palaestra.run.store`) as soon as it ends, and ``summary.json`` at the
end. Running again on the same directory with the same configuration skips the pairs already
done, so an interrupted run (Ctrl-C, kill -9, a crashed machine) resumes where it stopped.

Each try is :func:`~palaestra.run.rollout.rollout` on an executor (which turns any failure of
the episode into an error episode) and :func:`~palaestra.run.rows.episode_row` (the episode as
a store row). Tries follow :class:`~palaestra.run.retry.RetryPolicy`, as in ``RolloutStream``:
transient infrastructure errors (``EpisodeEnd.infra_error``: a sandbox that fails to start in
time or dies, a dropped connection, a transient LLM API error) are retried up to ``retries``
times with exponential backoff; every try is stored (``final = 0`` for the retried ones).
Deterministic errors are never retried, since they would fail the same way again: task failures,
verifier-decided outcomes, policy bugs, and a sandbox that cannot be made from the task's image
or spec (``SandboxSpecError``: no interpreter, an image that cannot be had, a failing build).

Task directories of the source that do not load are left out (``TaskSet.invalid``) and listed
in the summary and the stored run config as ``invalid_tasks``.
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
from typing import Any, Literal

from palaestra.env.code_env import CodeEnv
from palaestra.env.registry import load_tasks, make, make_policy, spec
from palaestra.env.tools.env import PROTOCOL as TOOL_PROTOCOL
from palaestra.llm import LLMClient
from palaestra.run import metrics
from palaestra.run.executor import EpisodeExecutor, LocalExecutor
from palaestra.run.ray_executor import RayExecutor, RayOptions
from palaestra.run.recorder import RunRecorder
from palaestra.run.retry import RetryPolicy
from palaestra.run.rollout import Episode
from palaestra.run.rows import episode_row
from palaestra.run.store import DB_NAME, EpisodeRow, read_episodes
from palaestra.sandbox.base import SandboxBackend
from palaestra.scaffolds import Scaffold
from palaestra.tasks.source import TaskSet

EpisodeRecord = dict[str, Any]


@dataclass(frozen=True)
class Job:
    task_id: str
    attempt: int
    index: int  # position in the plan: the episode's seed is ``seed + index``


def _policy_name(policy: str | LLMClient) -> str:
    return policy if isinstance(policy, str) else getattr(policy, "name", type(policy).__name__)


def _name(part: str | Scaffold | SandboxBackend) -> str:
    return part if isinstance(part, str) else part.name


def _executor(
    env_id: str,
    policy: str | LLMClient,
    tasks: TaskSet,
    executor: Literal["local", "ray"] | RayOptions,
    concurrency: int,
    env_overrides: dict[str, Any],
    artifacts_dir: Path | None = None,
) -> EpisodeExecutor:
    """Where the episodes run: in this process (a task environment keeping its episodes'
    artifacts in ``artifacts_dir``), or on a Ray cluster's actors."""
    if executor == "local":
        agent = make_policy(policy, tasks) if isinstance(policy, str) else policy

        def build() -> Any:
            env = make(env_id, tasks=tasks, **env_overrides)
            if isinstance(env, CodeEnv):
                env.artifacts_dir = artifacts_dir
            return env

        return LocalExecutor(build, agent)
    if executor == "ray":
        executor = RayOptions()
    if not isinstance(executor, RayOptions):
        raise ValueError(f"executor={executor!r}: choose 'local', 'ray' or a RayOptions")
    return RayExecutor(
        env_id, policy, executor, concurrency=concurrency, env_overrides=env_overrides
    )


def run_identity(
    env_id: str,
    policy: str | LLMClient,
    tasks: TaskSet,
    *,
    attempts: int,
    seed: int,
    scaffold: str | Scaffold = "bash",
    sandbox: str | SandboxBackend = "local",
    env_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a run's results depend on: a stored run resumes only with the same identity
    (:func:`~palaestra.run.store.check_resumable` checks it before a run starts)."""
    tool_env = spec(env_id).factory is not None  # a ToolEnv: no scaffold, no sandbox
    return {
        "env_id": env_id,
        "policy": _policy_name(policy),
        "scaffold": TOOL_PROTOCOL if tool_env else _name(scaffold),
        "sandbox": "none" if tool_env else _name(sandbox),
        "attempts": attempts,
        "seed": seed,
        "tasks": tasks.ids,  # listed, not loaded
        "env_overrides": {k: repr(v) for k, v in sorted((env_overrides or {}).items())},
    }


async def evaluate(
    env_id: str,
    policy: str | LLMClient,
    *,
    attempts: int = 1,
    concurrency: int = 8,
    out_dir: Path | str | None = None,
    seed: int = 0,
    retries: int | RetryPolicy = 2,
    retry_backoff_s: float | None = None,
    max_cost_usd: float | None = None,
    max_trial_cost_usd: float | None = None,
    overwrite: bool = False,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
    tasks: TaskSet | None = None,
    scaffold: str | Scaffold = "bash",
    sandbox: str | SandboxBackend = "local",
    executor: Literal["local", "ray"] | RayOptions = "local",
    **env_overrides: Any,
) -> dict[str, Any]:
    """Evaluate ``policy`` on every task ``env_id`` selects, ``attempts`` times each.

    Returns the summary (:func:`palaestra.run.metrics.summarize` plus run facts). With
    ``out_dir`` the results go to ``out_dir/results.db`` and ``out_dir/summary.json``, and a
    second call resumes (a run configured differently raises
    :class:`~palaestra.run.store.RunMismatchError` unless ``overwrite``); without it they go
    to a temporary directory removed afterwards.

    ``on_episode`` is called with every stored try (``final`` says whether it counts).
    ``retries``: how many more tries an infrastructure error gets, ``retry_backoff_s`` apart
    (doubling; 1 s when None), or a :class:`~palaestra.run.retry.RetryPolicy`.
    ``max_cost_usd`` stops scheduling episodes once the run's cost passes it (in-flight ones
    finish); ``max_trial_cost_usd`` ends an episode as an error once its cost passes it.

    With ``out_dir``, an episode's collected artifacts are kept in
    ``out_dir/episodes/<episode-id>/`` (in-process executor; :mod:`palaestra.env.collect`).

    ``executor="ray"`` (or :class:`~palaestra.run.ray_executor.RayOptions`) runs the episodes
    on a Ray cluster's actors (see :mod:`palaestra.run.ray_executor`); this process keeps the
    store. ``policy`` and ``sandbox`` then travel to the actors by name, ``scaffold`` by name or
    pickled.
    """
    if attempts < 1 or concurrency < 1:
        raise ValueError("attempts and concurrency must be at least 1")
    retry = RetryPolicy.of(retries, retry_backoff_s)
    tasks = tasks if tasks is not None else load_tasks(env_id)
    keep = Path(out_dir) / "episodes" if out_dir is not None else None
    runner = _executor(
        env_id,
        policy,
        tasks,
        executor,
        concurrency,
        {"scaffold": scaffold, "sandbox": sandbox, **env_overrides},
        keep,
    )
    temp = out_dir is None
    if out_dir is None:
        out_dir = await asyncio.to_thread(tempfile.mkdtemp, prefix="palaestra-eval-")
    out = Path(out_dir)
    if overwrite:
        for suffix in ("", "-wal", "-shm"):
            await asyncio.to_thread((out / (DB_NAME + suffix)).unlink, missing_ok=True)
    invalid = [{"task": d.name, "error": str(e)} for d, e in tasks.invalid]
    identity = run_identity(
        env_id,
        policy,
        tasks,
        attempts=attempts,
        seed=seed,
        scaffold=scaffold,
        sandbox=sandbox,
        env_overrides=env_overrides,
    )
    stop_reason: str | None = None
    started = time.perf_counter()
    spent = 0.0
    retried = 0

    def stored(row: EpisodeRow) -> None:  # a try's row is committed
        nonlocal spent
        spent += row.values.get("cost_usd") or 0.0
        if on_episode is not None:
            on_episode(row.values)

    recorder: RunRecorder | None = None
    try:
        recorder = await RunRecorder.open(
            out,
            uuid.uuid4().hex[:12],
            identity,
            {
                "invalid_tasks": invalid,
                "concurrency": concurrency,
                "retries": retry.retries,
                "max_cost_usd": max_cost_usd,
                "max_trial_cost_usd": max_trial_cost_usd,
            },
            on_stored=stored,
        )
        done = await recorder.store.done_jobs()
        n = len(tasks)
        plan = [Job(t.id, a, a * n + i) for a in range(attempts) for i, t in enumerate(tasks)]
        todo = [job for job in plan if (job.task_id, job.attempt) not in done]
        if isinstance(runner, RayExecutor) and todo:  # a finished run leaves the cluster be
            await runner.start()
        spent = await recorder.store.total_cost()
        queue: asyncio.Queue[Job] = asyncio.Queue()
        for job in todo:
            queue.put_nowait(job)

        def over_budget() -> bool:
            return max_cost_usd is not None and spent > max_cost_usd

        async def record(job: Job, episode: Episode, attempt_try: int, final: bool) -> None:
            nonlocal retried
            row = episode_row(
                episode,
                tasks.get(job.task_id),
                attempt=job.attempt,
                seed=seed + job.index,
                try_index=attempt_try,
                final=final,
            )
            assert recorder is not None
            await recorder.write(row)
            retried += not final

        async def worker() -> None:
            nonlocal stop_reason
            while not queue.empty() and stop_reason is None:
                if over_budget():
                    stop_reason = f"max_cost_usd reached: ${spent:.4f} > ${max_cost_usd:g}"
                    return
                job = queue.get_nowait()
                play = functools.partial(
                    runner.run, seed + job.index, {"task_id": job.task_id}, max_trial_cost_usd
                )
                await retry.run(play, functools.partial(record, job))

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
            "executor": "local" if isinstance(runner, LocalExecutor) else "ray",
            "lost": getattr(runner, "lost", 0),
            "out_dir": None if temp else str(out),
            "planned": len(plan),
            "resumed": recorder.resumed,
            "skipped": len(plan) - len(todo),
            "retried": retried,
            "stop_reason": stop_reason,
            "invalid_tasks": invalid,
            **metrics.summarize(records),
            "run_wall_s": wall_s,
            "episodes_per_s": ran / wall_s if wall_s > 0 else 0.0,
        }
        if not temp:
            text = json.dumps(summary, indent=2)
            await asyncio.to_thread((out / "summary.json").write_text, text)
        return summary
    finally:
        try:
            if recorder is not None:  # cancelled mid-write: the rows land, and are counted
                await recorder.drain()
            await runner.aclose()
        finally:
            if recorder is not None:
                await recorder.aclose(stop_reason)
        if temp:
            await asyncio.to_thread(shutil.rmtree, out, ignore_errors=True)
