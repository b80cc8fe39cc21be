"""Multi-step Harbor tasks (``[[steps]]``): one sandbox, one agent run and one verification per step.

Harbor 0.26's ``MultiStepTrial``, as one episode of :class:`~palaestra.env.code_env.CodeEnv`:

* the steps run in order in the same sandbox; before each, the step's ``steps/<name>/workdir/``
  is copied into the working directory and its ``setup.sh`` there, if any, is run (as the
  step's agent user), then the step's ``healthcheck``, if any (the task's own
  ``[environment.healthcheck]`` ran once, when the sandbox started);
* the scaffold starts afresh on the step's instruction (``steps/<name>/instruction.md``): the
  policy sees a new conversation, within the step's ``[steps.agent] timeout_sec``;
* then the verifier runs (``tests/`` with ``steps/<name>/tests/`` over it; the step's
  ``test.sh`` when it has one), which leaves no process running, the image's service included;
  before the next step's agent runs, the service is started again (``kill_all()``) and
  ``/tests`` and ``/logs/verifier`` are emptied;
* the episode stops early after a step whose agent failed (an error), or whose rewards miss
  its ``min_reward`` (a number gates the ``reward`` key; a table gates each key it names; a
  missing key counts as minus infinity);
* the reward (``multi_step_reward_strategy``): ``mean`` (the default) averages each key over
  the steps that were verified (a key a step lacks counts 0), and the episode's reward is the
  mean of the steps' rewards; ``final`` is the last verified step's result as it is.

A step whose verifier gave no reward makes the episode an error (Harbor leaves that step out
of the mean): a broken verifier must not look like a failing agent.
"""

from __future__ import annotations

import asyncio
import math
import posixpath
from pathlib import Path

from palaestra.env.agent_user import agent_sandbox
from palaestra.env.collect import collect_episode
from palaestra.env.episode import RunningEpisode, advance, start_scaffold
from palaestra.env.healthcheck import run_healthcheck
from palaestra.llm.types import LLMRequest
from palaestra.sandbox.base import Sandbox, SandboxError
from palaestra.scaffolds import Scaffold
from palaestra.scaffolds.base import EndReason, Outcome
from palaestra.tasks import Task
from palaestra.tasks.paths import TESTS_DIR, VERIFIER_DIR
from palaestra.verify.harbor import VerifierResult, VerifierStatus
from palaestra.verify.protocol import Verifier

#: After a step's verification: its tests and outputs are gone before the next agent runs.
_RESET_SH = f"find {TESTS_DIR} {VERIFIER_DIR} -mindepth 1 -delete 2>/dev/null; true"


class StepSetupError(SandboxError):
    """A step's ``setup.sh`` failed: the step never started."""


async def begin_step(step: Task, sandbox: Sandbox, *, first: bool) -> None:
    """Prepare ``sandbox`` for ``step`` (see the module doc); raises when it cannot be."""
    if not first:  # the verifier left nothing running: the image's service starts again
        await sandbox.kill_all()
        await sandbox.exec(["sh", "-c", _RESET_SH], timeout=60)
    assert step.step_dir is not None
    workdir = step.step_dir / "workdir"
    if await asyncio.to_thread(workdir.is_dir):
        await sandbox.upload(workdir, sandbox.spec.workdir)
    if await asyncio.to_thread((workdir / "setup.sh").is_file):
        script = posixpath.join(sandbox.spec.workdir, "setup.sh")
        limit = step.agent_timeout_sec
        setup = await agent_sandbox(sandbox, step.agent_user).exec(
            ["bash", script],
            cwd=sandbox.spec.workdir,
            timeout=limit if math.isfinite(limit) else None,
        )
        if not setup.ok:
            raise StepSetupError(
                f"step {step.step!r}: setup.sh exited {setup.exit_code}: "
                f"{setup.output.strip()[-300:]}"
            )
    if step.healthcheck is not None:
        await run_healthcheck(sandbox, step.healthcheck)


def stops_after(step: Task, result: VerifierResult | None) -> bool:
    """Whether the remaining steps are skipped after ``step`` (its ``min_reward``)."""
    config = step.step_config
    if config is None or config.min_reward is None:
        return False
    gates = (
        {"reward": config.min_reward}
        if isinstance(config.min_reward, int | float)
        else config.min_reward
    )
    rewards = result.rewards if result is not None and result.ok else {}
    return any(rewards.get(key, -math.inf) < floor for key, floor in gates.items())


def combine(task: Task, results: list[VerifierResult]) -> VerifierResult:
    """The episode's result from its steps' (see the module doc)."""
    failed = [r for r in results if not r.ok]
    if failed or not results:
        error = failed[0].error if failed else "no step was verified"
        first = failed[0] if failed else None
        return VerifierResult(
            first.status if first is not None else VerifierStatus.ERROR,
            error=f"a step's verifier gave no reward: {error}",
            output=first.output if first is not None else "",
            error_kind=first.error_kind if first is not None else None,
            duration_s=sum(r.duration_s for r in results),
        )
    if task.config.multi_step_reward_strategy == "final":
        rewards, reward = dict(results[-1].rewards), results[-1].reward
    else:
        keys = sorted({key for r in results for key in r.rewards})
        rewards = {k: sum(r.rewards.get(k, 0.0) for r in results) / len(results) for k in keys}
        reward = sum(r.reward or 0.0 for r in results) / len(results)
    return VerifierResult(
        VerifierStatus.OK,
        reward=reward,
        rewards=rewards,
        exit_code=results[-1].exit_code,
        output=results[-1].output,
        duration_s=sum(r.duration_s for r in results),
        strategy=results[-1].strategy,
    )


def verifies(outcome: Outcome, verify_on_truncation: bool) -> bool:
    """Does the verifier run after the agent's part (or a step's) ended with ``outcome``? Not
    after an error, nor after a limit cut it short unless ``verify_on_truncation``."""
    if outcome.reason is EndReason.ERROR:
        return False
    return not outcome.truncated or verify_on_truncation


async def next_step(
    ep: RunningEpisode,
    outcome: Outcome,
    *,
    scaffold: Scaffold,
    verifier: Verifier,
    verify_on_truncation: bool,
    artifacts_dir: Path | None,
    agent_timeout_sec: float | None,
) -> LLMRequest | Outcome | None:
    """After a step's agent ended with ``outcome``: verify the step, then start the next one
    and run it to its first request (an error outcome when its set-up failed); None: the
    episode ends."""
    if not verifies(outcome, verify_on_truncation):
        return None
    await collect_episode(ep.current, ep.sandbox, artifacts_dir, ep.id)
    result = await verifier.verify(ep.current, ep.sandbox)
    ep.step_results.append((ep.current, result))
    index = ep.task.steps.index(ep.current)
    if not result.ok or stops_after(ep.current, result) or index + 1 == len(ep.task.steps):
        return None
    ep.current = ep.task.steps[index + 1]
    try:
        await begin_step(ep.current, ep.sandbox, first=False)
    except Exception as e:
        return Outcome(EndReason.ERROR, len(ep.turns), str(e), exception=e)
    ep.agent_s, ep.agent_budget_s = 0.0, agent_timeout_sec or ep.current.agent_timeout_sec
    ep.scaffold_task = start_scaffold(scaffold, ep.current, ep.sandbox, ep.client)
    return await advance(ep)
