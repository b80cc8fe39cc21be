"""``check_task``: does a task's verifier tell right from wrong?

Each *scenario* gets a fresh sandbox of the task's own spec: ``oracle`` runs ``solution/solve.sh``,
``nop`` changes nothing, ``wrong:<name>`` runs ``wrong_solutions/<name>/solve.sh`` (generated
tasks ship at least three). Then the Harbor verifier runs exactly as in an episode. A task that
needs an episode's machinery (multi-step, a separate verifier, a healthcheck, an ``[agent]
user``) is checked as an episode, the scenario's solution run by the oracle policy. A task is
sound when the oracle gets reward 1.0 and every other scenario 0.0, with no verifier errors;
a task whose verifier gives partial credit (``partial_credit = true`` in its ``[metadata]``)
needs a wrong solution to score below 1 (doing nothing still 0).
This is what ``palaestra tasks check`` runs, and what the generator tests run on their sample.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from palaestra.env.code_env import CodeEnv
from palaestra.env.end import EpisodeEnd
from palaestra.env.sandbox_spec import prepare_sandbox_spec
from palaestra.run.rollout import rollout
from palaestra.sandbox import SandboxBackend, make_backend
from palaestra.scaffolds import NopPolicy, OraclePolicy
from palaestra.tasks import Task
from palaestra.tasks.paths import SOLUTION_DIR
from palaestra.verify.harbor import HarborVerifier, VerifierResult
from palaestra.verify.protocol import Verifier


@dataclass(frozen=True)
class ScenarioResult:
    task_id: str
    scenario: str
    expected: float
    reward: float | None
    rewards: dict[str, float]
    status: Literal["ok", "error"]
    detail: str
    duration_s: float
    #: The verifier is palaestra_check-based (generated tasks): a 0 only counts when its checks
    #: actually ran, so a checker that crashes cannot pass a wrong solution off as rejected.
    needs_checks: bool = False
    #: Seconds the verifier took (None when it did not run).
    verify_s: float | None = None
    #: A wrong solution of a partial-credit task: any reward below 1 rejects it.
    below_one: bool = False

    @property
    def ok(self) -> bool:
        ran = not self.needs_checks or self.rewards.get("checks_total", 0) > 0
        if self.status != "ok" or self.reward is None or not ran:
            return False
        return self.reward < 1 if self.below_one else self.reward == self.expected

    @property
    def expectation(self) -> str:
        """What the scenario must score, as shown: ``1``, ``0`` or ``<1``."""
        return "<1" if self.below_one else f"{self.expected:g}"


def partial_credit(task: Task) -> bool:
    """Whether the task's verifier rewards a fraction of its checks (``partial_credit = true``
    in ``[metadata]``): its wrong solutions must score below 1, not 0."""
    return task.config.metadata.get("partial_credit") is True


def wrong_solutions(task: Task) -> list[str]:
    root = task.path / "wrong_solutions"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "solve.sh").is_file())


def scenarios(task: Task) -> list[str]:
    found = ["nop", *(f"wrong:{name}" for name in wrong_solutions(task))]
    return (["oracle"] if task.solve_script is not None else []) + found


async def run_scenario(
    task: Task, scenario: str, backend: SandboxBackend, verifier: Verifier | None = None
) -> ScenarioResult:
    """Apply one scenario's solution in a fresh sandbox, then verify."""
    started = time.perf_counter()
    expected = 1.0 if scenario == "oracle" else 0.0
    if scenario == "oracle":
        solution: Path | None = task.solution_dir
    elif scenario == "nop":
        solution = None
    elif scenario.startswith("wrong:"):
        solution = task.path / "wrong_solutions" / scenario.removeprefix("wrong:")
    else:
        raise ValueError(f"unknown scenario {scenario!r}: use oracle, nop or wrong:<name>")

    def result(
        reward: float | None,
        rewards: dict[str, float],
        status: str,
        detail: str,
        verify_s: float | None = None,
    ) -> ScenarioResult:
        return ScenarioResult(
            task.id,
            scenario,
            expected,
            reward,
            rewards,
            status,  # type: ignore[arg-type]
            detail,
            time.perf_counter() - started,
            (task.tests_dir / "palaestra_check.py").is_file(),
            verify_s,
            scenario.startswith("wrong:") and partial_credit(task),
        )

    if task.steps or task.verifier_environment or task.healthcheck or task.agent_user is not None:
        end = await _as_episode(task, solution, backend, verifier)
        verdict = end.verifier
        if verdict is None:
            return result(None, {}, "error", f"{end.error_class}: {end.error_message}")
    else:
        verdict = await _in_one_sandbox(task, solution, backend, verifier, result)
        if isinstance(verdict, ScenarioResult):
            return verdict
    if not verdict.ok:
        return result(
            None,
            verdict.rewards,
            "error",
            f"{verdict.error}\n{verdict.output[-2000:]}",
            verdict.duration_s,
        )
    return result(verdict.reward, verdict.rewards, "ok", verdict.output[-2000:], verdict.duration_s)


async def _as_episode(
    task: Task, solution: Path | None, backend: SandboxBackend, verifier: Verifier | None
) -> EpisodeEnd:
    """A task that needs an episode's machinery (steps, a separate verifier, a healthcheck, an
    agent user: docs/harbor.md) is checked as an episode whose policy runs the solution (each
    step its own, for the oracle) and submits."""
    if solution is None:
        policy: OraclePolicy | NopPolicy = NopPolicy()
    elif solution == task.solution_dir:
        policy = OraclePolicy.from_tasks([task])
    else:
        policy = OraclePolicy({t.id: solution for t in (task, *task.steps)})
    async with CodeEnv([task], sandbox=backend, verifier=verifier) as env:
        return (await rollout(env, policy)).end


async def _in_one_sandbox(
    task: Task,
    solution: Path | None,
    backend: SandboxBackend,
    verifier: Verifier | None,
    result: Callable[..., ScenarioResult],
) -> VerifierResult | ScenarioResult:
    """The solution applied, then the verifier run, in one sandbox of the task's spec (built
    as an episode's is: an image's root filesystem where the task needs one)."""
    spec = await prepare_sandbox_spec(task, backend.name)
    sandbox = await backend.create(spec)
    try:
        if solution is not None:
            await sandbox.upload(solution, SOLUTION_DIR)
            applied = await sandbox.exec(
                f"chmod +x {SOLUTION_DIR}/solve.sh && {SOLUTION_DIR}/solve.sh",
                timeout=min(task.agent_timeout_sec, 600.0),
            )
            if not applied.ok:
                # a solution (right or deliberately wrong) that does not apply proves nothing
                return result(
                    None,
                    {},
                    "error",
                    f"solve.sh failed ({applied.exit_code}): "
                    f"{(applied.stdout + applied.stderr)[-2000:]}",
                )
            await sandbox.exec(f"rm -rf {SOLUTION_DIR}", timeout=30)
        return await (verifier or HarborVerifier()).verify(
            task, sandbox, timeout=task.verifier_timeout_sec
        )
    finally:
        await sandbox.close()


def planned(tasks: list[Task], only: list[str] | None = None) -> list[tuple[Task, str]]:
    """The (task, scenario) pairs :func:`check_tasks` runs, in its order."""
    return [
        (task, s)
        for task in tasks
        for s in scenarios(task)
        if only is None or s in only or (s.startswith("wrong:") and "wrong" in only)
    ]


async def check_tasks(
    tasks: list[Task],
    *,
    backend: SandboxBackend | None = None,
    concurrency: int = 4,
    only: list[str] | None = None,
    on_result: Callable[[ScenarioResult], None] | None = None,
) -> list[ScenarioResult]:
    """Every scenario of every task (or the ``only`` ones), ``concurrency`` at a time;
    ``on_result`` is called with each result as it comes (a progress display)."""
    owned = backend is None
    backend = backend or make_backend("local")
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task, scenario: str) -> ScenarioResult:
        async with gate:
            result = await run_scenario(task, scenario, backend)
        if on_result is not None:
            on_result(result)
        return result

    jobs = [asyncio.ensure_future(one(task, s)) for task, s in planned(tasks, only)]
    try:
        return list(await asyncio.gather(*jobs))
    finally:
        # One failed (or the caller was cancelled): the others stop too, and their sandboxes
        # are closed before this returns, never left running behind the caller's back.
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        if owned:
            await backend.aclose()
