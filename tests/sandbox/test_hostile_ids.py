"""Hostile code against the sandbox's ids, cgroups and CPU share (issue 28, items 2, 4 and 5), on
every backend of the conftest ``backend`` fixture where the attack applies.

Docker's half of item 2 (root inside is an unprivileged uid outside) needs an engine run with
userns-remap: tests/sandbox/test_docker_remap.py holds it.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from palaestra.sandbox import SandboxBackend, SandboxSpec
from palaestra.sandbox import limits as limits_mod
from palaestra.sandbox.local import LocalSandbox
from palaestra.sandbox.local.snapshot import LocalSnapshot
from palaestra.sandbox.local.userns import ID_COUNT, id_base
from tests.procs import eventually, host_pids, new_marker


def host_ids(pid: int) -> tuple[int, int]:
    """The real uid and gid of host process ``pid``."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    uid = next(line for line in status if line.startswith("Uid:")).split()[1]
    gid = next(line for line in status if line.startswith("Gid:")).split()[1]
    return int(uid), int(gid)


@pytest.mark.parametrize("backend", ["local", "local-python"], indirect=True)
async def test_root_inside_is_the_ranges_first_uid_outside(
    backend: SandboxBackend, tmp_path: Path
) -> None:
    """Root's and nobody's processes are the range's uids on the host; a file root makes in
    the sandbox belongs to the range's first uid on the host; host files keep their owners."""
    marker = new_marker()
    async with await backend.create(SandboxSpec(workdir="/app")) as sandbox:
        assert (await sandbox.exec("cat /proc/self/uid_map")).stdout.split() == [
            "0",
            str(id_base()),
            str(ID_COUNT),
        ]
        await sandbox.exec(f"(setsid sleep 1000 {marker} &)", timeout=10)
        await sandbox.exec(f"(setsid sleep 1000 {marker} &)", user="nobody", timeout=10)
        assert await eventually(lambda: len(host_pids(marker)) == 2)
        ids = sorted([await asyncio.to_thread(host_ids, pid) for pid in host_pids(marker)])
        assert ids == [(id_base(), id_base()), (id_base() + 65534, id_base() + 65534)]
        made = await sandbox.exec("touch /app/made && stat -c '%u %g' /app/made")
        assert made.stdout == "0 0\n", made
        backing = sandbox.sandbox_dir / "fs" / "app" / "made"  # type: ignore[attr-defined]
        st = await asyncio.to_thread(os.stat, backing)
        assert (st.st_uid, st.st_gid) == (id_base(), id_base())
        # The host's root files are nobody's inside, and root inside has no rights on them.
        usr = await sandbox.exec("stat -c '%u' /usr/bin; touch /usr/bin/x; echo $?")
        assert usr.stdout.split() == ["65534", "1"], usr


async def test_no_cgroup_can_be_made_or_joined(backend: SandboxBackend) -> None:
    """An agent cannot reach a cgroup hierarchy to make a cgroup of its own, raise a limit or
    leave its command's cgroup: no cgroupfs is writable, none can be mounted, not even in a new
    user namespace."""
    attempts = {
        # Only in a cgroup hierarchy (Docker's /sys/fs/cgroup on v1 is a tmpfs holding them).
        "make a cgroup": "for d in /sys/fs/cgroup /sys/fs/cgroup/*; do"
        " test -f $d/cgroup.procs && mkdir $d/agent && exit 0; done; exit 1",
        "join a cgroup": "for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs; do"
        " test -f $f && echo $$ > $f && exit 0; done; exit 1",
        "mount cgroup v1": "mkdir -p /tmp/cg && mount -t cgroup -o freezer none /tmp/cg",
        "mount cgroup2": "mkdir -p /tmp/cg2 && mount -t cgroup2 none /tmp/cg2",
        "mount in a new user namespace": "unshare -Urm mount -t cgroup2 none /tmp",
        "a new user namespace": "unshare -U true",
    }
    async with await backend.create(SandboxSpec(workdir="/app")) as sandbox:
        for name, attempt in attempts.items():
            res = await sandbox.exec(attempt, timeout=30)
            assert res.exit_code != 0, (name, res)


def cpu_cgroup_of(pid: int) -> Path:
    """The cgroup whose CPU weight schedules ``pid`` (v1: its cpu hierarchy's; v2: its own)."""
    text = Path(f"/proc/{pid}/cgroup").read_text()
    entries = [line.split(":", 2) for line in text.splitlines()]
    if limits_mod.cgroup_version() == 1:
        path = next(p for _, cs, p in entries if "cpu" in cs.split(","))
        return limits_mod.CGROUP_ROOT / "cpu" / path.lstrip("/")
    path = next(p for _, cs, p in entries if cs == "")
    return limits_mod.CGROUP_ROOT / path.lstrip("/")


def weight(cgroup: Path) -> str:
    """Its CPU weight: v1's cpu.shares, v2's cpu.weight."""
    v1 = cgroup / "cpu.shares"
    return (v1 if v1.exists() else cgroup / "cpu.weight").read_text().strip()


async def test_each_sandbox_has_a_cpu_weight_of_its_own(backend: SandboxBackend) -> None:
    """Without a CPU limit too, a sandbox's commands run in a cpu cgroup of its own with a
    Docker container's default weight (v1 cpu.shares 1024, v2 cpu.weight 100), not in their
    creator's."""
    markers = [new_marker(), new_marker()]
    async with (
        await backend.create(SandboxSpec()) as first,
        await backend.create(SandboxSpec()) as second,
    ):
        for sandbox, marker in zip((first, second), markers, strict=True):
            await sandbox.exec(f"(setsid sleep 1000 {marker} &)", timeout=5)
        assert await eventually(lambda: all(len(host_pids(m)) == 1 for m in markers))
        cgroups = [await asyncio.to_thread(cpu_cgroup_of, host_pids(m)[0]) for m in markers]
        mine = await asyncio.to_thread(cpu_cgroup_of, os.getpid())
        assert len({mine, *cgroups}) == 3, cgroups
        expected = "1024" if limits_mod.cgroup_version() == 1 else "100"
        assert [await asyncio.to_thread(weight, c) for c in cgroups] == [expected] * 2


async def run_as_nobody(path: Path) -> str:
    """What ``path`` prints when a host user with no tie to the sandboxes (``nobody``) runs it
    (an error message when it cannot)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            str(path),
            user=65534,
            group=65534,
            extra_groups=[],
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    except PermissionError as exc:
        return str(exc)
    out, _ = await proc.communicate()
    return out.decode()


@pytest.mark.parametrize("backend", ["local"], indirect=True)
async def test_set_id_files_are_no_way_into_the_range_from_the_host(
    backend: SandboxBackend,
) -> None:
    """A set-id program that root inside makes is set-id to the range's first uid on the host
    (bwrap's binds are nosuid only inside): a host user that could run it from the sandbox's
    directory, or from a snapshot of it, would become the owner of every local sandbox's user
    namespace. Neither is reachable by the host's other users."""
    async with await backend.create(SandboxSpec(workdir="/app")) as sandbox:
        assert isinstance(sandbox, LocalSandbox)
        made = await sandbox.exec("cp /usr/bin/id /tmp/sid && chmod 6755 /tmp/sid")
        assert made.exit_code == 0, made
        snapshot = await sandbox.snapshot()
        assert isinstance(snapshot, LocalSnapshot)
        try:
            for planted in (sandbox.sandbox_dir / "fs/tmp/sid", snapshot.files / "tmp/sid"):
                st = await asyncio.to_thread(os.stat, planted)
                assert st.st_mode & 0o6000 == 0o6000  # the set-id bits are there on the host
                out = await run_as_nobody(planted)
                assert f"euid={id_base()}" not in out and f"egid={id_base()}" not in out, out
        finally:
            await snapshot.release()
