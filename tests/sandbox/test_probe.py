"""The local sandbox against Docker's default profile, line by line (issue 28).

One probe (``tests/sandbox/probe/probe.c``: capabilities, seccomp, no_new_privs, writes under
/proc/sys and Docker's other read-only paths, reads of Docker's masked paths, namespace creation,
mount, mknod and the syscalls Docker's seccomp profile refuses) runs in a local sandbox and in a
real Docker container of the docker backend, on this machine, at the same time. The local sandbox
must expose nothing on any line that the container does not: the container is the floor.
``benchmarks/probe_table.py`` prints the same comparison as the table in docs/sandbox.md.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator

import pytest

from palaestra.sandbox import SandboxSpec
from palaestra.sandbox.docker import DockerBackend
from palaestra.sandbox.local import LocalBackend
from tests.sandbox.conftest import new_run_id
from tests.sandbox.docker_support import needs_docker
from tests.sandbox.probe import markdown_table, run_probe, weaker_lines

#: Checks the probe must have run on both sides (more may run: ioperm and iopl on x86_64).
CORE_CHECKS = {
    "capabilities: effective",
    "capabilities: bounding",
    "seccomp mode",
    "no_new_privs",
    "write /proc/sys",
    "write /proc/sysrq-trigger",
    "read /proc/kcore",
    "read /proc/keys",
    "read /proc/timer_list",
    "read /proc/sched_debug",
    "read /sys/firmware",
    "read /proc/acpi",
    "read /proc/scsi",
    "unshare user namespace",
    "unshare mount namespace",
    "unshare network namespace",
    "unshare pid namespace",
    "unshare uts namespace",
    "mount tmpfs",
    "mount tmpfs in a new user namespace",
    "mknod block device",
    "mknod char device",
    "sethostname",
    "keyctl",
    "bpf",
    "perf_event_open",
    "kexec_load",
    "init_module",
    "finit_module",
    "ptrace another process",
    "clone3 with CLONE_NEWUSER",
    "setns",
    "personality READ_IMPLIES_EXEC",
    "acct",
    "swapon",
    "reboot",
    "syslog (read the kernel log)",
    "userfaultfd",
    "open_by_handle_at",
    "chroot",
}


@pytest.fixture
async def local_backend(helper: str) -> AsyncIterator[LocalBackend]:
    if shutil.which("bwrap") is None or os.geteuid() != 0:
        pytest.skip("the local backend needs bubblewrap, as root: scripts/install-system-deps.sh")
    backend = LocalBackend(run_id=new_run_id())
    try:
        yield backend
    finally:
        await asyncio.wait_for(backend.aclose(), 60)


@pytest.fixture
async def docker_backend() -> AsyncIterator[DockerBackend]:
    backend = DockerBackend(run_id=new_run_id())
    try:
        yield backend
    finally:
        await asyncio.wait_for(backend.aclose(), 60)


@needs_docker
async def test_local_sandbox_is_no_weaker_than_docker(
    local_backend: LocalBackend, docker_backend: DockerBackend
) -> None:
    spec = SandboxSpec()
    async with (
        await local_backend.create(spec) as local,
        await docker_backend.create(spec) as container,
    ):
        ours, docker = await asyncio.gather(run_probe(local), run_probe(container))
    table = markdown_table(docker, ours)
    # The probe sees what Docker's profile does (so a line cannot pass by seeing nothing).
    assert CORE_CHECKS <= set(docker) and set(docker) == set(ours), table
    assert docker["seccomp mode"].result == "2 (filter)", table
    assert "cap_chown" in docker["capabilities: effective"].exposed, table
    assert not docker["unshare user namespace"].exposed, table
    assert docker["write /proc/sys"].result.startswith("none of "), table
    weaker = weaker_lines(ours, docker)
    assert not weaker, (
        "the local sandbox lets its processes do more than Docker's default profile:\n"
        + "\n".join(weaker)
        + "\n\n"
        + table
    )
