"""Limits, secrets and root filesystems of the local backend, on the real kernel."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from palaestra.sandbox import SandboxError, SandboxSpec
from palaestra.sandbox import limits as limits_mod
from palaestra.sandbox.local import LocalBackend
from tests.procs import eventually, host_pids, new_marker
from tests.sandbox.conftest import RUN_PREFIX, build_test_rootfs, new_run_id

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0, reason="needs bubblewrap, as root"
)
needs_cgroups = pytest.mark.skipif(
    limits_mod.cgroup_version() is None, reason="needs cgroup v1 or v2 mounted"
)


def read(*path: str) -> str:
    return Path(*path).read_text()


def exists(path: str) -> bool:
    return os.path.exists(path)


@pytest.fixture
async def backend(tmp_path: Path, helper: str) -> AsyncIterator[LocalBackend]:
    backend = LocalBackend(run_id=new_run_id(), state_dir=tmp_path / "state")
    yield backend
    await backend.aclose()


@needs_cgroups
async def test_memory_limit_oom_kills_inside_and_reports_it(backend: LocalBackend) -> None:
    async with await backend.create(SandboxSpec(memory_mb=64)) as sandbox:
        assert "memory 64 MiB" in sandbox.limits
        res = await sandbox.exec(
            "python3 -c 'b = bytearray(256 << 20); print(\"survived\")'", timeout=60
        )
        assert res.exit_code in (-9, 137) and res.oom_killed and "survived" not in res.stdout, res
        ok = await sandbox.exec("python3 -c 'b = bytearray(16 << 20); print(len(b))'")
        assert ok.ok and not ok.oom_killed and ok.stdout == f"{16 << 20}\n", ok


FORKER = """
import errno, os, time
for n in range(200):
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    except OSError as exc:
        print("stopped at", n, errno.errorcode[exc.errno])
        break
"""


@needs_cgroups
async def test_pids_limit_stops_a_fork_bomb(backend: LocalBackend) -> None:
    async with await backend.create(SandboxSpec(pids_limit=40)) as sandbox:
        assert "pids 40" in sandbox.limits
        res = await sandbox.exec(["python3", "-c", FORKER], timeout=20)
        assert res.exit_code == 0 and res.stdout.startswith("stopped at "), res
        assert int(res.stdout.split()[2]) < 40
        await sandbox.kill_all()
        assert (await sandbox.exec("echo alive")).stdout == "alive\n"


@pytest.mark.slow
@needs_cgroups
async def test_cpu_limit_throttles(backend: LocalBackend) -> None:
    async with await backend.create(SandboxSpec(cpus=0.05)) as sandbox:
        assert "cpus 0.05" in sandbox.limits
        res = await sandbox.exec("timeout 2 sh -c 'while :; do :; done'", timeout=10)
        assert res.exit_code == 124, res
        cgroups = sandbox._limits.cgroups  # type: ignore[union-attr]
        cpu_dir = next((p for p in cgroups if "/cpu/" in p), cgroups[0])  # v1, else v2's one
        stat = read(cpu_dir, "cpu.stat")
        throttled = dict(line.split() for line in stat.splitlines())["nr_throttled"]
        assert int(throttled) > 0, stat


async def test_storage_quota_gives_enospc(backend: LocalBackend) -> None:
    async with await backend.create(SandboxSpec(workdir="/app", storage_mb=8)) as sandbox:
        assert "storage 8 MiB" in sandbox.limits
        res = await sandbox.exec("dd if=/dev/zero of=/app/fill bs=1M count=64", timeout=30)
        assert res.exit_code != 0 and "No space left on device" in res.stderr, res
        # The quota is shared by every writable directory.
        res = await sandbox.exec("dd if=/dev/zero of=/tmp/more bs=1M count=4", timeout=30)
        assert "No space left on device" in res.stderr, res
        assert (await sandbox.exec("rm /app/fill && echo ok > /tmp/x && cat /tmp/x")).ok


async def test_rlimit_fallback_without_cgroups(
    backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits_mod, "cgroup_version", lambda: None)
    async with await backend.create(SandboxSpec(memory_mb=200)) as sandbox:
        assert sandbox.limits.startswith("rlimits (")
        assert "pids and cpus not enforced" in sandbox.limits
        res = await sandbox.exec("python3 -c 'b = bytearray(512 << 20)'", timeout=30)
        assert res.exit_code == 1 and "MemoryError" in res.stderr, res


@needs_cgroups
async def test_setsid_double_fork_is_killed_with_its_command(backend: LocalBackend) -> None:
    marker = new_marker()
    async with await backend.create(SandboxSpec()) as sandbox:
        # The grandchild leaves the session and the process group, and is re-parented to
        # pid 1: only its cgroup still ties it to the command.
        escape = f"(setsid sh -c 'sleep {marker}' &) ; sleep {marker}"
        res = await sandbox.exec(escape, timeout=1)
        assert res.timed_out
        assert await eventually(lambda: host_pids(marker) == [], within=5)
        # A finished command's escaped daemon lives on until kill_all.
        res = await sandbox.exec(f"(setsid sh -c 'sleep {marker}' &)", timeout=5)
        assert res.ok
        assert await eventually(lambda: len(host_pids(marker)) == 2)
        await sandbox.kill_all()
        assert host_pids(marker) == []


@needs_cgroups
async def test_cgroups_are_made_and_removed(backend: LocalBackend) -> None:
    sandbox = await backend.create(SandboxSpec(memory_mb=128, pids_limit=77))
    paths = list(sandbox._limits.cgroups)  # type: ignore[union-attr]
    assert paths and all(exists(p) for p in paths)
    procs = read(paths[0], "cgroup.procs").split()
    assert len(procs) == 1  # the helper: every command will start inside
    await sandbox.exec("sleep 0.1 & true")
    await sandbox.close()
    assert not any(exists(p) for p in paths)


@needs_cgroups
async def test_close_kills_and_removes_a_command_cgroup_left_frozen(backend: LocalBackend) -> None:
    """Seen in CI: the sandbox's close killed the helper while it was freezing a command to
    kill it (a cancelled exec), leaving the command's cgroup frozen, where SIGKILL waits for a
    thaw: the processes and every cgroup of the sandbox stayed for good."""
    marker = new_marker()
    sandbox = await backend.create(SandboxSpec())
    paths = list(sandbox._limits.cgroups)  # type: ignore[union-attr]
    running = asyncio.ensure_future(sandbox.exec(f"sleep 1000 {marker}"))
    assert await eventually(lambda: len(host_pids(marker)) == 1)

    def freeze_the_command() -> list[Path]:
        """What an interrupted freeze-kill-thaw leaves: the command's cgroup frozen."""
        frozen = []
        for path in paths:
            for child in Path(path).iterdir():
                for name, value in (("freezer.state", "FROZEN"), ("cgroup.freeze", "1")):
                    if child.is_dir() and (child / name).exists():
                        (child / name).write_text(value)
                        frozen.append(child)
        return frozen

    assert await asyncio.to_thread(freeze_the_command)
    await asyncio.wait_for(sandbox.close(), 30)
    with pytest.raises(SandboxError):
        await running
    assert await eventually(lambda: host_pids(marker) == [], within=5)
    assert not any(exists(p) for p in paths)


async def test_host_secrets_are_hidden(backend: LocalBackend) -> None:
    async with await backend.create(SandboxSpec()) as sandbox:
        res = await sandbox.exec("cat /etc/shadow /etc/gshadow", timeout=10)
        assert res.exit_code != 0 and res.stdout == "", res
        assert "root:" in (await sandbox.exec("cat /etc/passwd")).stdout
        assert (await sandbox.exec("test -r /etc/hosts && test -d /etc/ssl/certs")).ok
        if exists("/etc/ssl/private"):
            assert (await sandbox.exec("ls -A /etc/ssl/private")).stdout == ""


# -- root filesystems ----------------------------------------------------------------------------


async def test_rootfs_runs_on_it_with_a_discarded_overlay(
    backend: LocalBackend, test_rootfs: Path
) -> None:
    spec = SandboxSpec(rootfs=test_rootfs)
    async with await backend.create(spec) as sandbox:
        assert (await sandbox.exec("cat /etc/os-release")).stdout == "ID=palaestra-test-rootfs\n"
        res = await sandbox.exec(
            "echo changed > /usr/bin/dd; echo new > /etc/added; cat /etc/added"
        )
        assert res.ok and res.stdout == "new\n", res
        assert (await sandbox.exec(["python3", "-c", "print(6 * 7)"])).stdout == "42\n"
    assert not (test_rootfs / "etc/added").exists()
    assert (test_rootfs / "usr/bin/dd").stat().st_size > 1000  # untouched
    async with await backend.create(spec) as sandbox:  # a reset: fresh overlay
        assert (await sandbox.exec("test -e /etc/added")).exit_code == 1


async def test_rootfs_without_python_or_shell_runs(backend: LocalBackend, tmp_path: Path) -> None:
    """The helper brings its own runtime: a distroless-like root (no python3, no /bin/sh) works,
    and its users come from its own /etc/passwd."""
    rootfs = build_test_rootfs(tmp_path / "bare-root", commands=("cat", "id"))
    (rootfs / "etc/passwd").write_text("root:x:0:0::/root:/x\napp:x:1234:99::/home/app:/x\n")
    async with await backend.create(SandboxSpec(rootfs=rootfs)) as sandbox:
        assert not (rootfs / "usr/bin/python3").exists() and not (rootfs / "bin/sh").exists()
        res = await sandbox.exec(["cat", "/etc/os-release"])
        assert res.stdout == "ID=palaestra-test-rootfs\n", res
        assert (await sandbox.exec(["sh", "-c", "true"])).exit_code == 127
        res = await sandbox.exec(["id", "-u"], user="app", env={"SEEN": "1"})
        assert res.stdout == "1234\n", res


async def test_bad_rootfs_specs_are_clear_errors(backend: LocalBackend, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="is not a directory"):
        await backend.create(SandboxSpec(rootfs=tmp_path / "missing"))
    with pytest.raises(SandboxError, match="rootfs"):
        await backend.create(SandboxSpec(image="debian:bookworm"))


async def test_concurrent_limited_sandboxes(backend: LocalBackend, test_rootfs: Path) -> None:
    specs = [
        SandboxSpec(memory_mb=64, storage_mb=16, rootfs=test_rootfs if i % 2 else None)
        for i in range(6)
    ]
    sandboxes = await asyncio.gather(*(backend.create(s) for s in specs))
    try:
        outs = await asyncio.gather(*(s.exec("echo $((6*7))") for s in sandboxes))
        assert [o.stdout for o in outs] == ["42\n"] * 6
    finally:
        await asyncio.gather(*(s.close() for s in sandboxes))


@needs_cgroups
async def test_janitor_removes_orphaned_empty_cgroups_only(
    backend: LocalBackend, tmp_path: Path
) -> None:
    live = await backend.create(SandboxSpec(memory_mb=64))
    # A record-less leftover: cgroups made, then the state directory lost.
    orphan = await asyncio.to_thread(
        limits_mod.apply_limits, SandboxSpec(memory_mb=64), f"{new_run_id()}.sb-orphan", tmp_path
    )
    orphan.close_fds()
    assert all(exists(p) for p in orphan.cgroups)
    await asyncio.to_thread(limits_mod.reclaim_empty_cgroups, 0.0, RUN_PREFIX)
    assert not any(exists(p) for p in orphan.cgroups)
    assert all(exists(p) for p in live._limits.cgroups)  # type: ignore[union-attr]
    assert (await live.exec("echo alive")).stdout == "alive\n"
    await live.close()


async def test_commands_inherit_no_helper_descriptors(backend: LocalBackend) -> None:
    """The helper holds cgroup directories (writing their limits would lift them) and the
    protocol pipes: a command gets stdin, stdout and stderr only."""
    async with await backend.create(SandboxSpec(memory_mb=128)) as sandbox:
        for cmd in ("ls /proc/self/fd", ["ls", "/proc/self/fd"]):
            res = await sandbox.exec(cmd)
            assert res.stdout.split() == ["0", "1", "2", "3"], res  # 3: ls reading the dir
        res = await sandbox.exec(["ls", "/proc/self/fd"], user="nobody")
        assert res.stdout.split() == ["0", "1", "2", "3"], res


def _cgroup2_mount() -> tuple[str, list[str]] | None:
    """(mount point, hierarchy options) of the cgroup2 mount, if there is one."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        if fields[sep + 1] == "cgroup2":
            return fields[4], fields[sep + 3].split(",")
    return None


def _remount_cgroup2(target: str, data: str) -> None:
    limits_mod.mount("cgroup2", target, "cgroup2", data, flags=32)  # MS_REMOUNT


@pytest.mark.skipif(_cgroup2_mount() is None, reason="needs a cgroup2 mount (v2 or hybrid)")
async def test_cgroup_moves_are_made_cheap_once(
    backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first sandbox turns on favordynmods (cgroup moves without an RCU grace period),
    keeping the hierarchy's other options; PALAESTRA_CGROUP_FAVORDYNMODS=0 leaves it alone."""
    target, options = _cgroup2_mount()  # type: ignore[misc]
    kept = [o for o in options if o not in ("rw", "ro", "favordynmods")]
    _remount_cgroup2(target, ",".join(kept))
    try:
        monkeypatch.setenv(limits_mod.FAVOR_DYNMODS_ENV, "0")
        limits_mod.favor_dynamic_moves.cache_clear()
        assert limits_mod.favor_dynamic_moves().startswith("off")
        assert "favordynmods" not in _cgroup2_mount()[1]  # type: ignore[index]

        monkeypatch.delenv(limits_mod.FAVOR_DYNMODS_ENV)
        limits_mod.favor_dynamic_moves.cache_clear()
        async with await backend.create(SandboxSpec()) as sandbox:
            assert (await sandbox.exec(["true"])).ok
        after = _cgroup2_mount()[1]  # type: ignore[index]
        assert "favordynmods" in after and all(o in after for o in kept), after
    finally:
        if "favordynmods" not in _cgroup2_mount()[1]:  # type: ignore[index]
            _remount_cgroup2(target, ",".join([*kept, "favordynmods"]))
