"""What a verifier is: the one method the environment layer calls, whatever checks the work.

``CodeEnv`` (in the agent's sandbox or a separate one), ``palaestra tasks check`` and the reward
strategies' :class:`~palaestra.verify.strategies.StrategyVerifier` type against
:class:`Verifier`; :class:`~palaestra.verify.harbor.HarborVerifier` (Harbor's ``tests/test.sh``)
is the one palaestra ships, and a strategy wraps any verifier. Write your own for a check that
is not a test script (a judge model, a service, a replay)::

    class ServiceVerifier:
        async def verify(self, task, sandbox, *, timeout=None) -> VerifierResult:
            res = await sandbox.exec(["curl", "-sf", "http://localhost:8000/health"])
            return VerifierResult(VerifierStatus.OK, reward=float(res.ok), rewards={...})

    env = CodeEnv(tasks, backend, scaffold, verifier=ServiceVerifier())

The contract: ``verify`` runs after the agent's phase, in ``sandbox`` (every agent process is
the verifier's to kill first: :meth:`~palaestra.sandbox.base.Sandbox.kill_all`); it returns a
:class:`~palaestra.verify.harbor.VerifierResult` whose ``status`` says whether a reward was
read (``OK``) or why not (``ERROR``, ``TIMEOUT``: never a silent 0); it does not close the
sandbox; it is safe to call concurrently on different sandboxes (one instance serves every
episode). Agent code is hostile: read back nothing it could have written but the declared
result (:mod:`palaestra.verify.boundary` has the checks the Harbor verifier makes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from palaestra.sandbox.base import Sandbox
    from palaestra.tasks import Task
    from palaestra.verify.harbor import VerifierResult


@runtime_checkable
class Verifier(Protocol):
    """Anything with :meth:`verify` (see the module's docstring for the contract)."""

    async def verify(
        self, task: Task, sandbox: Sandbox, *, timeout: float | None = None
    ) -> VerifierResult:
        """The outcome of ``task``'s check of the work in ``sandbox``; ``timeout`` (seconds)
        overrides the task's own verifier timeout."""
        ...
