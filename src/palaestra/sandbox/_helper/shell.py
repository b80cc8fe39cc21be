"""Persistent shell sessions: one bash per session, kept running between its commands.

A session's bash runs :data:`SCRIPT` with two pipes besides its stdout and stderr: it reads
messages from the first (``<token> <length>\\n<command>``; token 0: a state to restore) and
writes to the second, after each command, ``R<status> <token>\\n`` (``X...`` from its EXIT
trap: an ``exit``, ``set -e``; then the bash ends), then its state ended by a NUL: text that
``eval`` turns back into the shell's options, variables, functions and working directory. The
helper answers the run on its status, with what the output pipes held, and keeps the state in
memory; the next command is sent only once the state has arrived. So when a command is killed
(its timeout, a cancel, ``kill_all``) or its bash ends, the session is the state from before
it: the next command starts a new bash that restores it first. Nothing is written to the
sandbox's files.

The command runs with stdin from /dev/null and fresh copies of the session's stdout and stderr
(an ``exec >file`` lasts one command), without the message pipe; the status pipe stays open in
it (bash cannot mark it close-on-exec), so a command may write a status of its own there: it
can end its own run early, nothing else (a status names its run by a random token that the
helper sends with the command: a background job cannot guess a later run's; other sessions
and commands have their own pipes). Printing never can: the status is not on stdout or
stderr. A process of the sandbox can still ruin a session there (write into its commands
through /proc, signal its bash), as it can any process there; what comes back is never
trusted: junk cannot crash the helper or end another run. Killing a session's command kills
everything the session runs (its bash, its background jobs: one cgroup, or one process
session), as does its bash ending and :meth:`Shell.close`.
"""

from __future__ import annotations

import os
import time

from . import Capture
from .kill import oom_kills
from .spawn import NotStarted

TYPE_CHECKING = False  # importing typing would add ~2 ms to every sandbox's start
if TYPE_CHECKING:
    from typing import Any

    from .server import Helper

#: A state larger than this is refused: the session goes back to its previous state.
STATE_LIMIT = 64 << 20
_IN, _OUT = 1 | 8 | 16, 4 | 16  # POLLIN | POLLHUP | POLLERR, POLLOUT | POLLERR
#: Reads that empty the largest pipe (1 MiB, the default pipe-max-size) 64 KiB at a time.
_PIPE_READS = 17

# Arguments: the message pipe's and the status pipe's descriptors. Builtins only, called with
# `builtin`: the session's own functions may shadow any name. Its code runs with xtrace off (the
# session's `set -x` is switched on again inside the eval) and its errors go to /dev/null. `-N`
# reads its length at once where `-d ''` would read a byte per system call; LC_ALL=C makes it
# count bytes. Needs bash 4.1+.
SCRIPT = r"""
exec 60<&"$1" 61>&"$2" 62>&1 63>&2
builtin eval "exec $1<&- $2>&-"
__palaestra_x= __palaestra_save='builtin printf "%s%d %s\n" "$__palaestra_end" "$__palaestra_rc" "$__palaestra_id"
builtin shopt -p; builtin declare -p; builtin declare -f
builtin printf "cd -- %q\n" "$PWD"; builtin shopt -po; builtin printf "\0"'
__palaestra_trace='[[ $- != *x* ]] && __palaestra_x= || { __palaestra_x=$'"'builtin set -x\n'"'; builtin set +x; }'
builtin trap '{ __palaestra_rc=$? __palaestra_end=X; builtin eval "$__palaestra_save"; } >&61 2>/dev/null' EXIT
while { IFS=' ' builtin read -r -u 60 __palaestra_id __palaestra_len \
    && IFS= LC_ALL=C builtin read -r -N "$__palaestra_len" -u 60 __palaestra_cmd; } 2>/dev/null
do
    if [[ $__palaestra_id == 0 ]]; then
        { builtin eval "$__palaestra_cmd"; builtin eval "$__palaestra_trace"; } >/dev/null 2>&1
        continue
    fi
    { builtin eval "$__palaestra_x$__palaestra_cmd"; } </dev/null >&62 2>&63 60<&- 62>&- 63>&-
    { __palaestra_rc=$? __palaestra_end=R; builtin eval "$__palaestra_save"
        builtin eval "$__palaestra_trace"
    } >&61 2>/dev/null
done
"""


class Run(Capture):
    """One command of a session, from its request to its answer."""

    def __init__(self, head: dict[str, Any], oom_before: int) -> None:
        super().__init__(head["limit"], (1, 2))  # keyed 1 and 2: the bash's pipes change
        self.request_id: int = head["id"]
        self.oom_before = oom_before
        self.token = os.urandom(8).hex().encode()  # its status names it: no one can guess it


class Shell:
    """One session: its bash while one runs (``pid``), its last state, its current run.

    Like a command of the helper, it has ``pid``, ``request_id`` (the marker or cgroup its bash
    was started with), ``cgroup``, ``deadline`` and ``timed_out`` (its run's), so the helper's
    deadline and kill code handle it, and ``exited`` (called when its bash is reaped).
    """

    def __init__(self, helper: Helper) -> None:
        self.helper = helper
        self.state = b""
        self.pid: int | None = None
        self.request_id = 0
        self.cgroup: str | None = None
        self.deadline: float | None = None
        self.timed_out = False
        self.ended: int | None = None  # the bash's exit status, once reaped and not yet settled
        self.run: Run | None = None
        self.messages = -1  # write end of the message pipe
        self.reports = -1  # read end of the status pipe
        self.outputs: dict[int, int] = {}  # the output pipes: fd -> 1 or 2
        self.open_fds: set[int] = set()  # of those, the ones not at EOF (the helper's reader)
        self.outbox = bytearray()
        self.inbox = bytearray()
        self.scanned = 0  # how much of the inbox is known to hold no NUL
        self.saving = False  # between a status and the end of the state that follows it
        self.exiting = False  # the bash said it ends (its EXIT trap ran)
        self.waiting: tuple[dict[str, Any], bytes] | None = None  # a run for the next bash

    # -- requests ------------------------------------------------------------------------------

    def start_run(self, head: dict[str, Any], command: bytes) -> None:
        """Run ``command``; the answer is sent when it ends."""
        if self.ended is not None:
            self.settle()
        if self.run is not None:
            raise ValueError("the shell session is already running a command")
        helper = self.helper
        self.run = Run(head, oom_kills(helper.oom_fd, helper.oom_file))
        self.timed_out = False
        timeout = head["timeout"]
        self.deadline = None if timeout is None else time.monotonic() + timeout
        if self.exiting:  # its bash is ending: the command goes to the next one (settle)
            self.waiting = (head, command)
        else:
            self._begin(head, command)

    def _begin(self, head: dict[str, Any], command: bytes) -> None:
        """Send the command, to a new bash when none runs."""
        if self.pid is None:
            try:
                self._start(head)
            except BaseException as exc:
                self.run = self.deadline = None
                if not isinstance(exc, NotStarted):
                    raise  # an unknown user...: the request's error
                self.helper.not_started(head["id"], exc)
                return
        self._send(b"%s %d\n%s" % (self.run.token, len(command), command))

    def close(self) -> None:
        """Kill the bash and everything it started; forget the state. A run still pending is
        answered as timed out (killed from outside, as by its timeout)."""
        self.timed_out = True
        if self.pid is not None and self.ended is None:
            self.helper.kill(self)
        if self.ended is not None:
            self.settle()
        self.state = b""

    def cancel(self, request_id: int) -> None:
        """Kill the session if ``request_id`` is its run (answered as timed out)."""
        if self.run is not None and self.run.request_id == request_id and self.ended is None:
            self.timed_out = True
            self.helper.kill(self)

    # -- the bash ------------------------------------------------------------------------------

    def _start(self, head: dict[str, Any]) -> None:
        helper = self.helper
        msg_r, msg_w = os.pipe()
        st_r, st_w = os.pipe()
        try:
            if min(msg_r, st_w) <= 3:  # fd 3 is spawn's (the cgroup); the helper holds 0-3
                raise RuntimeError(f"the helper's descriptors are not as expected: {msg_r}, {st_w}")
            os.set_inheritable(msg_r, True)  # only this spawn inherits them: closed right after
            os.set_inheritable(st_w, True)
            argv = ["bash", "-c", SCRIPT, "bash", str(msg_r), str(st_w)]
            pid, _, out_fd, err_fd, cgroup = helper.launch(head, argv, False)
        except BaseException:
            os.close(msg_w)
            os.close(st_r)
            raise
        finally:
            os.close(msg_r)
            os.close(st_w)
        self.pid, self.request_id, self.cgroup = pid, head["id"], cgroup
        self.messages, self.reports = msg_w, st_r
        self.outputs = {out_fd: 1, err_fd: 2}
        self.open_fds = {out_fd, err_fd}
        helper.running[pid] = self
        for fd in (msg_w, st_r, out_fd, err_fd):
            os.set_blocking(fd, False)
        helper.watch(st_r, _IN, self._on_status)
        for fd in (out_fd, err_fd):
            helper.readers[fd] = self
            helper.watch(fd, _IN, helper.on_output)
        if self.state:
            self._send(b"0 %d\n%s" % (len(self.state), self.state))

    def exited(self, returncode: int) -> None:
        self.ended = returncode

    def settle(self) -> None:
        """After the bash was reaped: take what it wrote, answer its run, kill what it left."""
        returncode, self.ended = self.ended, None
        self._read_status()
        self._drain_outputs()
        if self.run is not None and self.waiting is None:  # it ended without reporting the run
            self._answer(returncode)
        helper = self.helper
        helper.kill(self)  # its background jobs end with it
        if self.cgroup is not None:
            helper.leftover_cgroups.add(self.cgroup)
            helper.remove_cgroups({self.cgroup})
        for fd in (self.messages, self.reports):
            if fd in helper.handlers:
                helper.unwatch(fd)
            os.close(fd)
        for fd in self.open_fds:  # held open by what escaped the kill: drain, discard
            helper.readers[fd] = None
        self.pid, self.cgroup, self.messages, self.reports = None, None, -1, -1
        self.outputs, self.open_fds = {}, set()
        self.outbox.clear()
        self.inbox.clear()
        self.scanned, self.saving, self.exiting = 0, False, False
        if self.waiting is not None:
            (head, command), self.waiting = self.waiting, None
            if self.timed_out:
                self._answer(0)
            else:
                self._begin(head, command)

    # -- pipes ---------------------------------------------------------------------------------

    def take(self, fd: int, data: bytes) -> None:
        """Output of the bash: its run's, or dropped between runs."""
        if self.run is not None:
            self.run.take(self.outputs[fd], data)

    def _drain_outputs(self) -> None:
        """Read what the output pipes hold (at most a full pipe's worth: a background job may
        write on and on)."""
        for fd in list(self.open_fds):
            for _ in range(_PIPE_READS):
                if fd not in self.open_fds or not self.helper.on_output(fd):
                    break

    def _send(self, message: bytes) -> None:
        self.outbox += message
        self._flush()

    def _flush(self, fd: int = -1) -> None:
        """Write what the bash is to read, once its last state has arrived."""
        if self.saving or self.messages < 0:
            return
        try:
            while self.outbox:
                del self.outbox[: os.write(self.messages, self.outbox)]
        except BlockingIOError:
            if self.messages not in self.helper.handlers:
                self.helper.watch(self.messages, _OUT, self._flush)
            return
        except BrokenPipeError:  # the bash is gone; it is being reaped
            self.outbox.clear()
        if self.messages in self.helper.handlers:
            self.helper.unwatch(self.messages)

    def _on_status(self, fd: int) -> None:
        self._read_status()

    def _read_status(self) -> None:
        for _ in range(_PIPE_READS):  # the poll comes back for more
            if self.reports < 0:
                return
            try:
                data = os.read(self.reports, 1 << 16)
            except BlockingIOError:
                return
            if not data:
                return
            self.inbox += data
            self._parse()

    def _parse(self) -> None:
        """Take the run's status line and the state after it. Anything else (a command may
        write here too; a restored state's EXIT trap names an old run) is skipped at the speed
        of ``find``: only a line starting with R or X, right after a state or another line, is
        looked at, and only one naming the run by its token counts."""
        inbox, pos = self.inbox, 0
        while pos < len(inbox):
            if self.saving:
                end = inbox.find(b"\0", self.scanned)
                if end < 0:
                    self.scanned = len(inbox)
                    if len(inbox) - pos > STATE_LIMIT:
                        pos = len(inbox)
                        self.helper.kill(self)
                    break
                self.state = bytes(inbox[pos:end])
                pos, self.saving = end + 1, False
                self._flush()
                continue
            if inbox[pos] not in b"RX":
                starts = [
                    at for at in (inbox.find(b"\nR", pos), inbox.find(b"\nX", pos)) if at >= 0
                ]
                if not starts:
                    pos = max(pos, inbox.rfind(b"\n") + 1)
                    break
                pos = min(starts) + 1
            end = inbox.find(b"\n", pos, pos + 64)
            if end < 0:
                if len(inbox) - pos >= 64:  # too long for a status line
                    pos += 1
                    continue
                break
            status, _, token = bytes(inbox[pos + 1 : end]).partition(b" ")
            kind, pos = inbox[pos], end + 1
            if self.run is not None and token == self.run.token and status.isdigit():
                self.saving, self.scanned = True, pos
                self.exiting = self.exiting or kind == ord("X")
                self._drain_outputs()  # the command's output is all in the pipes by now
                self._answer(int(status))
        del inbox[:pos]
        self.scanned = max(0, self.scanned - pos)

    def _answer(self, status: int) -> None:
        run = self.run
        assert run is not None
        self.run, self.deadline = None, None
        helper = self.helper
        oom = oom_kills(helper.oom_fd, helper.oom_file) > run.oom_before
        exit_code = None if self.timed_out else status
        helper.send(*run.result(run.request_id, exit_code, self.timed_out, oom))
