"""The local backend's warm pool, against real bubblewrap: sandboxes started ahead of time and
handed out by ``create``. Reuse is read from ``backend.pool_hits`` and the host's processes,
never from timings."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from palaestra.sandbox import make_backend
from palaestra.sandbox.base import Mount, SandboxSpec
from palaestra.sandbox.janitor import META_FILE, RUN_ID_LABEL
from palaestra.sandbox.local import WARM_ENV, LocalBackend, LocalSandbox
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


@pytest.fixture
async def warm(state_dir: Path) -> AsyncIterator[LocalBackend]:
    backend = LocalBackend(run_id=new_run_id(), state_dir=state_dir, warm=2)
    yield backend
    await backend.aclose()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


async def cat(sandbox: LocalSandbox, *paths: str) -> str:
    res = await sandbox.exec(["cat", *paths])
    return res.stdout if res.ok else f"<{res.stderr.strip()}>"


async def listing(sandbox: LocalSandbox, path: str = "/app") -> list[str]:
    res = await sandbox.exec(["find", path, "-mindepth", "1"])
    assert res.ok, res
    return sorted(res.stdout.split())


def open_bwraps(state_dir: Path) -> int:
    return len(bwrap_pids(str(state_dir)))


async def test_a_hit_is_a_sandbox_like_a_cold_one(warm: LocalBackend, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    write(tree / "sub" / "two.txt", "two")
    spec = SandboxSpec(
        workdir="/app",
        writable_dirs=("/tmp", "/logs/verifier", "/tests"),
        env={"SPEC_VAR": "from-spec"},
        memory_mb=256,
        pids_limit=64,
        storage_mb=64,
        files={"/app/one.txt": write(tmp_path / "one.txt", "one"), "/tests/tree": tree},
        labels={"palaestra.episode_id": "first"},
    )
    cold = await warm.create(spec)
    assert warm.pool_hits == 0
    await warm.pool_ready()
    assert warm.pool_started == 2
    again = dataclasses.replace(spec, labels={"palaestra.episode_id": "second"})
    hit = await warm.create(again)
    assert warm.pool_hits == 1
    assert hit.spec is again
    assert hit.limits == cold.limits
    for sandbox in (cold, hit):
        assert await cat(sandbox, "/app/one.txt", "/tests/tree/sub/two.txt") == "onetwo"
        assert (await sandbox.exec("echo $SPEC_VAR; pwd")).stdout == "from-spec\n/app\n"
        assert (await sandbox.exec("touch /tmp/x /logs/verifier/x /root/x")).ok
    meta = json.loads((hit.sandbox_dir / META_FILE).read_text())
    assert meta["labels"] == {"palaestra.episode_id": "second", RUN_ID_LABEL: warm.run_id}
    assert meta["bwrap_pid"] == hit.bwrap_pid
    # The limits are enforced: the pids cgroup says 64, the quota is a 64 MiB tmpfs.
    pids_cgroup = next(Path(c) for c in meta["cgroups"] if (Path(c) / "pids.max").exists())
    assert (pids_cgroup / "pids.max").read_text().strip() == "64"
    assert str(hit.sandbox_dir / "fs") in tmpfs_mounts_under(str(hit.sandbox_dir))
    df = await hit.exec("df -m /app | tail -1")
    assert df.stdout.split()[1] == "64", df
    await asyncio.gather(cold.close(), hit.close())


async def test_consecutive_creates_use_pre_started_sandboxes(
    warm: LocalBackend, state_dir: Path
) -> None:
    first = await warm.create(SandboxSpec())
    await warm.pool_ready()
    assert open_bwraps(state_dir) == 3  # the one handed out and two warm
    warm_pids = set(bwrap_pids(str(state_dir))) - {first.bwrap_pid}
    second = await warm.create(SandboxSpec())
    third = await warm.create(SandboxSpec(labels={"other": "labels"}))
    assert warm.pool_hits == 2
    assert {second.bwrap_pid, third.bwrap_pid} == warm_pids
    assert len({first.id, second.id, third.id}) == 3
    for sandbox in (first, second, third):
        await sandbox.close()
    await warm.pool_ready()
    assert open_bwraps(state_dir) == 2  # refilled, and no more than the pool size


async def test_files_of_one_spec_never_appear_in_another(
    warm: LocalBackend, tmp_path: Path
) -> None:
    a = SandboxSpec(workdir="/app", files={"/app/a.txt": write(tmp_path / "a.txt", "A")})
    b = SandboxSpec(workdir="/app", files={"/app/b.txt": write(tmp_path / "b.txt", "B")})
    a2 = SandboxSpec(workdir="/app", files={"/app/a.txt": write(tmp_path / "a2.txt", "A2")})
    expected = {id(a): (["/app/a.txt"], "A"), id(b): (["/app/b.txt"], "B")}
    expected[id(a2)] = (["/app/a.txt"], "A2")
    for spec in (a, b, a2, b, a, a, b):
        await warm.pool_ready()
        async with await warm.create(spec) as sandbox:
            files, text = expected[id(spec)]
            assert await listing(sandbox) == files
            assert await cat(sandbox, *files) == text
            await sandbox.exec("echo planted > /app/planted; echo x > /tmp/x")
    assert warm.pool_hits == 6


async def test_a_used_sandbox_is_never_handed_out_again(
    warm: LocalBackend, state_dir: Path
) -> None:
    marker = new_marker()
    seen: set[str] = set()
    held = []
    for _ in range(6):
        await warm.pool_ready()
        sandbox = await warm.create(SandboxSpec(workdir="/app"))
        assert sandbox.id not in seen
        seen.add(sandbox.id)
        assert await listing(sandbox) == []
        assert await listing(sandbox, "/tmp") == []
        assert (await sandbox.exec(["pgrep", "-f", f"sleep {marker}"])).stdout == ""
        await sandbox.exec(f"echo used > /app/used; sleep {marker} >/dev/null 2>&1 &")
        held.append(sandbox)
        if len(held) == 2:  # keep some open, close others: neither comes back
            await held.pop(0).close()
    assert warm.pool_hits == 5
    assert len(host_pids(f"sleep\0{marker}")) == 1


async def test_aclose_leaves_nothing_behind(state_dir: Path) -> None:
    run_id = new_run_id()
    backend = LocalBackend(run_id=run_id, state_dir=state_dir, warm=3)
    limited = SandboxSpec(memory_mb=128, storage_mb=16)
    sandbox = await backend.create(limited)
    await backend.pool_ready()
    assert open_bwraps(state_dir) == 4
    await backend.create(SandboxSpec())  # refill of another kind under way at aclose
    await backend.aclose()
    assert sandbox.closed
    assert bwrap_pids(str(state_dir)) == []
    assert sandbox_cgroups(run_id) == []
    assert tmpfs_mounts_under(str(state_dir)) == []
    assert not (state_dir / run_id).exists()


@pytest.mark.parametrize("yields", [0, 1, 2, 3, 5, 8])
async def test_aclose_during_a_refill_leaves_nothing_behind(state_dir: Path, yields: int) -> None:
    """aclose cancels refills at every stage of a start (populate, bwrap, greeting, record)."""
    run_id = new_run_id()
    backend = LocalBackend(run_id=run_id, state_dir=state_dir, warm=2)
    await backend.create(SandboxSpec(memory_mb=128, storage_mb=16))
    for _ in range(yields):
        await asyncio.sleep(0)
    await backend.aclose()
    assert bwrap_pids(str(state_dir)) == []
    assert sandbox_cgroups(run_id) == []
    assert tmpfs_mounts_under(str(state_dir)) == []
    assert not (state_dir / run_id).exists()


async def test_the_least_recent_kind_is_evicted_and_its_sandboxes_closed(
    state_dir: Path,
) -> None:
    backend = LocalBackend(run_id=new_run_id(), state_dir=state_dir, warm=1)
    try:
        kinds = [SandboxSpec(hostname=f"kind{i}") for i in range(3)]
        for spec in kinds[:2]:
            await (await backend.create(spec)).close()
            await backend.pool_ready()
        assert open_bwraps(state_dir) == 2  # one warm sandbox per kind
        both_warm = set(bwrap_pids(str(state_dir)))
        await (await backend.create(kinds[0])).close()  # a hit: kind 0 is the most recent
        await backend.pool_ready()
        kind1_warm = set(bwrap_pids(str(state_dir))) & both_warm
        await (await backend.create(kinds[2])).close()  # evicts kind 1, the least recent
        await backend.pool_ready()
        assert open_bwraps(state_dir) == 2
        assert not set(bwrap_pids(str(state_dir))) & kind1_warm
        assert backend.pool_hits == 1
        async with await backend.create(kinds[1]) as sandbox:  # cold again
            assert (await sandbox.exec("hostname")).stdout == "kind1\n"
        assert backend.pool_hits == 1
        async with await backend.create(kinds[2]) as sandbox:
            assert (await sandbox.exec("hostname")).stdout == "kind2\n"
        assert backend.pool_hits == 2
    finally:
        await backend.aclose()


async def test_warm_zero_never_pre_starts(state_dir: Path) -> None:
    backend = LocalBackend(run_id=new_run_id(), state_dir=state_dir, warm=0)
    try:
        sandboxes = [await backend.create(SandboxSpec()) for _ in range(3)]
        await backend.pool_ready()
        await asyncio.gather(*(s.exec("true") for s in sandboxes))
        assert open_bwraps(state_dir) == 3
        await sandboxes[0].close()
        async with await backend.create(SandboxSpec()):
            assert open_bwraps(state_dir) == 3
        assert (backend.pool_hits, backend.pool_started) == (0, 0)
    finally:
        await backend.aclose()
    assert bwrap_pids(str(state_dir)) == []


def test_the_pool_size_comes_from_the_argument_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(WARM_ENV, raising=False)
    assert LocalBackend().warm == 0
    monkeypatch.setenv(WARM_ENV, "3")
    assert LocalBackend().warm == 3
    assert LocalBackend(warm=0).warm == 0
    assert make_backend("local", warm=5).warm == 5  # type: ignore[attr-defined]
    monkeypatch.setenv(WARM_ENV, "lots")
    with pytest.raises(ValueError, match=WARM_ENV):
        LocalBackend()
    with pytest.raises(ValueError, match="negative"):
        LocalBackend(warm=-1)


async def test_a_failed_refill_is_logged_and_the_next_create_is_cold(
    warm: LocalBackend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    spec = SandboxSpec(mounts=(Mount(data, "/data"),))
    with caplog.at_level(logging.WARNING, logger="palaestra.sandbox.local"):
        first = await warm.create(spec)
        data.rmdir()  # before the refill runs: it cannot bind /data
        await warm.pool_ready()
    assert "could not start a warm sandbox" in caplog.text
    assert (warm.pool_started, warm.pool_hits) == (0, 0)
    data.mkdir()
    async with await warm.create(spec) as second:
        assert (await second.exec("ls -d /data")).ok
    assert warm.pool_hits == 0
    await first.close()
    await warm.pool_ready()
    assert warm.pool_started == 2


async def test_a_warm_sandbox_that_died_is_not_handed_out(
    warm: LocalBackend, state_dir: Path
) -> None:
    first = await warm.create(SandboxSpec())
    await warm.pool_ready()
    victims = set(bwrap_pids(str(state_dir))) - {first.bwrap_pid}
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    await eventually(lambda: not set(bwrap_pids(str(state_dir))) & victims)
    ready = [s for pool in warm._pools.by_kind.values() for s in pool.ready]
    assert await eventually(lambda: not any(s._is_running() for s in ready))
    async with await warm.create(SandboxSpec()) as sandbox:
        assert (await sandbox.exec("echo alive")).stdout == "alive\n"
    assert warm.pool_hits == 0
    await first.close()


WARM_OWNER = """
import asyncio, os, signal, sys
from palaestra.sandbox.base import SandboxSpec
from palaestra.sandbox.local import LocalBackend

async def main(state_dir, run_id, fate):
    backend = LocalBackend(run_id, state_dir, warm=2)  # never aclose'd
    await backend.create(SandboxSpec(memory_mb=128, storage_mb=16))
    if fate != "refilling":
        await backend.pool_ready()
    print("ready", flush=True)
    if fate == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if fate == "wait":
        await asyncio.sleep(60)

asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.parametrize("fate", ["return", "refilling", "wait", "die"])
async def test_warm_sandboxes_of_an_exiting_or_dead_owner_are_reclaimed(
    state_dir: Path, fate: str
) -> None:
    """Exit (plain, mid-refill, SIGTERM) closes warm sandboxes; after SIGKILL the janitor does."""
    run_id = new_run_id()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        WARM_OWNER,
        str(state_dir),
        run_id,
        fate,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert await asyncio.wait_for(proc.stdout.readline(), 60) == b"ready\n"
    if fate == "wait":
        assert open_bwraps(state_dir) == 3
        proc.send_signal(signal.SIGTERM)
    await asyncio.wait_for(proc.wait(), 60)
    if fate == "die":
        assert await eventually(lambda: open_bwraps(state_dir) == 0)  # they die with their owner
        assert len(list((state_dir / run_id).iterdir())) == 3  # their records stay
        backend = LocalBackend(state_dir=state_dir)
        await (await backend.create(SandboxSpec())).close()  # reclaims before its first sandbox
        await backend.aclose()
    assert await eventually(lambda: bwrap_pids(str(state_dir)) == [])
    assert sandbox_cgroups(run_id) == []
    assert tmpfs_mounts_under(str(state_dir)) == []
    assert not (state_dir / run_id).exists()
