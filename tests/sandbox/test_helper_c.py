"""The C helper: built into the runtime bundle and started by default, the Python helper as the
fallback, and the bytes both pass to a command (arguments, environment, working directory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from palaestra.sandbox import SandboxError, SandboxSpec
from palaestra.sandbox.helper_runtime import C_HELPER, helper_argv, helper_kind, helper_runtime
from palaestra.sandbox.local import LocalBackend, LocalSandbox
from tests.sandbox.conftest import new_run_id

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the local backend needs bubblewrap, as root"
)

#: Prints the bytes of its first argument, its V variable and its working directory in hex.
HEX = 'printf %s "$1" | od -An -tx1; printf %s "$V" | od -An -tx1; pwd | od -An -tx1'


def test_the_c_helper_is_built_static_and_started_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PALAESTRA_HELPER", raising=False)
    binary = helper_runtime() / C_HELPER
    assert helper_kind() == "c", (helper_runtime() / f"{C_HELPER}.failed").read_text()
    assert helper_argv('{"k":1}') == [f"/.palaestra/{C_HELPER}", '{"k":1}']
    # Static: it runs in images with no C library, or another one (musl).
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    assert "not a dynamic executable" in ldd.stdout + ldd.stderr


def test_the_c_helper_compiles_without_warnings(tmp_path: Path) -> None:
    from palaestra.sandbox._helper.shell import SCRIPT
    from palaestra.sandbox.helper_runtime import _HELPER_C, _c_string

    (tmp_path / "shell_script.h").write_text(f"#define SHELL_SCRIPT {_c_string(SCRIPT)}\n")
    sources = sorted(str(path) for path in _HELPER_C.glob("*.c"))
    flags = ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"]
    res = subprocess.run(
        ["cc", *flags, "-I", str(tmp_path), *sources], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr


def _kind_in_fresh_process(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """helper_kind() in a new process whose bundle is built in ``tmp_path`` with ``env``."""
    code = "from palaestra.sandbox.helper_runtime import helper_kind; print(helper_kind())"
    full = {**os.environ, "PALAESTRA_HELPER_DIR": str(tmp_path), **env}
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True)


@pytest.mark.slow
def test_without_a_compiler_sandboxes_fall_back_to_python_and_say_so(tmp_path: Path) -> None:
    auto = _kind_in_fresh_process(tmp_path, CC="/bin/false", PALAESTRA_HELPER="")
    assert auto.returncode == 0, auto.stderr
    assert auto.stdout.strip() == "python"
    assert "the sandbox helper runs on Python" in auto.stderr and "gcc" in auto.stderr
    forced = _kind_in_fresh_process(tmp_path, CC="/bin/false", PALAESTRA_HELPER="c")
    assert forced.returncode != 0
    assert "PALAESTRA_HELPER=c, but the C helper could not be built (/bin/false" in forced.stderr
    bogus = _kind_in_fresh_process(tmp_path, PALAESTRA_HELPER="rust")
    assert "PALAESTRA_HELPER='rust' is not a helper: use c, python or unset it" in bogus.stderr


@pytest.fixture
async def sandbox(tmp_path: Path, helper: str) -> AsyncIterator[LocalSandbox]:
    backend = LocalBackend(run_id=new_run_id(), state_dir=tmp_path / "state")
    try:
        async with await backend.create(SandboxSpec(writable_dirs=("/tmp",))) as made:
            yield made
    finally:
        await backend.aclose()


async def test_arguments_environment_and_cwd_arrive_as_the_same_bytes(
    sandbox: LocalSandbox,
) -> None:
    # Not UTF-8 (\udcff is the byte 0xff, as Python's surrogateescape writes it), a character
    # outside the BMP (a surrogate pair in the frame's JSON), an escape and a quote.
    name = "/tmp/d\udcff\U0001f600"
    assert (await sandbox.exec(["mkdir", name])).ok
    res = await sandbox.exec(
        ["sh", "-c", HEX, "sh", '\udcfe\U0001f600\t"\\'], env={"V": "é\udcff"}, cwd=name
    )
    assert res.ok, res
    arg, value, cwd = (bytes.fromhex(line) for line in res.stdout.splitlines())
    assert arg == b'\xfe\xf0\x9f\x98\x80\t"\\'
    assert value == "é".encode() + b"\xff"
    assert cwd == b"/tmp/d\xff\xf0\x9f\x98\x80\n"


async def test_a_command_that_cannot_start_is_answered_like_a_shell(sandbox: LocalSandbox) -> None:
    missing = await sandbox.exec(["no-such-command-x"])
    assert missing.exit_code == 127 and "no-such-command-x" in missing.stderr
    assert (await sandbox.exec(["/tmp"])).exit_code == 126
    nodir = await sandbox.exec(["true"], cwd="/no/such/dir")
    assert nodir.exit_code == 127 and "/no/such/dir" in nodir.stderr


async def test_nul_and_bad_names_are_refused_before_the_helper(sandbox: LocalSandbox) -> None:
    with pytest.raises(ValueError, match="cannot contain NUL"):
        await sandbox.exec(["echo", "a\0b"])
    with pytest.raises(ValueError, match="cannot contain NUL"):
        await sandbox.exec(["true"], env={"A": "x\0"})
    with pytest.raises(ValueError, match="'A=B': it cannot be empty or hold '='"):
        await sandbox.exec(["true"], env={"A=B": "x"})
    assert (await sandbox.exec(["echo", "still fine"])).stdout == "still fine\n"


async def test_a_crafted_passwd_uid_never_wraps_to_root(
    tmp_path: Path, helper: str, test_rootfs: Path
) -> None:
    # 2**32 is 0 once cut to a uid_t: a helper that trusted the number would run this as root.
    backend = LocalBackend(run_id=new_run_id(), state_dir=tmp_path / "state")
    try:
        async with await backend.create(SandboxSpec(rootfs=test_rootfs)) as sandbox:
            line = "evil:x:4294967296:4294967296::/root:/bin/sh"
            assert (await sandbox.exec(f"echo '{line}' >> /etc/passwd")).ok
            try:
                res = await sandbox.exec(["id", "-u"], user="evil")
            except SandboxError as exc:  # the C helper: no such user
                assert "no user 'evil'" in str(exc)
            else:  # the Python helper: the id does not fit, the command does not start
                assert res.exit_code == 126 and res.stdout == "", res
            assert (await sandbox.exec(["id", "-u"], user=0)).stdout == "0\n"
    finally:
        await backend.aclose()


class _Driver:
    """Talks to a helper binary started as pid 1 of a pid namespace of its own, on the host's
    file system: its kills (a cancel, a timeout, ``kill_all``) reach only what it started."""

    def __init__(self, binary: Path) -> None:
        env = {"PATH": "/usr/bin:/bin", "HOME": "/root", "ASAN_OPTIONS": "detect_leaks=1"}
        isolated = ["bwrap", "--dev-bind", "/", "/", "--unshare-pid", "--proc", "/proc"]
        isolated += ["--die-with-parent", "--as-pid-1", "--chdir", "/tmp", "--"]
        self.proc = subprocess.Popen(
            [*isolated, str(binary)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.next_id = 1000
        assert self.answer() == ({"id": 0}, b"")

    def request(self, head: dict, blob: bytes = b"") -> int:
        self.next_id += 1
        self.send({"id": self.next_id, **head}, blob)
        return self.next_id

    def send(self, head: dict, blob: bytes = b"") -> None:
        from palaestra.sandbox._helper import encode_frame

        assert self.proc.stdin is not None
        self.proc.stdin.write(encode_frame(head, blob))
        self.proc.stdin.flush()

    def answer(self) -> tuple[dict, bytes]:
        from palaestra.sandbox._helper import HEADER

        assert self.proc.stdout is not None
        head_len, blob_len = HEADER.unpack(self.proc.stdout.read(HEADER.size))
        return json.loads(self.proc.stdout.read(head_len)), self.proc.stdout.read(blob_len)

    def run(self, head: dict, blob: bytes = b"") -> tuple[dict, bytes]:
        sent = self.request(head, blob)
        answer = self.answer()
        assert answer[0]["id"] == sent, answer
        return answer


@pytest.mark.slow
def test_the_c_helper_under_address_and_undefined_behaviour_sanitizers(tmp_path: Path) -> None:
    """The protocol's paths, with bad input from the host and junk from the sandbox, in a build
    that stops at the first memory error, leak or undefined behaviour, as pid 1."""
    from palaestra.sandbox._helper.shell import SCRIPT
    from palaestra.sandbox.helper_runtime import _HELPER_C, _c_string

    (tmp_path / "shell_script.h").write_text(f"#define SHELL_SCRIPT {_c_string(SCRIPT)}\n")
    binary = tmp_path / "helper-sanitized"
    flags = ["-std=gnu11", "-g", "-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover"]
    # exit(), not _exit(), at the end of the helper's input: LeakSanitizer runs at exit
    flags += ["-D_exit(code)=exit(code)", "-I", str(tmp_path), "-o", str(binary)]
    build = subprocess.run(
        ["cc", *flags, *map(str, sorted(_HELPER_C.glob("*.c")))], capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr
    helper = _Driver(binary)
    base = {"cwd": "/tmp", "env": {}, "user": None, "timeout": 10, "limit": 100, "stdin": False}
    head, out = helper.run(
        {"op": "exec", "argv": ["sh", "-c", "echo hi; echo e >&2; exit 3"], **base}
    )
    assert (head["exit_code"], head["stdout_len"], out) == (3, 3, b"hi\ne\n")
    head, out = helper.run({"op": "exec", "argv": ["cat"], **base, "stdin": True}, b"x" * 300_000)
    assert head["truncated"] and out == b"x" * 100
    head, _ = helper.run({"op": "exec", "argv": ["sleep", "9"], **base, "timeout": 0.2})
    assert head["timed_out"] and head["exit_code"] is None
    head, out = helper.run({"op": "exec", "argv": ["printf", "%s", "\udcff\U0001f600"], **base})
    assert out == b"\xff\xf0\x9f\x98\x80"
    assert helper.run({"op": "exec", "argv": ["no-such-cmd-y"], **base})[0]["exit_code"] == 127
    sleeping = helper.request({"op": "exec", "argv": ["sleep", "9"], **base})
    helper.send({"op": "cancel", "id": sleeping})
    assert helper.answer()[0]["exit_code"] == -9
    assert "unknown op" in helper.run({"op": "bogus"})[0]["error"]
    assert (
        "no user"
        in helper.run({"op": "exec", "argv": ["true"], **base, "user": "nx-u"})[0]["error"]
    )
    shell = {"op": "shell_run", "shell": "s", **base}
    assert helper.run(shell, b"cd /usr; X=1; echo $X")[1] == b"1\n"
    assert helper.run({**shell, "timeout": 0.3}, b"sleep 9")[0]["timed_out"]
    assert helper.run(shell, b"echo $X; exit 4") == (
        {
            "id": helper.next_id,
            "exit_code": 4,
            "timed_out": False,
            "truncated": False,
            "oom_killed": False,
            "stdout_len": 2,
        },
        b"1\n",
    )
    for junk in ("R0 0000\\n", "X1 x\\n\\0\\0", "R" * 200, "\\nR5 ", "R123456789012 t\\n\\n"):
        assert helper.run(shell, f"printf '{junk}' >&61; echo ok".encode())[1] == b"ok\n"
    assert helper.run({**shell, "limit": 10}, b"seq 1 1000")[0]["truncated"]
    assert helper.run({"op": "shell_close", "shell": "s"})[0] == {"id": helper.next_id}
    background = {"op": "exec", "argv": ["sh", "-c", "(setsid sleep 9 &); sleep 9 &"], **base}
    assert helper.run(background)[0]["exit_code"] == 0
    assert helper.run({"op": "kill_all"})[0] == {"id": helper.next_id}
    ps = "for p in /proc/[0-9]*; do cat $p/comm; done"
    assert b"sleep" not in helper.run({"op": "exec", "argv": ["sh", "-c", ps], **base})[1]
    assert helper.proc.stdin is not None
    helper.proc.stdin.close()
    assert helper.proc.wait(30) == 0
    assert helper.proc.stderr is not None
    assert "Sanitizer" not in (errors := helper.proc.stderr.read().decode()), errors
