"""The local backend's janitor, and owners that die or exit with sandboxes open, against real
bubblewrap (no test doubles). Processes are found by markers (see :mod:`tests.procs`).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from palaestra.sandbox.base import (
    SandboxError,
    SandboxSpec,
)
from palaestra.sandbox.janitor import CREATION_GRACE_S, META_FILE, reclaim_leftovers
from palaestra.sandbox.local import LocalBackend
from tests.procs import (
    bwrap_pids,
    eventually,
    host_pids,
    new_marker,
    sandbox_cgroups,
    tmpfs_mounts_under,
)
from tests.sandbox.conftest import new_run_id

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0, reason="needs bubblewrap, as root"
)


# -- janitor -------------------------------------------------------------------------------------

OWNER = """
import asyncio, os, signal, sys
from palaestra.sandbox.base import SandboxSpec
from palaestra.sandbox.local import LocalBackend

async def main(state_dir, run_id, marker, fate):
    sandbox = await LocalBackend(run_id, state_dir).create(SandboxSpec())
    await sandbox.exec(f"sleep {marker} &")
    print(sandbox.sandbox_dir, flush=True)
    if fate == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    await asyncio.to_thread(sys.stdin.read)

asyncio.run(main(*sys.argv[1:]))
"""


async def start_owner(
    state_dir: Path, run_id: str, marker: str, fate: str
) -> tuple[asyncio.subprocess.Process, Path]:
    """Another process that owns a sandbox, then dies (SIGKILL) or lives until stdin closes."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        OWNER,
        str(state_dir),
        run_id,
        marker,
        fate,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    return proc, Path(line.decode().strip())


@pytest.mark.slow
async def test_janitor_reclaims_dead_runs_only(state_dir: Path) -> None:
    dead_marker, live_marker = new_marker(), new_marker()
    live, live_dir = await start_owner(state_dir, "live-run", live_marker, "live")
    dead, dead_dir = await start_owner(state_dir, "dead-run", dead_marker, "die")
    try:
        assert await dead.wait() == -signal.SIGKILL
        assert dead_dir.is_dir() and (dead_dir / META_FILE).is_file()  # left behind
        backend = LocalBackend(state_dir=state_dir)
        async with await backend.create(SandboxSpec()):  # reclaims before its first sandbox
            pass
        await backend.aclose()
        assert not dead_dir.parent.exists()
        assert await eventually(lambda: host_pids(dead_marker) == [])
        assert bwrap_pids(str(dead_dir)) == []
        # The live run is untouched.
        assert live_dir.is_dir()
        assert len(bwrap_pids(str(live_dir))) == 1
        assert len(host_pids(f"sleep\0{live_marker}")) == 1
    finally:
        assert live.stdin is not None
        live.stdin.close()
        await live.wait()


async def test_janitor_kills_leftover_bwrap_when_the_owner_pid_was_reused(
    state_dir: Path,
) -> None:
    backend = LocalBackend(run_id=new_run_id(), state_dir=state_dir)
    try:
        victim = await backend.create(SandboxSpec())
        bystander = await backend.create(SandboxSpec())
        marker = new_marker()
        await victim.exec(f"sleep {marker} &")
        meta_path = victim.sandbox_dir / META_FILE
        meta = json.loads(meta_path.read_text())
        meta_path.write_text(json.dumps({**meta, "owner_start": meta["owner_start"] - 1}))
        assert await asyncio.to_thread(reclaim_leftovers, state_dir) == 1
        assert not victim.sandbox_dir.exists()
        assert bwrap_pids(str(victim.sandbox_dir)) == []
        assert await eventually(lambda: host_pids(marker) == [])
        with pytest.raises(SandboxError, match="stopped unexpectedly"):
            await victim.exec("true")
        assert (await bystander.exec("echo fine")).stdout == "fine\n"
        assert bystander.sandbox_dir.exists()
    finally:
        await backend.aclose()


async def test_janitor_spares_directories_being_created(state_dir: Path) -> None:
    young, old = state_dir / "run" / "sb-young", state_dir / "run" / "sb-old"
    young.mkdir(parents=True)
    (young / f".{META_FILE}.tmp").write_text("{")  # its creator writing meta.json
    old.mkdir()
    long_ago = time.time() - CREATION_GRACE_S - 1
    os.utime(old, (long_ago, long_ago))
    # Files without meta.json: not a creation (meta.json comes first) but a removal cut short.
    cut_short = state_dir / "run" / "sb-cut-short"
    (cut_short / "fs").mkdir(parents=True)
    assert await asyncio.to_thread(reclaim_leftovers, state_dir) == 2
    assert young.exists() and not old.exists() and not cut_short.exists()


REMOVER = """
import os, shutil, sys, time
from pathlib import Path
from palaestra.sandbox.janitor import SandboxMeta, process_start_time, remove_sandbox_dir

sandbox_dir, stop_after = Path(sys.argv[1]), int(sys.argv[2])
SandboxMeta("sb-x", os.getpid(), process_start_time(os.getpid())).write(sandbox_dir)
for d in range(100):
    (sandbox_dir / f"d{d:03}").mkdir()
    for f in range(5):
        (sandbox_dir / f"d{d:03}" / str(f)).write_bytes(b"x")
removed, rmtree = 0, shutil.rmtree

def counted_rmtree(path, *args, **kwargs):
    global removed
    if removed == stop_after:
        print("stopped", flush=True)  # the test kills this process here
        time.sleep(600)
    rmtree(path, *args, **kwargs)
    removed += 1

shutil.rmtree = counted_rmtree
print("made", flush=True)
remove_sandbox_dir(sandbox_dir)
print("done", flush=True)
"""


# After the 100th, only the record is left; it goes, then the empty directory: cut short there,
# an empty directory is left, which the janitor takes once CREATION_GRACE_S has passed.
@pytest.mark.slow
@pytest.mark.parametrize("stop_after", [0, 1, 50, 99])
async def test_a_removal_cut_short_leaves_the_record_for_the_janitor(
    state_dir: Path, stop_after: int
) -> None:
    """Seen in CI: a Ray actor killed while removing a sandbox left its directory without
    meta.json, which the janitor spares as one being created. Killed at any point of a removal
    (here: after ``stop_after`` of its 100 subdirectories went, the process stopped there and
    killed: no timing involved), it leaves its record, and the next janitor pass reclaims it."""
    sandbox_dir = state_dir / "run" / "sb-cut"
    sandbox_dir.mkdir(parents=True)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        REMOVER,
        str(sandbox_dir),
        str(stop_after),
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert await asyncio.wait_for(proc.stdout.readline(), 60) == b"made\n"
    assert await asyncio.wait_for(proc.stdout.readline(), 60) == b"stopped\n"
    proc.kill()
    await proc.wait()
    left = sorted(os.listdir(sandbox_dir))
    assert META_FILE in left and len(left) == 1 + 100 - stop_after, left[:5]
    assert await asyncio.to_thread(reclaim_leftovers, state_dir) == 1
    assert not sandbox_dir.exists()


async def test_janitor_unmounts_what_no_record_names(state_dir: Path) -> None:
    """Seen on a CI machine: a sandbox directory without meta.json (its start never reported
    back) with its disk quota still mounted. Removing the directory alone loses the mount."""
    from palaestra.sandbox.limits import mount

    stale = state_dir / "run" / "sb-unrecorded"
    (stale / "fs").mkdir(parents=True)
    await asyncio.to_thread(mount, "tmpfs", stale / "fs", "tmpfs", "size=1m")
    long_ago = time.time() - CREATION_GRACE_S - 1
    os.utime(stale, (long_ago, long_ago))
    assert tmpfs_mounts_under(str(stale)) != []
    assert await asyncio.to_thread(reclaim_leftovers, state_dir) == 1
    assert tmpfs_mounts_under(str(stale)) == [] and not stale.exists()


async def test_janitor_spares_an_empty_run_directory_that_just_changed(state_dir: Path) -> None:
    fresh, stale = state_dir / "fresh-run", state_dir / "stale-run"
    fresh.mkdir(parents=True)  # a creator's: its first sandbox directory comes next
    stale.mkdir()
    long_ago = time.time() - CREATION_GRACE_S - 1
    os.utime(stale, (long_ago, long_ago))
    assert await asyncio.to_thread(reclaim_leftovers, state_dir) == 0
    assert fresh.is_dir() and not stale.exists()


async def test_creates_wait_for_the_start_up_janitor(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen in CI: a create racing its backend's first janitor pass lost its run directory
    between making it and making its sandbox's. Now no sandbox is made before the pass ends."""
    import palaestra.sandbox.local.backend as local_backend

    seen: list[list[str]] = []

    def slow_janitor(path: Path) -> int:
        time.sleep(0.3)
        seen.append(sorted(p.name for p in path.glob("*/sb-*")))
        return reclaim_leftovers(path)

    monkeypatch.setattr(local_backend, "reclaim_leftovers", slow_janitor)
    backend = LocalBackend(new_run_id(), state_dir)
    try:
        sandboxes = await asyncio.gather(*(backend.create(SandboxSpec()) for _ in range(4)))
        assert seen == [[]]  # one pass, before any sandbox directory existed
        assert len({s.sandbox_dir for s in sandboxes}) == 4
        for sandbox in sandboxes:
            assert (await sandbox.exec("echo up")).stdout == "up\n"
    finally:
        await backend.aclose()


async def test_a_run_directory_removed_under_a_create_is_made_again(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's janitor (or the run's last sandbox closing) may remove the run
    directory while it is empty: the create makes it again instead of failing."""
    backend = LocalBackend(new_run_id(), state_dir)
    real_mkdir = Path.mkdir
    removed: list[Path] = []

    def mkdir_racing_a_janitor(self: Path, *args: object, **kwargs: object) -> None:
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        if self.name == backend.run_id and not removed:
            self.rmdir()  # emptied and removed right after its creator made it
            removed.append(self)

    try:
        monkeypatch.setattr(Path, "mkdir", mkdir_racing_a_janitor)
        sandbox = await backend.create(SandboxSpec())
        monkeypatch.undo()
        assert removed == [state_dir / backend.run_id]
        assert sandbox.sandbox_dir.parent == state_dir / backend.run_id
        assert (await sandbox.exec("echo up")).stdout == "up\n"
    finally:
        monkeypatch.undo()
        await backend.aclose()


FAKE_BWRAP = """#!/bin/sh
# Stands in for bubblewrap at its weakest moment: it has cloned its child, which waits for
# bwrap's go-ahead with no parent-death signal yet and holds the sandbox's pipes. This one
# never gives the go-ahead, nor the helper's pid (it closes --info-fd without a word).
eval "exec $2>&-"
sleep 1000 {marker} &
exec sleep 1000 {marker}
"""


async def test_a_bwrap_child_without_a_parent_death_signal_dies_with_the_sandbox(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen in CI: a start cancelled early killed bwrap alone; its child, still waiting for
    bwrap's go-ahead, lived on holding the pipes, and close() waited for them forever."""
    marker = new_marker()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bwrap").write_text(FAKE_BWRAP.format(marker=marker))
    (bin_dir / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    backend = LocalBackend(new_run_id(), state_dir)
    try:
        with pytest.raises(SandboxError, match="stopped unexpectedly"):
            await asyncio.wait_for(backend.create(SandboxSpec()), 30)
        assert host_pids(marker) == []
        assert not any((state_dir / backend.run_id).glob("sb-*"))
    finally:
        await backend.aclose()


async def test_the_janitor_kills_a_bwrap_child_orphaned_mid_start(state_dir: Path) -> None:
    """The owner died while its bwrap's child waited for the go-ahead: meta.json has no bwrap
    pid, and the orphan is found by its command line."""
    marker = new_marker()
    sandbox_dir = state_dir / "dead-run" / "sb-orphan"
    sandbox_dir.mkdir(parents=True)
    dead = await asyncio.create_subprocess_exec("true")
    await dead.wait()
    meta = {
        "sandbox_id": "sb-orphan",
        "owner_pid": dead.pid,
        "owner_start": None,
        "labels": {},
        "bwrap_pid": None,
        "cgroups": [],
        "mounts": [],
    }
    (sandbox_dir / META_FILE).write_text(json.dumps(meta))
    # what such an orphan looks like: bwrap's command line, naming the sandbox's directory
    orphan = await asyncio.create_subprocess_exec(
        "bwrap",
        "-c",
        "import time; time.sleep(1000)",
        "--bind",
        f"{sandbox_dir}/fs/app",
        "/app",
        marker,
        executable=sys.executable,
        start_new_session=True,
    )
    try:
        assert await eventually(lambda: len(host_pids(marker)) == 1)
        assert await asyncio.to_thread(reclaim_leftovers, state_dir) == 1
        assert await asyncio.wait_for(orphan.wait(), 10) == -signal.SIGKILL
        assert not sandbox_dir.exists()
    finally:
        if orphan.returncode is None:
            orphan.kill()
            await orphan.wait()


EXITING_OWNER = """
import asyncio, os, signal, sys
from palaestra.sandbox.base import SandboxSpec

# A runner under nohup passes SIGHUP on ignored; an owner started that way would (rightly) keep
# ignoring it. The test is of an owner that SIGHUP ends.
signal.signal(signal.SIGHUP, signal.SIG_DFL)
from palaestra.sandbox.local import LocalBackend

async def main(state_dir, run_id, marker, fate):
    backend = LocalBackend(run_id, state_dir)  # never aclose'd, sandboxes never closed
    for spec in (SandboxSpec(), SandboxSpec(memory_mb=256, storage_mb=16, pids_limit=50)):
        sandbox = await backend.create(spec)
        await sandbox.exec(f"sleep {marker} & (setsid sleep {marker} &)")
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # the test has counted the sleeps
    if fate == "raise":
        raise RuntimeError("crash with sandboxes open")
    if fate == "return":
        return
    await asyncio.sleep(60)

asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.parametrize(
    ("fate", "sig"),
    [
        ("wait", signal.SIGTERM),
        ("wait", signal.SIGINT),
        ("wait", signal.SIGHUP),
        ("raise", None),
        ("return", None),
    ],
)
async def test_exiting_owner_leaves_nothing(
    state_dir: Path, fate: str, sig: signal.Signals | None
) -> None:
    """A process that exits (signal, exception, plain return) with sandboxes open cleans up."""
    marker, run_id = new_marker(), new_run_id()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        EXITING_OWNER,
        str(state_dir),
        run_id,
        marker,
        fate,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    assert await asyncio.wait_for(proc.stdout.readline(), 60) == b"ready\n"
    assert len(host_pids(f"sleep\0{marker}")) == 4
    proc.stdin.write(b"go\n")  # counted before the owner goes on to its fate
    await proc.stdin.drain()
    if sig is not None:
        proc.send_signal(sig)
    code = await asyncio.wait_for(proc.wait(), 60)
    if sig is not None:
        assert code in (-sig, 1, 128 + sig), code  # SIGINT: KeyboardInterrupt, exit status 1
    assert host_pids(f"sleep\0{marker}") == []
    assert bwrap_pids(str(state_dir)) == []
    assert sandbox_cgroups(run_id) == []
    assert tmpfs_mounts_under(str(state_dir)) == []
    assert not (state_dir / run_id).exists()


@pytest.mark.slow
async def test_a_ray_actor_s_janitor_reclaims_an_owner_that_dies_after_its_start(
    state_dir: Path,
) -> None:
    """An actor restarted while its dead incarnation is still exiting finds that owner alive
    and spares its sandbox: the actor's later passes (every ``JANITOR_PERIOD_S``) reclaim it
    once it is gone."""
    import threading

    from palaestra.run.ray_executor import _every, _janitor

    marker = new_marker()
    owner, sandbox_dir = await start_owner(state_dir, new_run_id(), marker, "live")
    reclaim = _janitor(LocalBackend(state_dir=state_dir))
    stop = threading.Event()
    passes = threading.Thread(target=_every, args=(0.2, reclaim, stop))
    try:
        await asyncio.to_thread(reclaim)  # the pass at the actor's start: the owner runs
        assert sandbox_dir.is_dir()
        passes.start()
        owner.kill()
        assert await owner.wait() == -signal.SIGKILL
        assert await eventually(lambda: not sandbox_dir.exists(), within=20)
        assert await eventually(lambda: host_pids(marker) == [])
    finally:
        stop.set()
        if passes.is_alive():
            await asyncio.to_thread(passes.join)
        if owner.returncode is None:
            owner.kill()
            await owner.wait()
