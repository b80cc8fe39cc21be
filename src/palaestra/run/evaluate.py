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
    prepare_ahead: bool = False,
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

    ``prepare_ahead``: each of the ``concurrency`` workers starts its next episode (sandbox,
    set-up, the scaffold up to its first request: a harness CLI's start-up) while its current
    one runs (:mod:`palaestra.env.ahead`; in-process executor only). It shortens each
    episode's wall time, not the machine's CPU per episode; one sandbox more per worker.
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
    out = await _run_dir(out_dir, overwrite)
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
    invalid = [{"task": d.name, "error": str(e)} for d, e in tasks.invalid]
    config = {
        "invalid_tasks": invalid,
        "concurrency": concurrency,
        "prepare_ahead": prepare_ahead,
        "retries": retry.retries,
        "max_cost_usd": max_cost_usd,
        "max_trial_cost_usd": max_trial_cost_usd,
    }
    progress = _Progress(max_cost_usd, on_episode)
    started = time.perf_counter()
    recorder: RunRecorder | None = None
    try:
        recorder = await RunRecorder.open(
            out, uuid.uuid4().hex[:12], identity, config, on_stored=progress.stored
        )
        done = await recorder.store.done_jobs()
        plan = _plan_jobs(tasks, attempts)
        todo = [job for job in plan if (job.task_id, job.attempt) not in done]
        if isinstance(runner, RayExecutor) and todo:  # a finished run leaves the cluster be
            await runner.start()
        progress.spent = await recorder.store.total_cost()
        jobs = _Jobs(
            tasks, seed, runner, retry, recorder, progress, max_trial_cost_usd, prepare_ahead
        )
        await jobs.run(todo, concurrency)
        records = await asyncio.to_thread(read_episodes, out)
        summary = {
            "env_id": env_id,
            **{k: identity[k] for k in ("policy", "scaffold", "sandbox")},
            "attempts": attempts,
            "concurrency": concurrency,
            "executor": "local" if isinstance(runner, LocalExecutor) else "ray",
            "lost": getattr(runner, "lost", 0),
            "out_dir": None if temp else str(out),
            **_summarize(records, plan, done, recorder.resumed, progress, invalid, started),
        }
        if not temp:
            text = json.dumps(summary, indent=2)
            await asyncio.to_thread((out / "summary.json").write_text, text)
        return summary
    finally:
        await _close(recorder, runner, progress.stop_reason, out if temp else None)


def _plan_jobs(tasks: TaskSet, attempts: int) -> list[Job]:
    """The plan: every (task, attempt) pair, attempt by attempt."""
    n = len(tasks)
    return [Job(t.id, a, a * n + i) for a in range(attempts) for i, t in enumerate(tasks)]


async def _run_dir(out_dir: Path | str | None, overwrite: bool) -> Path:
    """The run directory: ``out_dir`` (its store removed when ``overwrite``), or a new
    temporary one."""
    if out_dir is None:
        return Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="palaestra-eval-"))
    out = Path(out_dir)
    if overwrite:
        for suffix in ("", "-wal", "-shm"):
            await asyncio.to_thread((out / (DB_NAME + suffix)).unlink, missing_ok=True)
    return out


@dataclass
class _Progress:
    """What a run counts as its tries are stored: the cost so far against ``max_cost_usd``,
    the retried tries, and why it stopped early (None: it did not)."""

    max_cost_usd: float | None
    on_episode: Callable[[EpisodeRecord], None] | None
    spent: float = 0.0
    retried: int = 0
    stop_reason: str | None = None

    def stored(self, row: EpisodeRow) -> None:
        """A try's row is committed."""
        self.spent += row.values.get("cost_usd") or 0.0
        if self.on_episode is not None:
            self.on_episode(row.values)

    def over_budget(self) -> bool:
        return self.max_cost_usd is not None and self.spent > self.max_cost_usd

    def budget_reason(self) -> str:
        return f"max_cost_usd reached: ${self.spent:.4f} > ${self.max_cost_usd:g}"


@dataclass
class _Jobs:
    """Runs the jobs to do: ``concurrency`` workers take them in order, each job's tries run by
    the retry policy and every try recorded, until the jobs or the budget run out."""

    tasks: TaskSet
    seed: int
    runner: EpisodeExecutor
    retry: RetryPolicy
    recorder: RunRecorder
    progress: _Progress
    max_trial_cost_usd: float | None
    prepare_ahead: bool = False

    async def run(self, todo: list[Job], concurrency: int) -> None:
        queue: asyncio.Queue[Job] = asyncio.Queue()
        for job in todo:
            queue.put_nowait(job)
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(concurrency, len(todo))):
                    group.create_task(self._worker(queue))
        except asyncio.CancelledError:
            self.progress.stop_reason = "interrupted"
            raise
        if self.progress.stop_reason is None and self.progress.over_budget() and not queue.empty():
            self.progress.stop_reason = self.progress.budget_reason()

    async def _worker(self, queue: asyncio.Queue[Job]) -> None:
        """Jobs in order; with ``prepare_ahead`` the worker holds its next job as well, which
        its environment starts while the current one runs (a job held when the run stops
        early is not stored, so a resumed run plays it)."""
        held: Job | None = None
        while (held or not queue.empty()) and self.progress.stop_reason is None:
            if self.progress.over_budget():
                self.progress.stop_reason = self.progress.budget_reason()
                return
            job, held = held or queue.get_nowait(), None
            if self.prepare_ahead and not queue.empty():
                held = queue.get_nowait()
            play = functools.partial(
                self.runner.run,
                **self._reset(job),
                max_cost_usd=self.max_trial_cost_usd,
                prepare_next=None if held is None else self._reset(held),
            )
            await self.retry.run(play, functools.partial(self._record, job))

    def _reset(self, job: Job) -> dict[str, Any]:
        """The reset arguments of ``job``'s episode."""
        return {"seed": self.seed + job.index, "options": {"task_id": job.task_id}}

    async def _record(self, job: Job, episode: Episode, attempt_try: int, final: bool) -> None:
        row = episode_row(
            episode,
            self.tasks.get(job.task_id),
            attempt=job.attempt,
            seed=self.seed + job.index,
            try_index=attempt_try,
            final=final,
        )
        await self.recorder.write(row)
        self.progress.retried += not final


def _summarize(
    records: list[EpisodeRecord],
    plan: list[Job],
    done: dict[tuple[str, int], int],
    resumed: bool,
    progress: _Progress,
    invalid: list[dict[str, str]],
    started: float,
) -> dict[str, Any]:
    """What the run did (planned, resumed, skipped, retried, why it stopped), the metrics of
    its stored episodes (:func:`palaestra.run.metrics.summarize`) and its speed."""
    wall_s = time.perf_counter() - started
    ran = sum(1 for r in records if (r["task_id"], r["attempt"]) not in done)
    return {
        "planned": len(plan),
        "resumed": resumed,
        "skipped": sum(1 for job in plan if (job.task_id, job.attempt) in done),
        "retried": progress.retried,
        "stop_reason": progress.stop_reason,
        "invalid_tasks": invalid,
        **metrics.summarize(records),
        "run_wall_s": wall_s,
        "episodes_per_s": ran / wall_s if wall_s > 0 else 0.0,
    }


async def _close(
    recorder: RunRecorder | None,
    runner: EpisodeExecutor,
    stop_reason: str | None,
    temp: Path | None,
) -> None:
    """End the run however it ended: the writes in flight land (a cancelled run's too, and are
    counted), the executor closes, the run's end is stored, a temporary directory goes."""
    try:
        if recorder is not None:
            await recorder.drain()
        await runner.aclose()
    finally:
        if recorder is not None:
            await recorder.aclose(stop_reason)
    if temp is not None:
        await asyncio.to_thread(shutil.rmtree, temp, ignore_errors=True)
