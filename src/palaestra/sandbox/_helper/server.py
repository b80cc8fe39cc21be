"""The helper's entry (:func:`main`) and its request loop: it reads frames from the host, starts
commands, collects their output, kills them on a deadline or a ``cancel``, and answers each
request once."""

from __future__ import annotations

import _signal  # not `signal`: its enums import `enum`, `re`... (milliseconds at every start)
import errno
import os
import select
import sys
import time

from . import HEADER, Capture, encode_frame, loads
from .kill import environ_has, kill_cgroup, kill_tree, oom_kills, remove_cgroup_tree, thaw_below
from .prctl import PR_SET_DUMPABLE, prctl
from .shell import Shell
from .spawn import NotStarted, resolve_user, spawn

TYPE_CHECKING = False  # importing typing would add ~2 ms to every sandbox's start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: After a command's main process exits, output still in flight is read for this long. Pipes
#: that background processes keep open are then drained (and discarded) in the background, so
#: those processes never block or get EPIPE.
DRAIN_GRACE_S = 0.05
_CHUNK = 1 << 16
#: Without cgroups, every command's environment carries ``MARKER=<request id>``.
MARKER = "PALAESTRA_EXEC"
_IN, _OUT = select.POLLIN | select.POLLHUP | select.POLLERR, select.POLLOUT | select.POLLERR


class _Command(Capture):
    """One command, from its start to the response that reports it."""

    def __init__(self, request_id: int, pid: int, out_fd: int, err_fd: int, head: dict[str, Any]):
        super().__init__(head["limit"], (out_fd, err_fd))
        self.request_id = request_id
        self.pid = pid
        timeout = head["timeout"]
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.open_fds = {out_fd, err_fd}
        self.stdin = memoryview(b"")
        self.timed_out = False
        self.returncode: int | None = None
        self.drain_until = 0.0
        self.cgroup: str | None = None  # its own cgroup, below the sandbox's tracking cgroup
        self.oom_before = 0

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
        # The image's entrypoint (docker backend), started beside the helper: its argv, as the
        # host configured it (kept to start it again), and its session.
        self.service_argv: list[str] = config.get("service") or []
        self.service: int | None = None
        self.leftover_cgroups: set[str] = set()  # of answered commands, still holding processes
        self.poll = select.poll()
        self.handlers: dict[int, Callable[[int], None]] = {}
        self.inbox = bytearray()
        # The sandbox's environment, as bwrap set it; PWD is bwrap's cwd, not the commands'.
        self.env = {k: v for k, v in os.environ.items() if k != "PWD"}
        self.commands: dict[int, _Command] = {}  # by request id, until answered
        self.running: dict[int, _Command | Shell] = {}  # by pid, until reaped
        self.shells: dict[str, Shell] = {}  # persistent shell sessions, by the host's name
        # Output pipes by fd: the command or shell collecting them, or None once answered.
        self.readers: dict[int, _Command | Shell | None] = {}
        self.writers: dict[int, _Command] = {}  # stdin pipes still being fed
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        _signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        _signal.signal(_signal.SIGCHLD, lambda *_: None)
        # Python's SIGINT handler would let `kill -INT 1` raise KeyboardInterrupt here; with the
        # default disposition, pid 1 never receives it.
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        self.watch(0, _IN, self._on_request)
        self.watch(wake_r, _IN, self._on_signal)

    def watch(self, fd: int, events: int, handler: Callable[[int], None]) -> None:
        self.poll.register(fd, events)
        self.handlers[fd] = handler

    def unwatch(self, fd: int) -> None:
        self.poll.unregister(fd)
        del self.handlers[fd]

    def serve(self) -> None:
        self.send({"id": 0})
        while True:
            for fd, _ in self.poll.poll(self._next_wakeup()):
                handler = self.handlers.get(fd)
                if handler is not None:  # None: unwatched by an earlier handler of this round
                    handler(fd)
            now = time.monotonic()
            for cmd in list(self.running.values()):
                if cmd.deadline is not None and now >= cmd.deadline:
                    cmd.timed_out, cmd.deadline = True, None
                    self.kill(cmd)
            now = time.monotonic()
            for cmd in list(self.commands.values()):
                if cmd.returncode is not None and (not cmd.open_fds or now >= cmd.drain_until):
                    self._answer(cmd)
            for shell in list(self.shells.values()):
                if shell.ended is not None:
                    shell.settle()

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
                self.send({"id": head.get("id"), "error": f"{type(exc).__name__}: {exc}"})

    def _handle(self, head: dict[str, Any], blob: bytes) -> None:
        op = head["op"]
        if op == "exec":
            self._start(head, blob)
        elif op == "kill_all":
            self.kill_all(bool(head.get("restart_service")))
            self.send({"id": head["id"]})
        elif op == "cancel":
            cmd = self.commands.get(head["id"])
            if cmd is not None and cmd.returncode is None:
                self.kill(cmd)
            for shell in list(self.shells.values()):
                shell.cancel(head["id"])
        elif op == "shell_run":
            self.shells.setdefault(head["shell"], Shell(self)).start_run(head, blob)
        elif op == "shell_close":
            shell = self.shells.pop(head["shell"], None)
            if shell is not None:
                shell.close()
            self.send({"id": head["id"]})
        else:
            raise ValueError(f"unknown op {op!r}")

    def launch(
        self, head: dict[str, Any], argv: list[str], with_stdin: bool
    ) -> tuple[int, int, int, int, str | None]:
        """Start ``argv`` as ``head`` asks (cwd, env, user), marked or in a cgroup of its own
        named after the request: ``(pid, stdin fd or -1, stdout fd, stderr fd, cgroup)``.
        Raises :class:`NotStarted` when the command cannot start."""
        env = {**self.env, **head["env"]}
        uid, gid = resolve_user(head["user"], env, head["env"])
        cgroup, procs_fd = None, -1
        if self.track_fd is None:
            env[MARKER] = str(head["id"])
        else:
            cgroup = f"c{head['id']}"
            os.mkdir(cgroup, dir_fd=self.track_fd)
            procs_fd = os.open(f"{cgroup}/cgroup.procs", os.O_WRONLY, dir_fd=self.track_fd)
        try:
            return (
                *spawn(argv, head["cwd"], env, uid, gid, with_stdin, procs_fd, self.rlimit_as),
                cgroup,
            )
        except OSError as exc:
            if cgroup is not None:
                self.remove_cgroups({cgroup})
            raise NotStarted(exc) from exc
        finally:
            if procs_fd >= 0:
                os.close(procs_fd)

    def not_started(self, request_id: int, failure: NotStarted) -> None:
        """Answer like a shell: 127 when the command is not found, 126 when not runnable."""
        code = 127 if failure.error.errno == errno.ENOENT else 126
        error = Capture(1 << 16, (1, 2))
        error.take(2, f"{failure.error}\n".encode())
        self.send(*error.result(request_id, code, False, False))

    def _start(self, head: dict[str, Any], stdin: bytes) -> None:
        oom_before = oom_kills(self.oom_fd, self.oom_file)
        try:
            pid, in_fd, out_fd, err_fd, cgroup = self.launch(head, head["argv"], head["stdin"])
        except NotStarted as exc:
            self.not_started(head["id"], exc)
            return
        cmd = _Command(head["id"], pid, out_fd, err_fd, head)
        cmd.cgroup, cmd.oom_before = cgroup, oom_before
        self.commands[cmd.request_id] = cmd
        self.running[pid] = cmd
        for fd in (out_fd, err_fd):
            self.readers[fd] = cmd
            self.watch(fd, _IN, self.on_output)
        if in_fd >= 0:
            cmd.stdin = memoryview(stdin)
            os.set_blocking(in_fd, False)
            self.writers[in_fd] = cmd
            self.watch(in_fd, _OUT, self._on_stdin)

    def kill_all(self, restart_service: bool) -> None:
        """Kill every process in the sandbox, the service included (none survives: a process
        the agent made the service start, by ptrace or by asking it, is one of them), and wait
        until they are gone; then, if asked, start the service again as at the helper's start
        (:meth:`start_service`). Raises OSError when the service cannot start again."""
        track_fd, mode = self.track_fd, self.kill_mode
        thaw = None if track_fd is None else (lambda: thaw_below(track_fd, mode))
        kill_tree(lambda pid, ppid, pgrp, sid: True, self._reap, thaw)  # frozen ones die too
        self.service = None
        self.remove_cgroups(self.leftover_cgroups)
        if restart_service and self.service_argv:
            self.start_service()

    def start_service(self) -> None:
        """Start the service's argv (the image's entrypoint and Harbor's command) in a session
        of its own, in the helper's directory and its environment as the sandbox started (the
        helper's copy: nothing a process in the sandbox changed since), stdin from /dev/null,
        its output on the helper's stderr. Returns once it is exec'd, not once it is ready."""
        argv = self.service_argv
        self.service = os.posix_spawnp(
            argv[0],
            argv,
            self.env,
            setsid=True,
            setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, 2, 1),
            ],
        )

    def _answer(self, cmd: _Command) -> None:
        del self.commands[cmd.request_id]
        for fd in cmd.open_fds:  # held open by background processes: keep draining, discard
            self.readers[fd] = None
        for fd, owner in list(self.writers.items()):
            if owner is cmd:
                self._close_writer(fd)
        if cmd.cgroup is not None:
            self.leftover_cgroups.add(cmd.cgroup)
            self.remove_cgroups({cmd.cgroup})
        exit_code = None if cmd.timed_out else cmd.returncode
        oom = oom_kills(self.oom_fd, self.oom_file) > cmd.oom_before
        self.send(*cmd.result(cmd.request_id, exit_code, cmd.timed_out, oom))

    def send(self, head: dict[str, Any], blob: bytes = b"") -> None:
        view = memoryview(encode_frame(head, blob))
        while view:
            view = view[os.write(1, view) :]

    # -- pipes and children --------------------------------------------------------------------

    def on_output(self, fd: int) -> bool:
        """Read what an output pipe holds (a shell's are non-blocking: maybe nothing by now);
        whether there was anything, or its end."""
        cmd = self.readers[fd]
        try:
            data = os.read(fd, _CHUNK)
        except BlockingIOError:
            return False
        if data:
            if cmd is not None:
                cmd.take(fd, data)
            return True
        self.unwatch(fd)
        del self.readers[fd]
        os.close(fd)
        if cmd is not None:
            cmd.open_fds.discard(fd)
        return True

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
        self.unwatch(fd)
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
                self.remove_cgroups(self.leftover_cgroups)

    # -- cgroups -------------------------------------------------------------------------------

    def remove_cgroups(self, names: set[str]) -> None:
        """Remove the empty ones of these per-command cgroups, with the cgroups below them
        (others still hold processes). Without cgroups there are none."""
        if self.track_fd is None:
            return
        for name in list(names):
            if remove_cgroup_tree(self.track_fd, name):
                self.leftover_cgroups.discard(name)

    # -- killing -------------------------------------------------------------------------------

    def kill(self, cmd: _Command | Shell) -> None:
        """Kill a command's processes: its cgroup and those below it when the sandbox has
        cgroups (nothing gets out of one), else its process group, its session, every process whose environment
        carries its marker (a ``setsid`` double fork keeps it), and their descendants. Without
        cgroups, a process that both leaves the session and clears its environment, or makes
        itself undumpable, survives until ``kill_all``."""
        if cmd.cgroup is not None:
            assert self.track_fd is not None
            kill_cgroup(self.track_fd, self.kill_mode, cmd.cgroup, self._reap)
            return
        root = cmd.pid
        marker = f"\0{MARKER}={cmd.request_id}\0".encode()
        kill_tree(
            lambda pid, ppid, pgrp, sid: pgrp == root or sid == root or environ_has(pid, marker),
            self._reap,
        )


def _make_undumpable() -> None:
    """Keep sandboxed processes out of /proc/1/fd (the protocol pipes) and /proc/1/mem, and
    from ptracing the helper (it holds cgroup directories).

    Without CAP_SYS_PTRACE, which the sandbox does not get, a non-dumpable process's /proc
    entries are closed even to processes of the same uid. (Changing the effective gid would
    be cheaper than a prctl, but it clears bubblewrap's parent-death signal.)
    """
    prctl(PR_SET_DUMPABLE, 0)


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
    """Hide pid 1 from the sandbox's processes, then serve the host. The optional first argument
    is the JSON configuration of :class:`Helper`."""
    _make_undumpable()
    _keep_fds_to_self()
    config = loads(sys.argv[1].encode()) if len(sys.argv) > 1 else {}
    helper = Helper(config)
    if helper.service_argv:
        helper.start_service()
    helper.serve()
