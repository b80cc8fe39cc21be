"""``[environment.healthcheck]``: the sandbox is handed to the agent only once it is healthy.

Harbor 0.26's ``BaseEnvironment.run_healthcheck``, which mirrors Docker's ``HEALTHCHECK``: the
command runs (``bash -c``, as the sandbox's own user, within ``timeout_sec``) until it exits 0.
During the first ``start_period_sec`` a failure does not count and the next try follows after
``start_interval_sec``; after it, failures count and the next try follows after
``interval_sec``; the ``retries``-th consecutive counted failure ends it. A command that runs
past ``timeout_sec`` is a failure. A failed healthcheck is a :class:`HealthcheckError`: the
episode never starts, and is an infrastructure error (a ``SandboxError``) naming the command.
"""

from __future__ import annotations

import asyncio
import time

from palaestra.sandbox.base import Sandbox, SandboxError
from palaestra.tasks.config import HealthcheckConfig


class HealthcheckError(SandboxError):
    """The task's healthcheck did not pass: its sandbox never became ready."""


async def run_healthcheck(sandbox: Sandbox, check: HealthcheckConfig) -> int:
    """Run ``check`` in ``sandbox`` until it passes; returns the number of tries it took."""
    start_period_end = time.monotonic() + check.start_period_sec
    failures = tries = 0
    while True:
        in_start_period = time.monotonic() < start_period_end
        result = await sandbox.exec(check.command, timeout=check.timeout_sec)
        tries += 1
        if result.ok:
            return tries
        if in_start_period:
            await asyncio.sleep(check.start_interval_sec)
            continue
        failures += 1
        if failures >= check.retries:
            how = (
                f"ran past its timeout_sec of {check.timeout_sec:g} s"
                if result.timed_out
                else f"exited {result.exit_code}"
            )
            tail = result.output.strip()[-300:]
            raise HealthcheckError(
                f"the task's [environment.healthcheck] failed {failures} consecutive time(s) "
                f"(retries = {check.retries}), so the sandbox was never handed to the agent: "
                f"`{check.command}` {how}" + (f": {tail}" if tail else "")
            )
        await asyncio.sleep(check.interval_sec)
