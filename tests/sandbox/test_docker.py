"""The docker backend against the real engine (no test doubles).

Skipped, with the how-to, where no engine answers; a failure instead in CI (see
tests/sandbox/docker_support.py). Container processes are visible in the host's /proc, so a
random ``marker`` in their command lines proves that something is, or is no longer, running.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiodocker
import pytest

from palaestra.sandbox import make_backend
from palaestra.sandbox.base import SandboxClosedError, SandboxError, SandboxSpec
from palaestra.sandbox.btrfs_quota import quota_mode
from palaestra.sandbox.docker import (
    DEFAULT_IMAGE,
    SANDBOX_LABEL,
    DockerBackend,
    DockerSandbox,
    docker_socket,
)
from palaestra.sandbox.docker_janitor import OWNER_LABEL, owner_label, reclaim_docker_leftovers
from palaestra.sandbox.images import build_image
from palaestra.sandbox.janitor import RUN_ID_LABEL
from palaestra.sandbox.limits import DEFAULT_PIDS_LIMIT
from tests.procs import eventually, host_pids, new_marker
from tests.sandbox.docker_support import labelled_containers, requires_docker

pytestmark = requires_docker


#: The data root scripts/provision-docker.sh mounts: a filesystem with disk quotas.
PROVISIONED_DATA_ROOT = "/var/lib/palaestra/docker"


async def inspect(container_id: str) -> dict:
    async with aiodocker.Docker(url=f"unix://{docker_socket()}") as docker:
        return await docker.containers.container(container_id).show()


@pytest.fixture(autouse=True)
async def no_container_left() -> AsyncIterator[None]:
    before = set(await labelled_containers())
    yield
    assert set(await labelled_containers()) <= before, "a test left a container behind"


@pytest.fixture
async def backend() -> AsyncIterator[DockerBackend]:
    backend = DockerBackend(run_id=f"test-{new_marker()}")
    yield backend
    await backend.aclose()


@pytest.fixture
async def sandbox(backend: DockerBackend) -> AsyncIterator[DockerSandbox]:
    sandbox = await backend.create(SandboxSpec(workdir="/app", env={"SPEC_VAR": "from-spec"}))
    yield sandbox
    await sandbox.close()


# -- exec ----------------------------------------------------------------------------------------


async def test_stdout_stderr_exit_code_cwd_env(sandbox: DockerSandbox) -> None:
    res = await sandbox.exec("echo out; echo err >&2; exit 3")
    assert (res.stdout, res.stderr, res.exit_code, res.timed_out) == ("out\n", "err\n", 3, False)
    assert (await sandbox.exec("pwd")).stdout == "/app\n"
    assert (await sandbox.exec("pwd", cwd="/tmp")).stdout == "/tmp\n"
    res = await sandbox.exec('echo "$SPEC_VAR $EXTRA"', env={"EXTRA": "x"})
    assert res.stdout == "from-spec x\n"
    assert (await sandbox.exec(["no-such-command"])).exit_code == 127
    assert (await sandbox.exec("kill -TERM $$")).exit_code == -signal.SIGTERM
    assert (await sandbox.exec("hostname")).stdout == "sandbox\n"


async def test_stdin_and_user(sandbox: DockerSandbox) -> None:
    data = os.urandom(3 << 20)  # far beyond a pipe's buffer and the engine's frame size
    res = await sandbox.exec(["sha256sum"], stdin=data)
    assert res.stdout.split()[0] == hashlib.sha256(data).hexdigest()
    res = await sandbox.exec('echo "$(id -u) $HOME"', user="nobody")
    assert res.stdout == "65534 /nonexistent\n"


async def test_concurrent_execs_on_one_sandbox(sandbox: DockerSandbox) -> None:
    results = await asyncio.gather(*(sandbox.exec(f"sleep 0.{i % 3}; echo {i}") for i in range(20)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(20)]


async def test_timeout_kills_the_group_and_keeps_partial_output(sandbox: DockerSandbox) -> None:
    marker = new_marker()
    res = await sandbox.exec(f"echo started; (sleep {marker} &); sleep {marker}", timeout=0.5)
    assert (res.timed_out, res.exit_code, res.stdout) == (True, None, "started\n")
    assert await eventually(lambda: not host_pids(marker))
    assert (await sandbox.exec("echo still usable")).ok


async def test_kill_all(sandbox: DockerSandbox) -> None:
    marker = new_marker()
    await sandbox.exec(f"nohup sleep {marker} >/dev/null 2>&1 &")
    assert await eventually(lambda: bool(host_pids(marker)))
    await sandbox.kill_all()
    assert not host_pids(marker)
    assert (await sandbox.exec("echo alive")).stdout == "alive\n"


# -- files ---------------------------------------------------------------------------------------


async def test_upload_download_round_trip(sandbox: DockerSandbox, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("alpha")
    (src / "sub" / "b.bin").write_bytes(os.urandom(100_000))
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    await sandbox.upload(src, "/work/dir")
    assert (await sandbox.exec("/work/dir/run.sh")).stdout == "ran\n"
    await sandbox.upload(src / "a.txt", "/work/single.txt")
    assert await sandbox.read_file("/work/single.txt") == "alpha"

    await sandbox.download("/work/dir", tmp_path / "back")
    for rel in ("a.txt", "sub/b.bin", "run.sh"):
        assert (tmp_path / "back" / rel).read_bytes() == (src / rel).read_bytes()
    await sandbox.download("/work/single.txt", tmp_path / "one.txt")
    assert (tmp_path / "one.txt").read_text() == "alpha"
    with pytest.raises(FileNotFoundError):
        await sandbox.download("/no/such/path", tmp_path / "x")


async def test_spec_files_and_writable_dirs(backend: DockerBackend, tmp_path: Path) -> None:
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "main.py").write_text("print('hi')\n")
    spec = SandboxSpec(
        workdir="/app",
        files={"/app": tmp_path / "ctx", "/etc/palaestra.conf": tmp_path / "ctx" / "main.py"},
        writable_dirs=("/tmp", "/logs/verifier", "/tests", "/solution"),
    )
    async with await backend.create(spec) as sandbox:
        assert (await sandbox.exec("python3 main.py")).stdout == "hi\n"
        assert (await sandbox.exec("cat /etc/palaestra.conf")).stdout == "print('hi')\n"
        res = await sandbox.exec("stat -c %a /tmp; touch /logs/verifier/r /tests/t /solution/s")
        assert res.ok and res.stdout == "1777\n", res


# -- limits --------------------------------------------------------------------------------------


async def test_memory_limit_kills_a_memory_bomb(backend: DockerBackend) -> None:
    async with await backend.create(SandboxSpec(memory_mb=128)) as sandbox:
        res = await sandbox.exec(["python3", "-c", "x = bytearray(512 << 20); print('survived')"])
        assert res.exit_code == -signal.SIGKILL and res.oom_killed, res
        assert "survived" not in res.stdout
        small = await sandbox.exec(["python3", "-c", "x = bytearray(32 << 20); print('ok')"])
        assert (small.stdout, small.oom_killed) == ("ok\n", False)


# Forks children that sleep until it has 200 or a fork is refused; prints how many it got.
FORK_UNTIL_REFUSED = """
import os, signal, time
children = []
for _ in range(200):
    try:
        pid = os.fork()
    except BlockingIOError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    children.append(pid)
print(len(children))
for pid in children:
    os.kill(pid, signal.SIGKILL)
"""


async def test_pids_limit_stops_a_fork_bomb(backend: DockerBackend) -> None:
    async with await backend.create(SandboxSpec(pids_limit=32)) as sandbox:
        res = await sandbox.exec(["python3", "-c", FORK_UNTIL_REFUSED], timeout=60)
        started = int(res.stdout.strip() or 0)
        assert 0 < started < 32, res
        await sandbox.kill_all()
        assert (await sandbox.exec("echo recovered")).ok


async def test_pids_are_limited_by_default(sandbox: DockerSandbox) -> None:
    assert sandbox.container_id is not None
    host_config = (await inspect(sandbox.container_id))["HostConfig"]
    assert host_config["PidsLimit"] == DEFAULT_PIDS_LIMIT


async def test_cpu_quota(backend: DockerBackend) -> None:
    async with await backend.create(SandboxSpec(cpus=0.5)) as sandbox:
        res = await sandbox.exec(
            "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us "
            "2>/dev/null || cat /sys/fs/cgroup/cpu.max"
        )
        quota, period = res.stdout.split()
        assert int(quota) / int(period) == 0.5


async def test_storage_limit(backend: DockerBackend, caplog: pytest.LogCaptureFixture) -> None:
    """Enforced where the storage driver has quotas, always on the data root that
    scripts/provision-docker.sh sets up (overlay2 on XFS with project quotas, or btrfs);
    elsewhere the sandbox still starts and a warning says that storage_mb is not enforced."""
    async with aiodocker.Docker(url=f"unix://{docker_socket()}") as docker:
        provisioned = (await docker.system.info())["DockerRootDir"] == PROVISIONED_DATA_ROOT
    async with await backend.create(SandboxSpec(workdir="/app", storage_mb=64)) as sandbox:
        # 120 MB: more than storage_mb, less than storage_mb plus the image's size (the limit
        # under full btrfs qgroups, which count the image's files; simple quotas do not)
        res = await sandbox.exec("dd if=/dev/zero of=/app/fill bs=1M count=120", timeout=60)
        if backend._storage_opt_supported is False and not provisioned:
            assert res.ok and "storage_mb is not enforced" in caplog.text
        else:
            assert res.exit_code != 0 and "quota exceeded" in res.stderr, res
            assert (await sandbox.exec("rm /app/fill && echo freed")).stdout == "freed\n"
            assert (await sandbox.exec("head -c 8M /dev/zero > /app/small")).ok


async def test_provisioned_btrfs_root_has_simple_quotas_where_the_kernel_does() -> None:
    """scripts/provision-docker.sh makes a btrfs data root with simple quotas on Linux 6.7+:
    with full qgroups every removed container costs the kernel about a second of CPU and the
    next starts take seconds."""
    async with aiodocker.Docker(url=f"unix://{docker_socket()}") as docker:
        info = await docker.system.info()
    if info["DockerRootDir"] != PROVISIONED_DATA_ROOT or info["Driver"] != "btrfs":
        pytest.skip(f"the engine's data root is {info['DockerRootDir']} on {info['Driver']}")
    if tuple(map(int, os.uname().release.split(".")[:2])) < (6, 7):
        assert quota_mode(PROVISIONED_DATA_ROOT) == "qgroup"
    else:
        assert quota_mode(PROVISIONED_DATA_ROOT) == "squota"


async def test_network_none_vs_public(backend: DockerBackend) -> None:
    async with await backend.create(SandboxSpec(network="none")) as sandbox:
        assert (await sandbox.exec("ls /sys/class/net")).stdout.split() == ["lo"]
    async with await backend.create(SandboxSpec(network="public")) as sandbox:
        assert "eth0" in (await sandbox.exec("ls /sys/class/net")).stdout.split()


# -- lifecycle and labels ------------------------------------------------------------------------


async def test_labels(backend: DockerBackend) -> None:
    async with await backend.create(SandboxSpec(labels={"palaestra.task_id": "t1"})) as sandbox:
        assert sandbox.container_id is not None
        labels = (await inspect(sandbox.container_id))["Config"]["Labels"]
        assert labels[RUN_ID_LABEL] == backend.run_id
        assert labels[SANDBOX_LABEL] == sandbox.id
        assert labels["palaestra.task_id"] == "t1"
        assert labels[OWNER_LABEL] == owner_label()


async def test_close_is_idempotent_and_removes_the_container(backend: DockerBackend) -> None:
    marker = new_marker()
    sandbox = await backend.create(SandboxSpec())
    await sandbox.exec(f"nohup sleep {marker} >/dev/null 2>&1 &")
    assert await eventually(lambda: bool(host_pids(marker)))
    container_id = sandbox.container_id
    assert container_id in await labelled_containers()
    await asyncio.gather(sandbox.close(), sandbox.close())
    await sandbox.close()
    assert sandbox.closed
    assert container_id not in await labelled_containers()
    assert not host_pids(marker)
    with pytest.raises(SandboxClosedError):
        await sandbox.exec("true")


async def test_close_while_a_command_runs(sandbox: DockerSandbox) -> None:
    marker = new_marker()
    running = asyncio.create_task(sandbox.exec(f"sleep {marker}"))
    assert await eventually(lambda: len(host_pids(marker)) == 1)  # the command runs
    await sandbox.close()
    with pytest.raises(SandboxClosedError):
        await running


async def test_backend_aclose_closes_everything(backend: DockerBackend) -> None:
    sandboxes = await asyncio.gather(*(backend.create(SandboxSpec()) for _ in range(3)))
    await backend.aclose()
    assert all(s.closed for s in sandboxes)


async def test_registered_as_docker() -> None:
    assert isinstance(make_backend("docker"), DockerBackend)


# -- the janitor ---------------------------------------------------------------------------------

_CRASHING_OWNER = """
import asyncio, sys
from palaestra.sandbox.base import SandboxSpec
from palaestra.sandbox.docker import DockerBackend
async def main():
    sandbox = await DockerBackend(run_id=sys.argv[1]).create(SandboxSpec())
    print(sandbox.container_id, flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
"""


async def test_a_killed_owner_leaves_no_container() -> None:
    run_id = f"crash-{new_marker()}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CRASHING_OWNER, run_id, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    container_id = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()
    assert container_id in await labelled_containers(f"{RUN_ID_LABEL}={run_id}")
    proc.kill()
    await proc.wait()
    # The attach connection closes, the helper reads EOF and exits, AutoRemove removes it.
    deadline = time.monotonic() + 20
    while await labelled_containers(f"{RUN_ID_LABEL}={run_id}"):
        assert time.monotonic() < deadline, "the dead owner's container is still there"
        await asyncio.sleep(0.1)


async def test_janitor_removes_dead_owners_containers_only() -> None:
    """A container created but never started (its owner died in between) outlives the owner:
    the janitor removes it, and leaves live owners' containers alone."""
    dead = await asyncio.create_subprocess_exec("true")
    await dead.wait()
    run_id = f"dead-{new_marker()}"
    async with aiodocker.Docker(url=f"unix://{docker_socket()}") as docker:
        orphan = await docker.containers.create(
            {
                "Image": DEFAULT_IMAGE,
                "Cmd": ["true"],
                "Labels": {RUN_ID_LABEL: run_id, OWNER_LABEL: owner_label(dead.pid, 1)},
            }
        )
        other_boot = await docker.containers.create(
            {
                "Image": DEFAULT_IMAGE,
                "Cmd": ["true"],
                "Labels": {RUN_ID_LABEL: run_id, OWNER_LABEL: f"old-boot/1/{os.getpid()}/1"},
            }
        )
        boot = owner_label().split("/", 1)[0]
        other_namespace = await docker.containers.create(
            {
                "Image": DEFAULT_IMAGE,
                "Cmd": ["true"],
                "Labels": {RUN_ID_LABEL: run_id, OWNER_LABEL: f"{boot}/1/{dead.pid}/1"},
            }
        )
        try:
            made = {orphan.id, other_boot.id, other_namespace.id}
            assert set(await labelled_containers(f"{RUN_ID_LABEL}={run_id}")) == made
            live = DockerBackend(run_id=f"live-{new_marker()}")
            # A backend reclaims before its first sandbox.
            async with await live.create(SandboxSpec()) as sandbox:
                # An owner in another pid namespace cannot be checked from here: it stays.
                remaining = await labelled_containers(f"{RUN_ID_LABEL}={run_id}")
                assert remaining == [other_namespace.id]
                await reclaim_docker_leftovers(docker)
                assert sandbox.container_id in await labelled_containers()  # live: kept
                assert (await sandbox.exec("echo alive")).stdout == "alive\n"
        finally:
            await other_namespace.delete(force=True)


# -- images --------------------------------------------------------------------------------------


async def test_image_without_python3_runs(backend: DockerBackend, tmp_path: Path) -> None:
    """The helper brings its own runtime (interpreter, libc, loader): nothing of the image."""
    (tmp_path / "Dockerfile").write_text(
        f"FROM {DEFAULT_IMAGE}\nRUN rm -rf /usr/bin/python3* /usr/lib/python3* /usr/local/lib\n"
    )
    tag = await build_image(tmp_path, timeout=300)
    async with await backend.create(SandboxSpec(image=tag)) as sandbox:
        res = await sandbox.exec("command -v python3 || echo none; id -un")
        assert res.stdout == "none\nroot\n", res
        assert (await sandbox.exec("id -un", user="nobody")).stdout == "nobody\n"


#: An image whose entrypoint starts a service (a heartbeat file), then runs its command.
ENTRYPOINT_SCRIPT = """\
#!/bin/sh
( while :; do echo "$SERVICE_WORD" > /tmp/heartbeat; sleep 0.1; done ) &
exec "$@"
"""


async def test_image_entrypoint_runs_as_a_service_that_kill_all_starts_again(
    backend: DockerBackend, tmp_path: Path
) -> None:
    (tmp_path / "entry.sh").write_text(ENTRYPOINT_SCRIPT)
    (tmp_path / "Dockerfile").write_text(
        f"FROM {DEFAULT_IMAGE}\nENV SERVICE_WORD=beat\nCOPY entry.sh /entry.sh\n"
        'ENTRYPOINT ["/bin/sh", "/entry.sh"]\nCMD ["false"]\n'
    )
    tag = await build_image(tmp_path, timeout=300)
    async with await backend.create(SandboxSpec(image=tag)) as sandbox:
        beat = "for i in $(seq 50); do [ -s /tmp/heartbeat ] && break; sleep 0.1; done; "
        ps = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"
        res = await sandbox.exec(beat + "cat /tmp/heartbeat")
        assert res.stdout == "beat\n", res
        await sandbox.exec("sleep 300 &")
        await sandbox.kill_all()
        res = await sandbox.exec("rm /tmp/heartbeat; " + beat + "cat /tmp/heartbeat; " + ps)
        assert res.stdout.startswith("beat\n") and "sleep 300" not in res.stdout, res
        assert "sleep infinity" in res.stdout  # Harbor's command, after the entrypoint


async def test_cpus_beyond_the_host_are_lowered_to_it(
    backend: DockerBackend, caplog: pytest.LogCaptureFixture
) -> None:
    host_cpus = os.cpu_count() or 1
    for _ in range(2):
        async with await backend.create(SandboxSpec(cpus=host_cpus + 3)) as sandbox:
            host_config = (await inspect(sandbox.container_id))["HostConfig"]
            assert host_config["NanoCpus"] == host_cpus * 10**9
            assert sandbox.adjustments == (
                f"cpus {host_cpus} (asked for {host_cpus + 3}; the host has {host_cpus})",
            )
    warnings = [r for r in caplog.records if "CPUs" in r.getMessage()]
    assert len(warnings) == 1 and f"{host_cpus + 3} CPUs" in warnings[0].getMessage()


async def test_missing_unpullable_image_says_how_to_provide_it(backend: DockerBackend) -> None:
    with pytest.raises(SandboxError, match=r"not on this machine.*docker (build|load)"):
        await backend.create(SandboxSpec(image=f"palaestra/no-such-image:{new_marker()}"))


async def test_rootfs_specs_are_refused(backend: DockerBackend, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="local backend for spec.rootfs"):
        await backend.create(SandboxSpec(rootfs=tmp_path))


# -- hostile code (the docker-specific half; the shared suite runs on both backends) -------------


async def test_host_environment_is_not_visible(
    backend: DockerBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PALAESTRA_TEST_SECRET", "hunter2")
    async with await backend.create(SandboxSpec()) as sandbox:
        res = await sandbox.exec("env; cat /proc/1/environ")
        assert "hunter2" not in res.output and res.exit_code != 0  # pid 1 is not dumpable
        assert not (await sandbox.exec(["test", "-e", str(Path(__file__).parent)])).ok


async def test_host_loopback_and_processes_are_out_of_reach(backend: DockerBackend) -> None:
    connected: list[bool] = []

    async def on_connect(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.append(True)
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        for network in ("none", "public"):
            async with await backend.create(SandboxSpec(network=network)) as sandbox:
                probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)"
                res = await sandbox.exec(["python3", "-c", probe], timeout=20)
                assert res.exit_code != 0 and not connected, (network, res)
                res = await sandbox.exec(f"kill -KILL {os.getpid()}")
                assert res.exit_code != 0  # another pid namespace: no such process
    finally:
        server.close()
        await server.wait_closed()


async def test_cpu_spinner_is_killed_at_its_timeout(sandbox: DockerSandbox) -> None:
    marker = new_marker()
    res = await sandbox.exec(f"while :; do :; done # {marker}", timeout=1)
    assert res.timed_out and res.exit_code is None
    assert await eventually(lambda: not host_pids(marker))


async def test_sys_and_proc_are_not_writable(sandbox: DockerSandbox) -> None:
    res = await sandbox.exec("echo 1 > /proc/sys/kernel/sysrq")
    assert res.exit_code != 0
    res = await sandbox.exec("echo x > /sys/kernel/uevent_helper")
    assert res.exit_code != 0
