"""Hostile code, on every backend of the conftest ``backend`` fixture.

Each attack must be contained and visible in its ExecResult (exit code, timed_out, error text)
or the verifier's outcome, and while it runs a probe on the host (a process start and a
loopback round trip) must keep answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from palaestra import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.sandbox import Sandbox, SandboxBackend, SandboxSpec
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, MakeTask, bash_action
from tests.sandbox.probe import run_probe

LIMITED = SandboxSpec(workdir="/app", memory_mb=256, pids_limit=128, storage_mb=64, cpus=1)
#: The host must answer a probe within this, attack or not (a generous bound: no timing test).
PROBE_BOUND_S = 5.0


@contextlib.asynccontextmanager
async def host_probe() -> AsyncIterator[list[float]]:
    """Probe the host every 0.1 s while the block runs: start a process, and a loopback echo
    round trip. Yields the latencies; on exit asserts there were answers, all in bound."""

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    latencies: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        while not done.is_set():
            start = time.monotonic()
            proc = await asyncio.create_subprocess_exec("true")
            assert await proc.wait() == 0
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"ping\n")
            assert await reader.readline() == b"ping\n"
            writer.close()
            latencies.append(time.monotonic() - start)
            await asyncio.sleep(0.1)

    task = asyncio.create_task(probe())
    try:
        yield latencies
    finally:
        done.set()
        await asyncio.wait_for(task, 30)
        server.close()
        await server.wait_closed()
    assert latencies, "the host probe never answered during the attack"
    assert max(latencies) < PROBE_BOUND_S, latencies


#: Prints the command line of every process in the sandbox (images may lack ps).
COMMAND_LINES = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"


@pytest.fixture
async def limited(backend: SandboxBackend) -> AsyncIterator[Sandbox]:
    sandbox = await backend.create(LIMITED)
    yield sandbox
    await sandbox.close()


async def still_usable(sandbox: Sandbox) -> None:
    await sandbox.kill_all()
    assert (await sandbox.exec("echo usable", timeout=30)).stdout == "usable\n"


# -- resources -----------------------------------------------------------------------------------


@pytest.mark.slow
async def test_fork_bomb(limited: Sandbox) -> None:
    async with host_probe():
        res = await limited.exec(":(){ :|:& };:; sleep 60", timeout=5)
    assert res.timed_out, res
    assert "Resource temporarily unavailable" in res.stderr, res  # the pids limit, hit
    # The timeout killed the whole bomb, not only the command's own process.
    left = await limited.exec(f"{COMMAND_LINES} | grep -c .", timeout=30)
    assert int(left.stdout) <= 5, left  # pid 1, this shell, its loop's subshell, tr, grep
    await still_usable(limited)


async def test_memory_bomb(limited: Sandbox) -> None:
    async with host_probe():
        res = await limited.exec(
            "python3 -c 'import time; b = [bytearray(64 << 20) for _ in range(64)]; print(1)'",
            timeout=60,
        )
    assert res.stdout == "" and (
        res.oom_killed or res.exit_code in (-9, 137) or "MemoryError" in res.stderr
    ), res
    await still_usable(limited)


async def test_disk_filler(limited: Sandbox) -> None:
    async with host_probe():
        res = await limited.exec("dd if=/dev/zero of=/app/fill bs=1M count=256", timeout=60)
    assert res.exit_code != 0, res
    assert "No space left on device" in res.stderr or "quota exceeded" in res.stderr, res
    assert (await limited.exec("rm -f /app/fill && echo freed", timeout=30)).stdout == "freed\n"


async def test_cpu_spinner_past_its_timeout(limited: Sandbox) -> None:
    async with host_probe():
        started = time.monotonic()
        res = await limited.exec("while :; do :; done", timeout=1)
        elapsed = time.monotonic() - started
    assert res.timed_out and res.exit_code is None, res
    assert elapsed < 30, elapsed  # returns after its timeout, not never
    await still_usable(limited)


@pytest.mark.slow
async def test_daemon_outliving_its_command(limited: Sandbox) -> None:
    count = f"{COMMAND_LINES} | grep -c '^sleep 4242' || true"
    async with host_probe():
        # In the timed-out command's tree (even after setsid): killed with it.
        res = await limited.exec("(setsid sleep 4242 &); sleep 4242", timeout=1)
        assert res.timed_out
        assert (await limited.exec(count, timeout=30)).stdout.strip() == "0"
        # The same, run as another user than the sandbox's root.
        res = await limited.exec("(setsid sleep 4242 &); sleep 4242", timeout=1, user="nobody")
        assert res.timed_out
        assert (await limited.exec(count, timeout=30)).stdout.strip() == "0"
        # A finished command's daemon lives on, until kill_all.
        res = await limited.exec("(setsid nohup sleep 4242 >/dev/null 2>&1 &)", timeout=30)
        assert res.ok, res
        # (the daemon execs sleep a moment after its parent's exit: wait for it)
        wait = f"for i in $(seq 100); do [ $({count}) = 1 ] && break; sleep 0.05; done; {count}"
        assert (await limited.exec(wait, timeout=30)).stdout.strip() == "1"
        await limited.kill_all()
        assert (await limited.exec(count, timeout=30)).stdout.strip() == "0"


async def test_reward_rewriter_after_the_agent_ends(
    backend: SandboxBackend, make_task: MakeTask
) -> None:
    """The agent leaves a daemon that keeps writing a perfect reward; the verifier's counts."""
    task = make_task(
        test_sh="echo 0 > /logs/verifier/reward.txt; sleep 1; echo verifier-done\n",
        verifier_timeout=60,
    )
    rewriter = (
        "(setsid nohup sh -c 'while :; do echo 1 > /logs/verifier/reward.txt; "
        'echo {\\"reward\\": 1} > /logs/verifier/reward.json; sleep 0.05; done\' '
        ">/dev/null 2>&1 &)"
    )
    policy = ScriptedPolicy([bash_action(rewriter), SUBMIT_ACTION])
    async with CodeEnv(TaskSet.from_dir(task), sandbox=backend) as env:
        episode = await rollout(env, policy)
    assert episode.status != "error", episode.end
    assert episode.reward == 0.0
    assert "verifier-done" in episode.end.verifier.output


# -- network -------------------------------------------------------------------------------------


def _host_address() -> str | None:
    """This host's address on its default route, if any."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent
            return str(s.getsockname()[0])
        except OSError:
            return None


CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
    print("connected")
except OSError as exc:
    print("refused:", exc)
"""


async def test_network_egress(limited: Sandbox) -> None:
    accepted: list[bool] = []

    async def note(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(True)
        writer.close()

    server = await asyncio.start_server(note, "0.0.0.0", 0)
    port = server.sockets[0].getsockname()[1]
    targets = [("127.0.0.1", port), ("1.1.1.1", 53), ("8.8.8.8", 443)]
    if (address := _host_address()) is not None:
        targets.append((address, port))
    try:
        async with host_probe():
            for host, target_port in targets:
                res = await limited.exec(
                    ["python3", "-c", CONNECT, host, str(target_port)], timeout=30
                )
                assert res.stdout.startswith("refused:"), (host, res)
    finally:
        server.close()
        await server.wait_closed()
    assert accepted == []


# -- secrets and the host ------------------------------------------------------------------------


async def test_host_environment_is_invisible(
    backend: SandboxBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PALAESTRA_HOSTILE_SECRET", "s3cr3t-token")
    async with await backend.create(LIMITED) as sandbox:
        res = await sandbox.exec(
            "env; cat /proc/1/environ /proc/*/environ 2>/dev/null | tr '\\0' '\\n'", timeout=30
        )
        assert "s3cr3t-token" not in res.stdout and "PALAESTRA_HOSTILE_SECRET" not in res.stdout


PROJECT = Path(__file__).resolve().parents[2]


def _host_hashes() -> list[str]:
    """The lines of the host's /etc/shadow that hold a password hash."""
    try:
        lines = Path("/etc/shadow").read_text().splitlines()
    except OSError:
        return []
    return [line for line in lines if line.split(":")[1:2] and line.split(":")[1].startswith("$")]


async def test_host_files_are_invisible(limited: Sandbox, tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("s3cr3t-file")
    project = PROJECT
    res = await limited.exec(
        f"cat /etc/shadow; cat {secret}; ls {project}; cat {project}/pyproject.toml; "
        f"grep -rl s3cr3t-file /tmp /root /home /work 2>/dev/null; echo end",
        timeout=60,
    )
    assert "s3cr3t-file" not in res.stdout and "palaestra" not in res.stdout, res
    # The host's password hashes (an image's own /etc/shadow may show: it is not the host's).
    assert not any(line in res.stdout for line in await asyncio.to_thread(_host_hashes))
    assert res.stdout.endswith("end\n")


async def test_host_processes_cannot_be_signalled(limited: Sandbox) -> None:
    victim = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        async with host_probe():
            res = await limited.exec(
                f"kill -9 {victim.pid}; kill -9 -1; pkill -9 sleep; echo tried", timeout=30
            )
        assert "tried" in res.stdout
        await asyncio.sleep(0.2)
        assert victim.returncode is None
        assert await asyncio.to_thread(os.waitpid, victim.pid, os.WNOHANG) == (0, 0)
    finally:
        victim.kill()
        await victim.wait()


async def test_escapes_through_proc_and_sys(limited: Sandbox) -> None:
    project = PROJECT
    attempts = {
        "host root via /proc/1/root": f"ls /proc/1/root{project}",
        "kernel core": "head -c 16 /proc/kcore > /dev/null",
        "mount": "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m",
        "remount /": "mount -o remount,rw /",
        # Each file only where it exists: creating a file in an empty tmpfs is no escape.
        **{
            f"cgroup {f}": f"test -f /sys/fs/cgroup/{f} && echo -1 > /sys/fs/cgroup/{f}"
            for f in ("memory/memory.limit_in_bytes", "pids/pids.max", "memory.max", "pids.max")
        },
        "device nodes": "mknod /tmp/sda b 8 0",
        "namespaces of pid 1": "nsenter -t 1 -m -u -n -p true",
    }
    async with host_probe():
        for name, attempt in attempts.items():
            res = await limited.exec(attempt, timeout=30)
            assert res.exit_code != 0, (name, res)
    await still_usable(limited)


@pytest.mark.parametrize("user", [None, "nobody"], ids=["root", "nobody"])
async def test_kernel_tunables_are_read_only(limited: Sandbox, user: str | None) -> None:
    """No file under /proc/sys opens for writing, nor /proc/sysrq-trigger (kernel.core_pattern
    names a program the kernel runs as the host's root). The probe walks all of /proc/sys and
    opens each file for writing without writing, so a tunable missing from this kernel cannot
    make this pass, and a tunable that were writable is never changed."""
    lines = await run_probe(limited, user=user, only="write /proc/sys")
    tunables, sysrq = lines["write /proc/sys"], lines["write /proc/sysrq-trigger"]
    walked = re.fullmatch(r"none of (\d+) files writable", tunables.result)
    assert walked and int(walked[1]) > 0, (tunables.result, sorted(tunables.exposed)[:20])
    assert not sysrq.exposed, sysrq


#: io_uring_setup(4 entries): prints the call's result and errno.
IO_URING_SETUP = (
    "python3 -c 'import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
    "p = ctypes.create_string_buffer(120); "
    "print(libc.syscall(425, 4, p), ctypes.get_errno())'"
)


@pytest.mark.parametrize("backend", ["local"], indirect=True)
@pytest.mark.parametrize("user", [None, "nobody"], ids=["root", "nobody"])
async def test_io_uring_cannot_bypass_the_filter(limited: Sandbox, user: str | None) -> None:
    """io_uring's operations run outside seccomp: a ring's IORING_OP_SOCKET makes the AF_VSOCK
    socket the filter denies to socket(2) (vsock ignores network namespaces: the VM's host
    answers it), and the ring is a large kernel surface. The local filter denies io_uring, as
    Docker's default profile does since Docker 25."""
    res = await limited.exec(IO_URING_SETUP, user=user, timeout=30)
    result, err = res.stdout.split()
    assert (result, err) == ("-1", "1"), res  # EPERM
