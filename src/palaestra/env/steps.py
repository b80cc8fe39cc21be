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

from palaestra.env.agent_user import agent_sandbox
from palaestra.env.healthcheck import run_healthcheck
from palaestra.sandbox.base import Sandbox, SandboxError
from palaestra.tasks import Task
from palaestra.tasks.paths import TESTS_DIR, VERIFIER_DIR
from palaestra.verify.harbor import VerifierResult, VerifierStatus

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
