"""The local sandbox's pid 1: it runs commands for the host and reaps orphans.

bubblewrap starts this file with ``/usr/bin/python3 -I -S -B`` as pid 1 of the sandbox
(``--as-pid-1``), so it uses the standard library only, runs on the host's system Python
(3.9+) and must start fast: it imports only modules built into the interpreter or tiny ones
(no ``json``, ``subprocess``, ``signal``, ``selectors``: each costs milliseconds; ``ctypes``
is imported for one prctl). The host talks to it over stdin/stdout in frames: an 8-byte header
(JSON length, blob length; big-endian u32), a JSON object, then raw bytes. Every request
carries an ``id`` that its response echoes, so commands run concurrently and finish in any
order. The helper greets with ``{"id": 0}`` once it serves. The host imports :data:`HEADER` and
:func:`encode_frame` from here: both ends share one definition of the protocol.

Requests (``op``): ``exec`` (blob = stdin) answered with ``exit_code``, ``timed_out``,
``truncated``, ``oom_killed`` and ``stdout_len`` (blob = stdout + stderr); ``kill_all`` answered once every
other process is gone; ``cancel`` (no answer) kills a running command's tree. A failed request
is answered with ``error``. The optional first argument is a JSON configuration (cgroup file
descriptors, rlimits; see :class:`Helper`); without it, a command is tracked by its process
group, its session, its descendants and a marker in its environment (``PALAESTRA_EXEC=<id>``,
inherited by everything it starts, so a ``setsid`` double fork is still found).

Being pid 1 matters: processes in the sandbox cannot signal pid 1 except with signals it handles
(``kill -9 -1`` or ``pkill python3`` leave it alone), every orphan is re-parented to it, and
when it exits the kernel kills everything else in the sandbox.
"""

from __future__ import annotations

import _signal  # not `signal`: its enums import `enum`, `re`... (milliseconds at every start)
import errno
import os
import pwd
import select
import struct
import sys
import time

TYPE_CHECKING = False  # importing typing would add ~2 ms to every sandbox's start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

HEADER = struct.Struct(">II")

#: After a command's main process exits, output still in flight is read for this long. Pipes
#: that background processes keep open are then drained (and discarded) in the background, so
#: those processes never block or get EPIPE.
DRAIN_GRACE_S = 0.05
#: How long a kill waits for the killed processes to disappear.
KILL_WAIT_S = 5.0
_CHUNK = 1 << 16
_PR_SET_DUMPABLE = 4
_SIGKILL, _SIGSTOP = 9, 19
_PR_SET_PDEATHSIG, _PR_GET_PDEATHSIG = 1, 2
#: Without cgroups, every command's environment carries ``MARKER=<request id>``.
MARKER = "PALAESTRA_EXEC"
_IN, _OUT = select.POLLIN | select.POLLHUP | select.POLLERR, select.POLLOUT | select.POLLERR


# -- JSON without the json package (it imports re, enum...: milliseconds at every start) --------

try:
    import _json

    class _ScanContext:
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = float  # NaN, Infinity

    _scan = _json.make_scanner(_ScanContext())
    _quote = _json.encode_basestring_ascii

    def loads(data: bytes | bytearray) -> Any:
        return _scan(data.decode(), 0)[0]

except ImportError:  # a Python without the C accelerator: slower start, same results
    import json

    loads = json.loads
    _quote = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def dumps(obj: Any) -> str:
    """Compact JSON for the protocol's values: dicts, lists, str, int, float, bool, None."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, str):
        return _quote(obj)
    if isinstance(obj, int):
        return int.__repr__(obj)
    if isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            return "NaN" if obj != obj else ("Infinity" if obj > 0 else "-Infinity")
        return float.__repr__(obj)
    if isinstance(obj, dict):
        return "{" + ",".join(f"{_quote(str(k))}:{dumps(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    raise TypeError(f"cannot encode {type(obj).__name__} in a frame")


def encode_frame(head: dict[str, Any], blob: bytes = b"") -> bytes:
    body = dumps(head).encode()
    return HEADER.pack(len(body), len(blob)) + body + blob


class _Command:
    """One command, from its start to the response that reports it."""

    def __init__(self, request_id: int, pid: int, out_fd: int, err_fd: int, head: dict[str, Any]):
        self.request_id = request_id
        self.pid = pid
        self.limit: int = head["limit"]
        timeout = head["timeout"]
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.stdout_fd, self.stderr_fd = out_fd, err_fd
        self.output = {self.stdout_fd: bytearray(), self.stderr_fd: bytearray()}
        self.open_fds = set(self.output)
        self.stdin = memoryview(b"")
        self.truncated = False
        self.timed_out = False
        self.returncode: int | None = None
        self.drain_until = 0.0
        self.cgroup: str | None = None  # its own cgroup, below the sandbox's tracking cgroup
        self.oom_before = 0

    def take(self, fd: int, data: bytes) -> None:
        """Keep the first ``limit`` bytes of a stream; count the rest as truncation."""
        buf = self.output[fd]
        room = self.limit - len(buf)
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        buf += data

    def exited(self, returncode: int) -> None:
        self.returncode = returncode
        self.drain_until = time.monotonic() + DRAIN_GRACE_S


class Helper:
    """The request loop: one thread, one poll set, SIGCHLD delivered through a wakeup pipe."""

    def __init__(self, config: dict[str, Any]) -> None:
        # Set by the host when the sandbox has cgroups (see palaestra.sandbox.limits): a
        # directory fd of the cgroup under which each command gets its own, how to kill one,
        # and where the kernel counts OOM kills. Processes in the sandbox cannot reach these:
        # cgroupfs is not mounted inside and this process is not dumpable.
        self.track_fd: int | None = config.get("track_fd")
        self.kill_mode: str = config.get("kill", "")
        self.oom_fd: int | None = config.get("oom_fd")
        self.oom_file: str = config.get("oom_file", "")
        self.rlimit_as: int | None = config.get("rlimit_as")
        self.leftover_cgroups: set[str] = set()  # of answered commands, still holding processes
        self.poll = select.poll()
        self.handlers: dict[int, Callable[[int], None]] = {}
        self.inbox = bytearray()
        # The sandbox's environment, as bwrap set it; PWD is bwrap's cwd, not the commands'.
        self.env = {k: v for k, v in os.environ.items() if k != "PWD"}
        self.commands: dict[int, _Command] = {}  # by request id, until answered
        self.running: dict[int, _Command] = {}  # by pid, until reaped
        # Output pipes by fd: the command collecting them, or None once it has been answered.
        self.readers: dict[int, _Command | None] = {}
        self.writers: dict[int, _Command] = {}  # stdin pipes still being fed
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        _signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        _signal.signal(_signal.SIGCHLD, lambda *_: None)
        # Python's SIGINT handler would let `kill -INT 1` raise KeyboardInterrupt here; with the
        # default disposition, pid 1 never receives it.
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        self._watch(0, _IN, self._on_request)
        self._watch(wake_r, _IN, self._on_signal)

    def _watch(self, fd: int, events: int, handler: Callable[[int], None]) -> None:
        self.poll.register(fd, events)
        self.handlers[fd] = handler

    def _unwatch(self, fd: int) -> None:
        self.poll.unregister(fd)
        del self.handlers[fd]

    def serve(self) -> None:
        self._send({"id": 0})
        while True:
            for fd, _ in self.poll.poll(self._next_wakeup()):
                handler = self.handlers.get(fd)
                if handler is not None:  # None: unwatched by an earlier handler of this round
                    handler(fd)
            now = time.monotonic()
            for cmd in list(self.running.values()):
                if cmd.deadline is not None and now >= cmd.deadline:
                    cmd.timed_out, cmd.deadline = True, None
                    self._kill_command(cmd)
            now = time.monotonic()
            for cmd in list(self.commands.values()):
                if cmd.returncode is not None and (not cmd.open_fds or now >= cmd.drain_until):
                    self._answer(cmd)

    def _next_wakeup(self) -> int | None:
        """Milliseconds until the next deadline, or None (no deadline: wait for events)."""
        times = [c.deadline for c in self.running.values() if c.deadline is not None]
        times += [c.drain_until for c in self.commands.values() if c.returncode is not None]
        if not times:
            return None
        return max(0, int((min(times) - time.monotonic()) * 1000) + 1)

    # -- requests ------------------------------------------------------------------------------

    def _on_request(self, fd: int) -> None:
        data = os.read(fd, 1 << 20)
        if not data:
            raise SystemExit(0)  # the host is gone; exiting takes the sandbox down with us
        self.inbox += data
        while len(self.inbox) >= HEADER.size:
            head_len, blob_len = HEADER.unpack_from(self.inbox)
            end = HEADER.size + head_len + blob_len
            if len(self.inbox) < end:
                return
            head = loads(self.inbox[HEADER.size : HEADER.size + head_len])
            blob = bytes(self.inbox[HEADER.size + head_len : end])
            del self.inbox[:end]
            try:
                self._handle(head, blob)
            except Exception as exc:
                self._send({"id": head.get("id"), "error": f"{type(exc).__name__}: {exc}"})

    def _handle(self, head: dict[str, Any], blob: bytes) -> None:
        op = head["op"]
        if op == "exec":
            self._start(head, blob)
        elif op == "kill_all":
            self._kill(lambda pid, ppid, pgrp, sid: True)
            self._remove_cgroups(self.leftover_cgroups)
            self._send({"id": head["id"]})
        elif op == "cancel":
            cmd = self.commands.get(head["id"])
            if cmd is not None and cmd.returncode is None:
                self._kill_command(cmd)
        else:
            raise ValueError(f"unknown op {op!r}")

    def _start(self, head: dict[str, Any], stdin: bytes) -> None:
        env = {**self.env, **head["env"]}
        uid, gid = _resolve_user(head["user"], env, head["env"])
        cgroup, procs_fd = None, -1
        if self.track_fd is None:
            env[MARKER] = str(head["id"])
        else:
            cgroup = f"c{head['id']}"
            os.mkdir(cgroup, dir_fd=self.track_fd)
            procs_fd = os.open(f"{cgroup}/cgroup.procs", os.O_WRONLY, dir_fd=self.track_fd)
        oom_before = self._oom_kills()
        try:
            pid, in_fd, out_fd, err_fd = _spawn(
                head["argv"], head["cwd"], env, uid, gid, head["stdin"], procs_fd, self.rlimit_as
            )
        except OSError as exc:  # like a shell: 127 when not found, 126 when not runnable
            if cgroup is not None:
                self._remove_cgroups({cgroup})
            self._send(
                {
                    "id": head["id"],
                    "exit_code": 127 if exc.errno == errno.ENOENT else 126,
                    "timed_out": False,
                    "truncated": False,
                    "stdout_len": 0,
                },
                f"{exc}\n".encode(),
            )
            return
        finally:
            if procs_fd >= 0:
                os.close(procs_fd)
        cmd = _Command(head["id"], pid, out_fd, err_fd, head)
        cmd.cgroup, cmd.oom_before = cgroup, oom_before
        self.commands[cmd.request_id] = cmd
        self.running[pid] = cmd
        for fd in (out_fd, err_fd):
            self.readers[fd] = cmd
            self._watch(fd, _IN, self._on_output)
        if in_fd >= 0:
            cmd.stdin = memoryview(stdin)
            os.set_blocking(in_fd, False)
            self.writers[in_fd] = cmd
            self._watch(in_fd, _OUT, self._on_stdin)

    def _answer(self, cmd: _Command) -> None:
        del self.commands[cmd.request_id]
        for fd in cmd.open_fds:  # held open by background processes: keep draining, discard
            self.readers[fd] = None
        for fd, owner in list(self.writers.items()):
            if owner is cmd:
                self._close_writer(fd)
        stdout, stderr = cmd.output[cmd.stdout_fd], cmd.output[cmd.stderr_fd]
        if cmd.cgroup is not None:
            self.leftover_cgroups.add(cmd.cgroup)
            self._remove_cgroups({cmd.cgroup})
        self._send(
            {
                "id": cmd.request_id,
                "exit_code": None if cmd.timed_out else cmd.returncode,
                "timed_out": cmd.timed_out,
                "truncated": cmd.truncated,
                "oom_killed": self._oom_kills() > cmd.oom_before,
                "stdout_len": len(stdout),
            },
            bytes(stdout + stderr),
        )

    def _send(self, head: dict[str, Any], blob: bytes = b"") -> None:
        view = memoryview(encode_frame(head, blob))
        while view:
            view = view[os.write(1, view) :]

    # -- pipes and children --------------------------------------------------------------------

    def _on_output(self, fd: int) -> None:
        cmd = self.readers[fd]
        data = os.read(fd, _CHUNK)
        if data:
            if cmd is not None:
                cmd.take(fd, data)
            return
        self._unwatch(fd)
        del self.readers[fd]
        os.close(fd)
        if cmd is not None:
            cmd.open_fds.discard(fd)

    def _on_stdin(self, fd: int) -> None:
        cmd = self.writers[fd]
        try:
            cmd.stdin = cmd.stdin[os.write(fd, cmd.stdin[:_CHUNK]) :]
        except BlockingIOError:
            return
        except BrokenPipeError:  # the command does not read its input: not an error
            cmd.stdin = memoryview(b"")
        if not cmd.stdin:
            self._close_writer(fd)

    def _close_writer(self, fd: int) -> None:
        self._unwatch(fd)
        del self.writers[fd]
        os.close(fd)

    def _on_signal(self, fd: int) -> None:
        try:
            while os.read(fd, 512):
                pass
        except BlockingIOError:
            pass
        self._reap()

    def _reap(self) -> None:
        """Collect every exited child: our commands, and orphans re-parented to pid 1."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            cmd = self.running.pop(pid, None)
            if cmd is not None:
                cmd.exited(os.waitstatus_to_exitcode(status))
            elif self.leftover_cgroups:
                self._remove_cgroups(self.leftover_cgroups)

    # -- cgroups -------------------------------------------------------------------------------

    def _remove_cgroups(self, names: set[str]) -> None:
        """Remove the empty ones of these per-command cgroups (others still hold processes)."""
        for name in list(names):
            try:
                os.rmdir(name, dir_fd=self.track_fd)
            except FileNotFoundError:
                pass
            except OSError:
                continue
            self.leftover_cgroups.discard(name)

    def _oom_kills(self) -> int:
        """How many processes the OOM killer has killed in the sandbox so far."""
        if self.oom_fd is None:
            return 0
        for line in _read_at(self.oom_fd, self.oom_file).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def _kill_cgroup(self, name: str) -> None:
        """SIGKILL every process in a command's cgroup, and wait until they are gone.

        Frozen first (v1 freezer, v2 cgroup.freeze) so nothing forks while the members are
        listed; v2 kernels with cgroup.kill do it all in one write.
        """
        fd = self.track_fd
        assert fd is not None
        if self.kill_mode == "cgroup.kill":
            _write_at(fd, f"{name}/cgroup.kill", "1")
        else:
            v1 = self.kill_mode == "freezer"
            freeze = f"{name}/freezer.state" if v1 else f"{name}/cgroup.freeze"
            _write_at(fd, freeze, "FROZEN" if v1 else "1")
            deadline = time.monotonic() + KILL_WAIT_S
            while time.monotonic() < deadline:
                state = _read_at(fd, freeze if v1 else f"{name}/cgroup.events")
                if ("FROZEN" in state) if v1 else ("frozen 1" in state):
                    break
                time.sleep(0.001)
            for pid in _read_at(fd, f"{name}/cgroup.procs").split():
                _send_signal(int(pid), _SIGKILL)
            _write_at(fd, freeze, "THAWED" if v1 else "0")
        deadline = time.monotonic() + KILL_WAIT_S
        while time.monotonic() < deadline:
            self._reap()
            if not _read_at(fd, f"{name}/cgroup.procs").strip():
                return
            time.sleep(0.001)

    # -- killing -------------------------------------------------------------------------------

    def _kill_command(self, cmd: _Command) -> None:
        """Kill a command's processes: its cgroup when the sandbox has cgroups (nothing gets
        out of one), else its process group, its session, every process whose environment
        carries its marker (a ``setsid`` double fork keeps it), and their descendants. Without
        cgroups, a process that both leaves the session and clears its environment, or makes
        itself undumpable, survives until ``kill_all``."""
        if cmd.cgroup is not None:
            self._kill_cgroup(cmd.cgroup)
            return
        root = cmd.pid
        marker = f"\0{MARKER}={cmd.request_id}\0".encode()
        self._kill(
            lambda pid, ppid, pgrp, sid: pgrp == root or sid == root or _environ_has(pid, marker)
        )

    def _kill(self, selected: Callable[[int, int, int, int], bool]) -> None:
        """SIGKILL the selected processes and their descendants (never pid 1), and wait.

        Everything found is stopped first, until a scan finds nothing new: a stopped process
        cannot fork, and a killed parent would hand its children to pid 1 and so lose the link
        that marks them as descendants. Only then is the whole set killed.
        """
        stopped: set[int] = set()
        while True:
            procs = _processes()
            children: dict[int, list[int]] = {}
            for pid, (ppid, _, _) in procs.items():
                children.setdefault(ppid, []).append(pid)
            todo = [pid for pid, p in procs.items() if pid in stopped or selected(pid, *p)]
            found: set[int] = set()
            while todo:
                pid = todo.pop()
                if pid != 1 and pid not in found:
                    found.add(pid)
                    todo.extend(children.get(pid, ()))
            new = found - stopped
            if not new:
                break
            for pid in new:
                _send_signal(pid, _SIGSTOP)
            stopped |= new
        for pid in stopped:
            _send_signal(pid, _SIGKILL)
        deadline = time.monotonic() + KILL_WAIT_S
        while time.monotonic() < deadline:
            self._reap()
            alive = _processes()
            if not any(pid in alive for pid in stopped):
                return
            time.sleep(0.001)


def _processes() -> dict[int, tuple[int, int, int]]:
    """``pid -> (ppid, pgrp, session)`` of every process in the sandbox that is not dead yet."""
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name is in parentheses and may contain anything, ")" included.
        state, ppid, pgrp, session = stat[stat.rindex(b")") + 2 :].split()[:4]
        if state not in (b"Z", b"X"):
            procs[int(name)] = (int(ppid), int(pgrp), int(session))
    return procs


def _environ_has(pid: int, entry: bytes) -> bool:
    """Whether ``entry`` (``\\0NAME=value\\0``) is in the process's initial environment."""
    path = f"/proc/{pid}/environ"
    try:
        with open(path, "rb") as f:
            data = f.read()
    except PermissionError:
        data = _read_as_owner(pid, path)
    except OSError:
        return False
    return entry in b"\0" + data


def _read_as_owner(pid: int, path: str) -> bytes:
    """Read a /proc file of a process of another user, as that user.

    Without CAP_SYS_PTRACE (a container's root lacks it) only a process's own user may read its
    environment, so the effective ids switch to the owner's (the ids of ``/proc/<pid>``: its
    effective ones while it is dumpable) and back. Changing ids clears the parent-death signal,
    which is set again. Nothing is read from an undumpable process (``/proc/<pid>`` is root's).
    """
    try:
        st = os.stat(f"/proc/{pid}")
    except OSError:
        return b""
    euid, egid = os.geteuid(), os.getegid()
    if st.st_uid == euid:
        return b""
    import ctypes  # already loaded by _make_undumpable

    libc = ctypes.CDLL(None, use_errno=True)
    death = ctypes.c_int(0)
    libc.prctl(_PR_GET_PDEATHSIG, ctypes.byref(death), 0, 0, 0)
    try:
        os.setegid(st.st_gid)
        os.seteuid(st.st_uid)
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""
    finally:
        os.seteuid(euid)
        os.setegid(egid)
        if death.value:
            libc.prctl(_PR_SET_PDEATHSIG, death.value, 0, 0, 0)


def _send_signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _read_at(dir_fd: int, path: str) -> str:
    fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
    try:
        return os.read(fd, 1 << 16).decode()
    finally:
        os.close(fd)


def _write_at(dir_fd: int, path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY, dir_fd=dir_fd)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _resolve_user(
    user: str | int | None, env: dict[str, str], env_overrides: dict[str, str]
) -> tuple[int | None, int | None]:
    """``(uid, gid)`` for ``user`` (a name or id from /etc/passwd, or any numeric id).

    Like ``docker exec -u``, HOME follows the user's passwd entry unless the caller set it.
    """
    if user is None:
        return None, None
    if isinstance(user, str) and user.isdigit():
        user = int(user)
    try:
        entry = pwd.getpwnam(user) if isinstance(user, str) else pwd.getpwuid(user)
    except KeyError:
        if isinstance(user, str):
            raise ValueError(f"no user {user!r} in the sandbox's /etc/passwd") from None
        return user, user
    if "HOME" not in env_overrides:
        env["HOME"] = entry.pw_dir
    return entry.pw_uid, entry.pw_gid


def _spawn(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    uid: int | None,
    gid: int | None,
    with_stdin: bool,
    procs_fd: int,
    rlimit_as: int | None,
) -> tuple[int, int, int, int]:
    """Start a command in a new session: ``(pid, stdin fd or -1, stdout fd, stderr fd)``.

    Before the command runs, it enters its cgroup (``procs_fd``, so that nothing it forks can
    be outside it), gets its rlimit and changes directory. The usual way is ``posix_spawn``
    (vfork: the child runs at once, where a fork's child waits its turn on a busy machine) of
    ``/bin/sh`` doing those steps, then exec'ing the command: a missing command or directory
    exits 127 with the shell's message. To switch users, or without /bin/sh, the helper forks
    and does them itself, and an exec failure raises OSError here, with its errno.
    """
    in_r, in_w = os.pipe() if with_stdin else (os.open(os.devnull, os.O_RDONLY), -1)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    if uid is None and gid is None and _SH is not None:
        script = '{ cd -- "$1" || exit 127; } && shift && exec "$@"'
        # cd sets PWD and OLDPWD: the command gets exactly the environment asked for.
        unset = " ".join(name for name in ("PWD", "OLDPWD") if name not in env)
        if unset:
            script = script.replace("&& shift", f"&& unset {unset} && shift")
        actions = [(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate((in_r, out_w, err_w))]
        if procs_fd >= 0:
            if procs_fd == 3:
                os.set_inheritable(3, True)  # dup2 onto itself would keep close-on-exec
            else:
                actions.append((os.POSIX_SPAWN_DUP2, procs_fd, 3))
            script = "printf 0 >&3 && exec 3>&- && " + script
        if rlimit_as is not None:
            script = f"ulimit -v {rlimit_as >> 10} && " + script
        try:
            pid = os.posix_spawn(
                _SH, ["sh", "-c", script, "sh", cwd, *argv], env, file_actions=actions,
                setsid=True, setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),
            )  # fmt: skip
        except BaseException:
            for fd in (in_w, out_r, err_r):
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        return pid, in_w, out_r, err_r
    fail_r, fail_w = os.pipe()  # close-on-exec: EOF once exec succeeded
    pid = os.fork()
    if pid == 0:  # the child: only os calls, then exec or _exit
        try:
            os.setsid()
            for fd, target in ((in_r, 0), (out_w, 1), (err_w, 2)):
                os.dup2(fd, target)
            if procs_fd >= 0:
                os.write(procs_fd, b"0")
            if rlimit_as is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_AS, (rlimit_as, rlimit_as))
            for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):  # Python ignores these; commands not
                _signal.signal(sig, _signal.SIG_DFL)
            os.chdir(cwd)
            if gid is not None:
                os.setgroups([])
                os.setregid(gid, gid)
            if uid is not None:
                os.setreuid(uid, uid)
            _execute(argv, env)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, whatever it is
            code = exc.errno if isinstance(exc, OSError) and exc.errno else 0
            os.write(fail_w, f"{code}:{exc}".encode(errors="replace"))
        finally:
            os._exit(127)
    for fd in (in_r, out_w, err_w, fail_w):
        os.close(fd)
    try:
        failure = _read_all(fail_r)
    finally:
        os.close(fail_r)
    if failure:
        os.waitpid(pid, 0)
        for fd in (in_w, out_r, err_r):
            if fd >= 0:
                os.close(fd)
        code, _, message = failure.decode(errors="replace").partition(":")
        raise OSError(int(code) or errno.EINVAL, message)
    return pid, in_w, out_r, err_r


def _execute(argv: list[str], env: dict[str, str]) -> None:
    """Exec ``argv``, searching ``env``'s PATH like ``os.execvpe``, which is not used: it
    imports ``warnings``, which minimal Pythons such as Debian's python3-minimal lack. Every
    candidate is tried (no ``os.access``: some container seccomp profiles refuse its syscall)."""
    if "/" in argv[0]:
        os.execve(argv[0], argv, env)
    denied: OSError | None = None
    for directory in env.get("PATH", "/usr/bin:/bin").split(":"):
        try:
            os.execve(f"{directory or '.'}/{argv[0]}", argv, env)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except PermissionError as exc:
            denied = denied or exc
    raise denied or FileNotFoundError(errno.ENOENT, f"{argv[0]}: command not found")


_SH = "/bin/sh" if os.path.exists("/bin/sh") else None  # not os.access: see _execute


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except InterruptedError:
            continue
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _make_undumpable() -> None:
    """Keep sandboxed processes out of /proc/1/fd (the protocol pipes) and /proc/1/mem, and
    from ptracing the helper (it holds cgroup directories).

    Without CAP_SYS_PTRACE, which the sandbox does not get, a non-dumpable process's /proc
    entries are closed even to processes of the same uid. (Changing the effective gid would
    be cheaper than importing ctypes, but it clears bubblewrap's parent-death signal.)
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _keep_fds_to_self() -> None:
    """Make every descriptor bubblewrap passed in (the cgroup directories...) close-on-exec:
    commands must not inherit them."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                os.set_inheritable(fd, False)
            except OSError:
                pass  # the directory listing's own descriptor, closed meanwhile


def main() -> None:
    _make_undumpable()
    _keep_fds_to_self()
    Helper(loads(sys.argv[1].encode()) if len(sys.argv) > 1 else {}).serve()


if __name__ == "__main__":
    main()
