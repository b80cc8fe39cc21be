"""The local backend against real bubblewrap (no test doubles): exec, isolation, files, and a
sandbox's life. The janitor and exiting owners: ``test_local_janitor.py``.

Processes are identified by a random number (``marker``) that appears in their command lines
(``sleep <marker>``); the host's /proc is scanned for it to prove that something is, or is no
longer, running.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from palaestra.sandbox.base import (
    Mount,
    SandboxClosedError,
    SandboxError,
    SandboxSpec,
)
from palaestra.sandbox.helper_runtime import helper_argv
from palaestra.sandbox.local import BASE_ENV, LocalBackend, LocalSandbox
from palaestra.sandbox.local.userns import id_base
from tests.procs import bwrap_pids, eventually, host_pids, new_marker
from tests.sandbox.conftest import new_run_id

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0, reason="needs bubblewrap, as root"
)


# -- helpers -------------------------------------------------------------------------------------


# Scans the sandbox's /proc for $MARKER in command lines, skipping itself.
FIND_IN_SANDBOX = """
import os
me, marker = str(os.getpid()), os.environ["MARKER"].encode()
for pid in os.listdir("/proc"):
    if pid.isdigit() and pid != me:
        try:
            if marker in open(f"/proc/{pid}/cmdline", "rb").read():
                print(pid)
        except OSError:
            pass
"""


async def sandbox_pids(sandbox: LocalSandbox, marker: str) -> list[str]:
    res = await sandbox.exec(["python3", "-c", FIND_IN_SANDBOX], env={"MARKER": marker})
    assert res.exit_code == 0, res
    return res.stdout.split()


@pytest.fixture
async def backend(state_dir: Path, helper: str) -> AsyncIterator[LocalBackend]:
    backend = LocalBackend(run_id=new_run_id(), state_dir=state_dir)
    yield backend
    await backend.aclose()


@pytest.fixture
async def sandbox(backend: LocalBackend) -> AsyncIterator[LocalSandbox]:
    spec = SandboxSpec(
        workdir="/app", writable_dirs=("/tmp", "/logs/verifier"), env={"SPEC_VAR": "from-spec"}
    )
    sandbox = await backend.create(spec)
    yield sandbox
    await sandbox.close()


# -- exec ----------------------------------------------------------------------------------------


async def test_stdout_stderr_and_exit_code(sandbox: LocalSandbox) -> None:
    res = await sandbox.exec("echo out; echo err >&2; exit 3")
    assert (res.stdout, res.stderr, res.exit_code, res.timed_out) == ("out\n", "err\n", 3, False)
    assert not res.ok
    assert (await sandbox.exec("true")).ok


async def test_cwd_defaults_to_workdir_and_can_be_set(sandbox: LocalSandbox) -> None:
    assert (await sandbox.exec("pwd")).stdout == "/app\n"
    assert (await sandbox.exec("pwd", cwd="/tmp")).stdout == "/tmp\n"


async def test_environment_is_chosen_not_inherited(
    backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PALAESTRA_TEST_SECRET", "hunter2")
    async with await backend.create(SandboxSpec(env={"SPEC_VAR": "1"})) as sandbox:
        env = (await sandbox.exec(["env"])).stdout
        assert dict(line.split("=", 1) for line in env.splitlines()) == {
            **BASE_ENV,
            "SPEC_VAR": "1",
        }
        assert "hunter2" not in env
        res = await sandbox.exec(
            'echo "$SPEC_VAR $EXTRA $HOME"', env={"EXTRA": "x", "SPEC_VAR": "over"}
        )
        assert res.stdout == "over x /root\n"


async def test_stdin(sandbox: LocalSandbox) -> None:
    assert (await sandbox.exec("cat", stdin="hello")).stdout == "hello"
    data = os.urandom(5 << 20)  # far beyond a pipe's buffer
    res = await sandbox.exec(["sha256sum"], stdin=data)
    assert res.stdout.split()[0] == hashlib.sha256(data).hexdigest()
    no_stdin = await sandbox.exec("cat; echo done", timeout=10)  # /dev/null: EOF at once
    assert (no_stdin.stdout, no_stdin.timed_out) == ("done\n", False)


async def test_list_is_exec_and_string_is_bash(sandbox: LocalSandbox) -> None:
    assert (await sandbox.exec(["echo", "a  b", "$HOME"])).stdout == "a  b $HOME\n"
    assert (await sandbox.exec("echo $HOME $((1 + 1))")).stdout == "/root 2\n"
    missing = await sandbox.exec(["no-such-command"])
    assert missing.exit_code == 127 and "no-such-command" in missing.stderr
    assert (await sandbox.exec("no-such-command")).exit_code == 127


async def test_signal_gives_negative_exit_code(sandbox: LocalSandbox) -> None:
    assert (await sandbox.exec("kill -TERM $$")).exit_code == -signal.SIGTERM
    assert (await sandbox.exec("kill -KILL $$")).exit_code == -signal.SIGKILL


async def test_output_is_decoded_with_replacement(sandbox: LocalSandbox) -> None:
    assert (await sandbox.exec(r"printf 'ok\377'")).stdout == "ok\ufffd"


async def test_user(sandbox: LocalSandbox) -> None:
    res = await sandbox.exec('echo "$(id -u):$(id -g) $HOME"', user="nobody")
    assert res.stdout == "65534:65534 /nonexistent\n"
    assert (await sandbox.exec("id -u; id -G", user=4242)).stdout == "4242\n4242\n"
    assert (await sandbox.exec("touch /tmp/by-nobody", user="nobody")).ok
    with pytest.raises(SandboxError, match="no-such-user"):
        await sandbox.exec("true", user="no-such-user")


async def test_duration_is_measured(sandbox: LocalSandbox) -> None:
    assert (await sandbox.exec("sleep 0.2")).duration_s >= 0.2


async def test_output_cap_truncates_but_drains(sandbox: LocalSandbox) -> None:
    res = await sandbox.exec(r"head -c 10000000 /dev/zero | tr '\0' a; echo done >&2", timeout=60)
    assert (res.exit_code, res.timed_out, res.truncated) == (0, False, True)
    assert res.stdout == "a" * (1 << 20)
    assert res.stderr == "done\n"
    res = await sandbox.exec("yes | head -c 5000 >&2", output_limit=100)
    assert (len(res.stderr), res.stdout, res.truncated) == (100, "", True)
    assert not (await sandbox.exec("echo short", output_limit=100)).truncated


async def test_concurrent_execs_in_one_sandbox(sandbox: LocalSandbox) -> None:
    # Each command waits until all ten have started: serialized execs would time out.
    barrier = 'mkdir -p /tmp/b; touch /tmp/b/{i}; until [ "$(ls /tmp/b | wc -l)" = 10 ]; do '
    barrier += "sleep 0.01; done; echo {i}"
    results = await asyncio.gather(
        *(sandbox.exec(barrier.format(i=i), timeout=30) for i in range(10))
    )
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(10)]


# -- timeouts, background processes, kill_all ----------------------------------------------------


@pytest.mark.slow
async def test_timeout_kills_the_whole_tree(sandbox: LocalSandbox) -> None:
    marker = new_marker()
    await sandbox.write_file(
        f"/app/spawn{marker}.py",
        f"import subprocess, time\nsubprocess.Popen(['sleep', '{marker}'])\ntime.sleep({marker})\n",
    )
    await sandbox.write_file(
        f"/app/tree{marker}.sh",
        "echo before; echo oops >&2\n"
        f"bash -c 'python3 /app/spawn{marker}.py & sleep {marker}' &\n"
        f"setsid sleep {marker} &\n"
        f"sleep {marker}\n",
    )
    run = asyncio.create_task(sandbox.exec(f"bash /app/tree{marker}.sh", timeout=3))
    # tree.sh, bash -c, python3, and four sleeps: all running before the timeout.
    assert await eventually(lambda: len(host_pids(marker)) >= 7)
    res = await run
    assert (res.timed_out, res.exit_code) == (True, None)
    assert (res.stdout, res.stderr) == ("before\n", "oops\n")
    assert host_pids(marker) == []
    assert await sandbox_pids(sandbox, marker) == []


async def test_timeout_returns_promptly_despite_output(sandbox: LocalSandbox) -> None:
    res = await sandbox.exec("while :; do echo spam; done", timeout=0.5, output_limit=1000)
    assert res.timed_out and res.truncated and res.stdout.startswith("spam\n")


async def test_background_process_does_not_hang_exec_and_kill_all_ends_it(
    sandbox: LocalSandbox,
) -> None:
    marker = new_marker()
    res = await sandbox.exec(f"sleep {marker} & echo started", timeout=10)
    assert (res.stdout, res.exit_code, res.timed_out) == ("started\n", 0, False)
    # This one keeps writing to the exec's pipes after the exec has returned.
    res = await sandbox.exec(
        f"bash -c 'while :; do echo {marker}; echo . >> /tmp/beats; sleep 0.01; done' &"
    )
    assert res.ok

    async def beats() -> int:
        return int((await sandbox.exec("wc -l < /tmp/beats")).stdout or 0)

    first = await beats()
    for _ in range(500):  # the writer goes on after its exec returned: 20 more lines written
        if await beats() >= first + 20:
            break
    assert await beats() >= first + 20
    assert len(host_pids(marker)) >= 2  # both still alive, neither blocked nor SIGPIPE'd
    await sandbox.kill_all()
    assert host_pids(marker) == []
    assert (await sandbox.exec("echo usable")).stdout == "usable\n"


async def test_cancelled_exec_kills_its_tree(sandbox: LocalSandbox) -> None:
    marker = new_marker()
    run = asyncio.create_task(sandbox.exec(f"sleep {marker} & sleep {marker}"))
    assert await eventually(lambda: len(host_pids(marker)) == 3)  # bash and two sleeps
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert await eventually(lambda: host_pids(marker) == [])
    assert (await sandbox.exec("echo usable")).ok


async def test_processes_inside_cannot_kill_or_read_the_helper(sandbox: LocalSandbox) -> None:
    res = await sandbox.exec("ls /proc/1/fd; cat /proc/1/fd/0")
    assert "Permission denied" in res.stderr
    await sandbox.exec("kill -INT 1; kill -TERM 1; kill -KILL 1; pkill -9 python3; kill -9 -1")
    assert (await sandbox.exec("echo alive")).stdout == "alive\n"


# -- isolation -----------------------------------------------------------------------------------


async def test_filesystem_shows_only_bound_directories(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    (tmp_path / "host-secret").write_text("secret")
    top = set((await sandbox.exec(["ls", "-A", "/"])).stdout.split())
    system = {"usr", "bin", "sbin", "lib", "lib64", "lib32", "libx32", "etc", "opt"}
    system &= set(os.listdir("/"))
    spec_dirs = {d.split("/")[1] for d in (sandbox.spec.workdir, *sandbox.spec.writable_dirs)}
    assert top == system | spec_dirs | {"proc", "dev", "root", "var", ".palaestra"}
    assert os.listdir("/root"), "the host's /root should not be empty for this test"
    assert (await sandbox.exec(["ls", "-A", "/root", "/tmp", "/var"])).stdout.split() == [
        "/root:",
        "/tmp:",
        "/var:",
        "tmp",
    ]
    assert (await sandbox.exec(["test", "-e", str(tmp_path / "host-secret")])).exit_code == 1
    assert (await sandbox.exec(["test", "-e", "/work"])).exit_code == 1


async def test_system_directories_and_root_are_read_only(sandbox: LocalSandbox) -> None:
    for path in ("/usr/palaestra-probe", "/etc/palaestra-probe", "/palaestra-probe"):
        res = await sandbox.exec(["touch", path])
        assert res.exit_code != 0 and "Read-only file system" in res.stderr, res


async def test_writable_directories_persist(sandbox: LocalSandbox) -> None:
    for path in ("/app/f", "/tmp/f", "/logs/verifier/f", "/root/f", "/var/tmp/f"):
        assert (await sandbox.exec(f"echo kept > {path}")).ok, path
        assert await sandbox.read_file(path) == "kept\n"
    assert (await sandbox.exec("stat -c %a /tmp /var/tmp")).stdout == "1777\n1777\n"


async def test_pid_namespace_shows_only_the_sandbox(sandbox: LocalSandbox) -> None:
    listing = "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    pids = json.loads((await sandbox.exec(["python3", "-c", listing])).stdout)
    assert len(pids) == 2 and pids[0] == 1  # the helper and this command
    cmdline = (await sandbox.exec("tr '\\0' ' ' < /proc/1/cmdline")).stdout
    assert cmdline.startswith(f"{helper_argv()[0]} ")  # the helper, C or Python
    assert "pytest" not in (await sandbox.exec("cat /proc/[0-9]*/cmdline")).stdout


async def test_capabilities_are_dropped(sandbox: LocalSandbox) -> None:
    status = (await sandbox.exec(["cat", "/proc/self/status"])).stdout
    cap_eff = int(next(ln for ln in status.splitlines() if ln.startswith("CapEff")).split()[1], 16)
    cap_setpcap, cap_sys_admin, cap_mknod = 8, 21, 27
    assert not cap_eff & (1 << cap_setpcap | 1 << cap_sys_admin | 1 << cap_mknod)
    assert "NoNewPrivs:\t1" in status
    assert not (await sandbox.exec("mount -t tmpfs none /tmp")).ok


async def test_hostname(backend: LocalBackend) -> None:
    async with await backend.create(SandboxSpec(hostname="box-7")) as sandbox:
        assert (await sandbox.exec("cat /proc/sys/kernel/hostname")).stdout == "box-7\n"


CONNECT = """
import socket, sys
try:
    print(socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).recv(5).decode())
except OSError as exc:
    print(type(exc).__name__)
"""


async def test_network_none_and_public(backend: LocalBackend) -> None:
    async def greet(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(greet, "127.0.0.1", 0)
    port = str(server.sockets[0].getsockname()[1])
    interfaces = "import socket; print([name for _, name in socket.if_nameindex()])"
    async with server:
        async with await backend.create(SandboxSpec(network="none")) as sandbox:
            assert (await sandbox.exec(["python3", "-c", interfaces])).stdout == "['lo']\n"
            res = await sandbox.exec(["python3", "-c", CONNECT, port])
            assert res.stdout == "ConnectionRefusedError\n"
        async with await backend.create(SandboxSpec(network="public")) as sandbox:
            assert (await sandbox.exec(["python3", "-c", CONNECT, port])).stdout == "hello\n"


async def test_spec_files_and_mounts(backend: LocalBackend, tmp_path: Path) -> None:
    (tmp_path / "one.txt").write_text("one")
    (tmp_path / "tree" / "sub").mkdir(parents=True)
    (tmp_path / "tree" / "sub" / "two.txt").write_text("two")
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "three.txt").write_text("three")
    (tmp_path / "rw").mkdir()
    os.chown(tmp_path / "rw", id_base(), id_base())  # the sandbox's root, on the host
    spec = SandboxSpec(
        workdir="/app",
        files={"/app/one.txt": tmp_path / "one.txt", "/tests/tree": tmp_path / "tree"},
        writable_dirs=("/tmp", "/tests"),
        mounts=(
            Mount(tmp_path / "ro", "/data/ro"),
            Mount(tmp_path / "rw", "/data/rw", read_only=False),
        ),
    )
    async with await backend.create(spec) as sandbox:
        res = await sandbox.exec(
            "cat /app/one.txt /tests/tree/sub/two.txt /data/ro/three.txt; echo x > /data/rw/x"
        )
        assert (res.stdout, res.exit_code) == ("onetwothree", 0)
        assert not (await sandbox.exec("touch /data/ro/nope")).ok
    assert (tmp_path / "rw" / "x").read_text() == "x\n"
    assert (tmp_path / "rw" / "x").stat().st_uid == id_base()  # the host sees no root file


async def test_bad_specs_are_rejected(backend: LocalBackend, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="docker backend"):
        await backend.create(SandboxSpec(image="python:3.12"))
    with pytest.raises(SandboxError, match="/srv/x.txt"):
        await backend.create(SandboxSpec(files={"/srv/x.txt": tmp_path}))
    missing = tmp_path / "missing"
    with pytest.raises(SandboxError, match=str(missing)):  # bwrap's own words, passed on
        await backend.create(SandboxSpec(mounts=(Mount(missing, "/data"),)))
    assert not list((backend.state_dir / backend.run_id).iterdir())


# -- upload and download -------------------------------------------------------------------------


async def test_upload_and_download_a_file(sandbox: LocalSandbox, tmp_path: Path) -> None:
    data = bytes(range(256)) * 64 + os.urandom(100_000)
    src = tmp_path / "data.bin"
    src.write_bytes(data)
    src.chmod(0o755)
    await sandbox.upload(src, "/app/new/dir/renamed.bin")
    res = await sandbox.exec("sha256sum < /app/new/dir/renamed.bin; stat -c %a /app/new/dir/*")
    assert res.stdout.split() == [hashlib.sha256(data).hexdigest(), "-", "755"]
    await sandbox.download("/app/new/dir/renamed.bin", tmp_path / "back" / "data.bin")
    assert (tmp_path / "back" / "data.bin").read_bytes() == data
    assert (tmp_path / "back" / "data.bin").stat().st_mode & 0o777 == 0o755


async def test_upload_and_download_a_tree(sandbox: LocalSandbox, tmp_path: Path) -> None:
    src = tmp_path / "tree"
    (src / "nested" / "deeper").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "a.txt").write_text("a")
    (src / "nested" / "deeper" / "bin.dat").write_bytes(bytes(range(256)) * 10)
    (src / "link").symlink_to("a.txt")
    await sandbox.upload(src, "/app/tree")
    res = await sandbox.exec("cd /app/tree && find . | sort && readlink link")
    assert res.stdout.split() == [
        ".",
        "./a.txt",
        "./empty",
        "./link",
        "./nested",
        "./nested/deeper",
        "./nested/deeper/bin.dat",
        "a.txt",
    ]
    back = tmp_path / "back"
    await sandbox.download("/app/tree", back)
    assert sorted(str(p.relative_to(back)) for p in back.rglob("*")) == [
        "a.txt",
        "empty",
        "link",
        "nested",
        "nested/deeper",
        "nested/deeper/bin.dat",
    ]
    assert (back / "nested" / "deeper" / "bin.dat").read_bytes() == bytes(range(256)) * 10
    assert os.readlink(back / "link") == "a.txt"


async def test_missing_sources(sandbox: LocalSandbox, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        await sandbox.upload(tmp_path / "nothing-here", "/app/x")
    with pytest.raises(FileNotFoundError, match="/app/nothing-here"):
        await sandbox.download("/app/nothing-here", tmp_path / "x")


async def test_download_never_follows_links_to_the_host(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    shadow = await asyncio.to_thread(Path("/etc/shadow").read_bytes)
    await sandbox.exec(
        "ln -s /etc/shadow /app/leak && mkdir /app/d && echo ok > /app/d/ok && "
        "ln -s /etc/shadow /app/d/abs && ln -s ../../etc/shadow /app/d/rel"
    )
    out = tmp_path / "out"
    with pytest.raises(SandboxError, match="symbolic link"):
        await sandbox.download("/app/leak", out / "leak")
    assert not await asyncio.to_thread(os.path.lexists, out / "leak")
    await sandbox.download("/app/d", out / "d")
    assert os.listdir(out / "d") == ["ok"]
    assert shadow not in (out / "d" / "ok").read_bytes()


async def test_upload_through_planted_link_stays_inside(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "evil.txt").write_text("evil")
    # On the host, this link inside the sandbox's backing directory points at `outside`.
    await sandbox.exec(["ln", "-s", str(outside), "/app/escape"])
    with pytest.raises(SandboxError):
        await sandbox.upload(tmp_path / "evil.txt", "/app/escape/evil.txt")
    assert os.listdir(outside) == []


# -- lifecycle -----------------------------------------------------------------------------------


async def test_close_is_idempotent_and_final(backend: LocalBackend, tmp_path: Path) -> None:
    sandbox = await backend.create(SandboxSpec())
    marker = new_marker()
    await sandbox.exec(f"setsid nohup sleep {marker} >/dev/null 2>&1 & (setsid sleep {marker} &)")
    assert len(host_pids(marker)) == 2
    pending = asyncio.create_task(sandbox.exec(f"sleep {marker}"))
    assert await eventually(lambda: len(host_pids(marker)) == 3)
    await asyncio.gather(sandbox.close(), sandbox.close())
    await sandbox.close()
    assert sandbox.closed
    assert host_pids(marker) == []  # no waiting: close returns once everything is gone
    assert sandbox.bwrap_pid not in map(int, filter(str.isdigit, os.listdir("/proc")))
    assert not sandbox.sandbox_dir.exists()
    with pytest.raises(SandboxClosedError):
        await pending
    with pytest.raises(SandboxClosedError):
        await sandbox.exec("true")
    with pytest.raises(SandboxClosedError):
        await sandbox.upload(tmp_path, "/app/x")
    with pytest.raises(SandboxClosedError):
        await sandbox.download("/app", tmp_path / "x")
    with pytest.raises(SandboxClosedError):
        await sandbox.kill_all()


async def test_unexpected_death_is_reported(backend: LocalBackend) -> None:
    sandbox = await backend.create(SandboxSpec())
    marker = new_marker()
    pending = asyncio.create_task(sandbox.exec(f"sleep {marker}"))
    assert await eventually(lambda: len(host_pids(marker)) == 1)  # the exec is running
    os.kill(sandbox.bwrap_pid, signal.SIGKILL)
    with pytest.raises(SandboxError, match="stopped unexpectedly") as info:
        await pending
    assert not isinstance(info.value, SandboxClosedError)
    with pytest.raises(SandboxError, match="stopped unexpectedly"):
        await sandbox.exec("true")
    await sandbox.close()


async def test_many_sandboxes_at_once(state_dir: Path) -> None:
    backend = LocalBackend(run_id="many", state_dir=state_dir)
    sandboxes = await asyncio.gather(*(backend.create(SandboxSpec()) for _ in range(50)))
    assert len({s.bwrap_pid for s in sandboxes}) == 50
    results = await asyncio.gather(*(s.exec(f"echo {i}") for i, s in enumerate(sandboxes)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(50)]
    assert len(bwrap_pids(str(state_dir))) == 50
    await asyncio.gather(*(s.close() for s in sandboxes[:25]))
    await backend.aclose()  # closes the other half
    assert all(s.closed for s in sandboxes)
    assert bwrap_pids(str(state_dir)) == []
    assert not (state_dir / "many").exists()
