"""bwrap's process, as ``asyncio.create_subprocess_exec`` would give it, without its costs.

asyncio follows a child through a child watcher: on Python 3.11 a thread per process, blocked
in ``waitpid`` for the process's whole life (a thousand idle sandboxes, a thousand threads), and
a subprocess transport over its pipes. :class:`PipedProcess` starts the child with
``subprocess.Popen`` (as asyncio does, in the event loop: a vfork and an exec), follows its exit
through a pidfd in the event loop, and reads and writes its pipes with the loop's pipe
transports. It has what the local sandbox uses of ``asyncio.subprocess.Process``: ``pid``,
``returncode``, ``stdin`` (a ``StreamWriter``), ``stdout`` and ``stderr`` (``StreamReader``s)
and :meth:`wait`, which returns once the process exited *and* its pipes closed, as asyncio's
does. A cold sandbox start is ~1 ms shorter.

Where pidfds are missing (Linux before 5.3), :func:`start_piped` falls back to asyncio's own.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import subprocess
from typing import Any

from palaestra.sandbox.helper_runtime import setids_argv


class _Pipe(asyncio.StreamReaderProtocol):
    """A pipe's stream protocol that tells when the pipe is closed."""

    def __init__(self, reader: asyncio.StreamReader, closed: asyncio.Future[None]) -> None:
        super().__init__(reader)
        self._closed = closed

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._closed.done():
            self._closed.set_result(None)


class PipedProcess:
    """A child with piped stdin, stdout and stderr; made by :func:`start_piped`."""

    def __init__(self, popen: subprocess.Popen[bytes], pidfd: int) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.returncode: int | None = None
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._loop = asyncio.get_running_loop()
        self._exited: asyncio.Future[int] = self._loop.create_future()
        self._pipes_closed: list[asyncio.Future[None]] = []
        self._pidfd = pidfd
        self._loop.add_reader(pidfd, self._reap)

    def _reap(self) -> None:
        """The pidfd is readable: the child exited; reap it (never blocks now)."""
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self.returncode = self._popen.wait()
        self._exited.set_result(self.returncode)

    async def _connect(self, limit: int) -> None:
        loop, popen = self._loop, self._popen
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        readers = []
        for pipe in (popen.stdout, popen.stderr):
            reader = asyncio.StreamReader(limit=limit, loop=loop)
            closed = loop.create_future()
            self._pipes_closed.append(closed)
            await loop.connect_read_pipe(lambda r=reader, c=closed: _Pipe(r, c), pipe)
            readers.append(reader)
        self.stdout, self.stderr = readers
        closed = loop.create_future()
        self._pipes_closed.append(closed)
        transport, protocol = await loop.connect_write_pipe(
            lambda: _Pipe(asyncio.StreamReader(loop=loop), closed), popen.stdin
        )
        self.stdin = asyncio.StreamWriter(transport, protocol, None, loop)

    async def wait(self) -> int:
        """The exit status once the process exited and its pipes are closed."""
        await asyncio.shield(asyncio.gather(self._exited, *self._pipes_closed))
        assert self.returncode is not None
        return self.returncode


async def start_piped(
    argv: list[str],
    *,
    pass_fds: tuple[int, ...],
    limit: int,
    uid: int | None = None,
    detach: tuple[str, ...] = (),
) -> Any:
    """Start ``argv`` in a process group of its own, its stdin, stdout and stderr piped, as
    ``uid`` (and the group of that number, no supplementary groups) when given, in a mount
    namespace without the mounts at ``detach`` (with ``uid`` only): a :class:`PipedProcess`,
    or asyncio's ``Process`` where pidfds are missing. Raises OSError when it cannot be started.

    The ids are changed by a launcher exec'd first (the runtime bundle's static
    ``palaestra-setids``, else ``setpriv``: :func:`~palaestra.sandbox.helper_runtime.
    setids_argv`), not by ``Popen(user=...)``: Python forks for that instead of vforking, which
    copies this process's page tables (about 4 ms a start for a process of a few hundred MiB),
    where the launcher costs one exec."""
    if uid is not None:
        argv = [*setids_argv(uid, detach), *argv]
    if not _pidfds():
        return await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=pass_fds,
            limit=limit,
            process_group=0,
        )
    # asyncio's subprocess transport calls Popen in the loop just so: a vfork and an exec
    popen = subprocess.Popen(  # noqa: ASYNC220
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=pass_fds,
        process_group=0,
        bufsize=0,
    )
    process = PipedProcess(popen, os.pidfd_open(popen.pid))  # a child: its pid is not reused
    try:
        await process._connect(limit)
    except BaseException:
        os.killpg(popen.pid, signal.SIGKILL)  # reaped through its pidfd
        for pipe in (popen.stdin, popen.stdout, popen.stderr):
            if pipe is not None:
                pipe.close()
        raise
    return process


@functools.cache
def _pidfds() -> bool:
    """Whether this Python and kernel have pidfds (Python 3.9, Linux 5.3)."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True
