"""`check_tasks` on real sandboxes: a failing scenario stops the others and leaves nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from palaestra.env.registry import load_tasks
from palaestra.run.check import check_tasks
from palaestra.sandbox.base import Sandbox, SandboxBackend, SandboxError, SandboxSpec
from palaestra.sandbox.local import LocalBackend
from tests.procs import eventually, sandbox_processes
from tests.sandbox.conftest import new_run_id


class FailsOnCreate(SandboxBackend):
    """The real local backend, except that its ``n``-th create fails (as a sandbox start can)."""

    name = "local"

    def __init__(self, real: LocalBackend, n: int) -> None:
        self.real, self.n, self.calls = real, n, 0

    async def create(self, spec: SandboxSpec) -> Sandbox:
        self.calls += 1
        if self.calls == self.n:
            # the other scenarios are under way: one of them holds a started sandbox
            assert await eventually(lambda: len(self.real._open) > 0)
            raise SandboxError("start failed")
        return await self.real.create(spec)


async def test_a_failing_scenario_stops_the_others_before_check_tasks_returns(
    tmp_path: Path,
) -> None:
    """Seen in CI: the scenarios still running after one failed outlived the call, and a
    sandbox started for one of them was never closed (its disk quota stayed mounted)."""
    real = LocalBackend(new_run_id(), tmp_path / "state")
    backend = FailsOnCreate(real, n=3)
    try:
        with pytest.raises(SandboxError, match="start failed"):
            await check_tasks(
                list(load_tasks("starter")), backend=backend, concurrency=4, only=["oracle"]
            )
        assert not real._open  # every sandbox the call started is closed when it returns
        assert sandbox_processes(str(tmp_path / "state")) == []
        # and nothing of it goes on afterwards: no task of the call is left in the loop
        assert asyncio.all_tasks() == {asyncio.current_task()}
    finally:
        await real.aclose()
