"""When and where :class:`~palaestra.env.code_env.CodeEnv` runs the verifier.

The verifier runs after the agent's part ends, unless the scaffold failed (an error episode) or
a limit cut the agent short and the env does not ``verify_on_truncation``. The task's collect
hooks run and its artifacts are kept first (:mod:`palaestra.env.collect`). Then the verifier
runs in the agent's sandbox, in a separate one (Harbor's ``environment_mode = "separate"``:
:mod:`palaestra.env.separate`), or, for a multi-step task, once as each step ends, the steps'
results combined at the end (:mod:`palaestra.env.steps`). A verifier that raises (an
infrastructure failure) gives an error result, never an exception out of ``step``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from palaestra.env.collect import collect_episode
from palaestra.env.end import error_text
from palaestra.env.episode import RunningEpisode
from palaestra.env.separate import verify_separately
from palaestra.env.steps import combine, verifies
from palaestra.sandbox.base import SandboxBackend, SandboxSpec
from palaestra.scaffolds.base import Outcome
from palaestra.verify.harbor import VerifierResult, VerifierStatus
from palaestra.verify.protocol import Verifier


async def verify_end(
    ep: RunningEpisode,
    outcome: Outcome,
    *,
    verifier: Verifier,
    backend: SandboxBackend,
    verifier_spec: SandboxSpec | None,
    verify_on_truncation: bool,
    artifacts_dir: Path | None,
) -> VerifierResult | None:
    """At the episode's end: collect, then the verifier's result (None when it does not run);
    the agent's sandbox is closed either way. ``verifier_spec``: the separate verifier's
    sandbox, for a task that has one."""
    result: VerifierResult | None = None
    try:
        if not ep.task.steps:  # a step's were collected as it ended
            await collect_episode(ep.task, ep.sandbox, artifacts_dir, ep.id)
        if verifies(outcome, verify_on_truncation):
            started = time.perf_counter()
            try:
                result = await _dispatch(ep, verifier, backend, verifier_spec)
            except Exception as e:  # an infrastructure failure while verifying
                error = error_text(type(e).__name__, str(e))
                result = VerifierResult(VerifierStatus.ERROR, error=error)
            ep.timings["verifier_s"] = time.perf_counter() - started
    finally:
        await ep.sandbox.close()
    return result


async def _dispatch(
    ep: RunningEpisode,
    verifier: Verifier,
    backend: SandboxBackend,
    verifier_spec: SandboxSpec | None,
) -> VerifierResult:
    """The steps' results combined (verified as each ended), or the verifier's result in the
    agent's sandbox, or in a separate one."""
    if ep.task.steps:
        return combine(ep.task, [result for _, result in ep.step_results])
    if ep.task.verifier_environment is None:
        return await verifier.verify(ep.task, ep.sandbox)
    assert verifier_spec is not None  # prepared with the task's own spec
    spec = replace(verifier_spec, labels={**verifier_spec.labels, "palaestra.episode_id": ep.id})
    return await verify_separately(ep.task, ep.sandbox, backend, spec, verifier)
