"""A local sandbox's cgroups against cgroups made below them, and its own CPU weight, on the
real kernel, with each helper."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from palaestra.sandbox import Sandbox, SandboxSpec
from palaestra.sandbox import limits as limits_mod
from palaestra.sandbox.local import LocalBackend
from palaestra.sandbox.local.userns import id_base
from tests.procs import eventually, host_pids, new_marker
from tests.sandbox.conftest import new_run_id

pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or os.geteuid() != 0, reason="needs bubblewrap, as root"
    ),
    pytest.mark.skipif(limits_mod.cgroup_version() is None, reason="needs cgroup v1 or v2"),
]


@pytest.fixture
async def backend(tmp_path: Path, helper: str) -> AsyncIterator[LocalBackend]:
    backend = LocalBackend(run_id=new_run_id(), state_dir=tmp_path / "state")
    yield backend
    await backend.aclose()


def tracking_cgroup(sandbox: Sandbox) -> Path:
    """The sandbox's cgroup under which the helper makes one per command (v1: the freezer
    hierarchy's; v2: its only one)."""
    cgroups = sandbox._limits.cgroups  # type: ignore[attr-defined]
    return Path(next((p for p in cgroups if "/freezer/" in p), cgroups[0]))


def move_below_its_command(pid: int, track: Path, levels: list[str]) -> Path:
    """As the host's root, make cgroups ``levels`` (nested) below the command cgroup holding
    ``pid`` and move ``pid`` into the deepest one, as an agent with cgroupfs would: owned by
    the sandbox's root (its uid on the host), as what it made would be."""
    command = next(d for d in track.iterdir() if d.is_dir() and str(pid) in procs(d))
    target = command.joinpath(*levels)
    target.mkdir(parents=True, exist_ok=True)
    for made in [command.joinpath(*levels[: i + 1]) for i in range(len(levels))]:
        for path in [made, *made.iterdir()]:
            os.chown(path, id_base(), id_base())
    (target / "cgroup.procs").write_text(str(pid))
    assert str(pid) in procs(target)
    return target


def freeze(cgroup: Path) -> None:
    """Freeze ``cgroup`` on its own, as an agent with cgroupfs could: what it holds dies of a
    SIGKILL only once thawed (v1)."""
    v1 = cgroup / "freezer.state"
    (v1 if v1.exists() else cgroup / "cgroup.freeze").write_text("FROZEN" if v1.exists() else "1")


def exists(path: str) -> bool:
    return os.path.exists(path)


def procs(cgroup: Path) -> list[str]:
    return (cgroup / "cgroup.procs").read_text().split()


@pytest.mark.slow
async def test_a_timed_out_command_in_cgroups_of_its_own_is_killed(backend: LocalBackend) -> None:
    """Its processes moved into a child cgroup and a frozen grandchild one: the timeout still
    kills them, the helper answers as always, and close leaves no cgroup."""
    marker = new_marker()
    sandbox = await backend.create(SandboxSpec())
    track = tracking_cgroup(sandbox)
    paths = list(sandbox._limits.cgroups)  # type: ignore[attr-defined]
    try:
        running = asyncio.ensure_future(
            sandbox.exec(f"sleep 1000 {marker} & exec sleep 1000 {marker}", timeout=4)
        )
        assert await eventually(lambda: len(host_pids(marker)) == 2)
        first, second = host_pids(marker)
        await asyncio.to_thread(move_below_its_command, first, track, ["agent"])
        deeper = await asyncio.to_thread(move_below_its_command, second, track, ["agent", "deeper"])
        await asyncio.to_thread(freeze, deeper)
        assert not running.done()  # moved before the timeout, so the timeout meets them there
        res = await running
        assert res.timed_out, res
        assert await eventually(lambda: host_pids(marker) == [], within=5)
        assert (await sandbox.exec("echo alive")).stdout == "alive\n"
    finally:
        await sandbox.close()
    assert not any(map(exists, paths))


async def test_kill_all_reaches_cgroups_below_a_finished_command(backend: LocalBackend) -> None:
    """A finished command's daemon, moved two cgroups down into a frozen one, dies with
    kill_all; the cgroups it leaves go with the sandbox."""
    marker = new_marker()
    sandbox = await backend.create(SandboxSpec())
    track = tracking_cgroup(sandbox)
    paths = list(sandbox._limits.cgroups)  # type: ignore[attr-defined]
    try:
        assert (await sandbox.exec(f"(setsid sleep 1000 {marker} &)", timeout=5)).ok
        assert await eventually(lambda: len(host_pids(marker)) == 1)
        (pid,) = host_pids(marker)
        await asyncio.to_thread(
            freeze, await asyncio.to_thread(move_below_its_command, pid, track, ["a", "b"])
        )
        await sandbox.kill_all()
        assert host_pids(marker) == []
        assert (await sandbox.exec("echo alive")).stdout == "alive\n"
    finally:
        await sandbox.close()
    assert not any(map(exists, paths))
