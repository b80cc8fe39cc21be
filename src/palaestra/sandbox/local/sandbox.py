"""A local sandbox: one bubblewrap process whose pid 1 is the helper, and its life.

Starting launches bwrap in a process group of its own and waits for the helper's greeting;
closing kills the helper (the kernel then kills everything in the sandbox's pid namespace),
thaws what a cgroup froze, waits for bwrap, and removes the sandbox's directory. Both survive
a caller's cancellation: what a start made is always known to close, and close runs to the end.
Commands and files go through the helper (:class:`~palaestra.sandbox.channel_sandbox.
ChannelSandbox`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from palaestra.sandbox._channel import HelperChannel
from palaestra.sandbox.base import SandboxError, SandboxSpec, await_to_the_end
from palaestra.sandbox.channel_sandbox import ChannelSandbox
from palaestra.sandbox.janitor import SandboxMeta, proc_stat, wait_gone
from palaestra.sandbox.limits import SandboxLimits, kill_and_thaw
from palaestra.sandbox.local.bwrap import BwrapCommand
from palaestra.sandbox.local.layout import overlay_changes, release_and_remove
from palaestra.sandbox.local.process import PipedProcess, start_piped
from palaestra.sandbox.local.snapshot import LocalSnapshot, take_snapshot
from palaestra.sandbox.local.userns import id_base, write_id_maps

_START_TIMEOUT_S = 60.0
_CLOSE_TIMEOUT_S = 10.0
_STDERR_TAIL = 4096
_STREAM_LIMIT = 1 << 20


class LocalSandbox(ChannelSandbox):
    """A running bubblewrap sandbox; made by :meth:`LocalBackend.create`."""

    def __init__(
        self,
        sandbox_id: str,
        spec: SandboxSpec,
        sandbox_dir: Path,
        on_close: Callable[[LocalSandbox], None],
        snapshots: set[LocalSnapshot],
    ) -> None:
        self.id = sandbox_id
        self._snapshots = snapshots  # its backend's open snapshots, where its own go
        self.spec = spec
        self.sandbox_dir = sandbox_dir
        self._on_close = on_close
        self._proc: PipedProcess | asyncio.subprocess.Process | None = None
        self._channel: HelperChannel | None = None
        self._helper_pidfd: int | None = None
        self._stderr_tail = bytearray()
        self._stderr_task: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._closing: asyncio.Future[None] | None = None
        self._limits: SandboxLimits | None = None
        self._meta: SandboxMeta | None = None  # as recorded in meta.json once started
        self._closed_now = False  # by close_now(), at process exit
        self.owner_pid = os.getpid()

    @property
    def limits(self) -> str:
        """How this sandbox's resource limits are enforced (cgroups, rlimits, tmpfs quota)."""
        return self._limits.description if self._limits is not None else "not started"

    @property
    def bwrap_pid(self) -> int:
        """The host pid of this sandbox's bwrap process."""
        if self._proc is None:
            raise SandboxError(f"sandbox {self.id} was not started")
        return self._proc.pid

    @property
    def closed(self) -> bool:
        return self._closing is not None or self._closed_now

    def _is_running(self) -> bool:
        """Started, not closed, and its bwrap and helper still there."""
        return (
            not self.closed
            and self._proc is not None
            and self._proc.returncode is None
            and self._channel is not None
            and self._channel.failure is None
            and self._watch_task is not None
            and not self._watch_task.done()
        )

    async def changed_paths(self, under: tuple[str, ...]) -> list[str]:
        self._usable_channel()
        if self.spec.rootfs is None:
            return []  # only writable directories are writable: the rest is bound read-only
        return await in_thread(overlay_changes, self.sandbox_dir, under)

    async def snapshot(self) -> LocalSnapshot:
        """A copy of the sandbox's files, taken while its cgroups are frozen (see
        :mod:`.snapshot`); needs the cgroups, which a sandbox has when run as root."""
        self._usable_channel()
        assert self._limits is not None and self._meta is not None
        if not self._limits.cgroups:
            raise SandboxError(
                f"sandbox {self.id} cannot be snapshot without cgroups to freeze it while its "
                f"files are copied ({self._limits.description}); run as root on a host with "
                "cgroups"
            )
        try:
            return await in_thread(
                take_snapshot,
                self.sandbox_dir,
                self._meta,
                self.spec,
                self._limits.cgroups,
                self._snapshots,
            )
        except OSError as exc:  # a cgroup that would not freeze, a full disk
            raise SandboxError(f"cannot snapshot sandbox {self.id}: {exc}") from exc

    # -- lifecycle -----------------------------------------------------------------------------

    async def _start(
        self,
        command: BwrapCommand,
        child: concurrent.futures.Future[tuple[int, int] | None],
        admitted: asyncio.Future[None],
    ) -> None:
        """Launch bwrap as the sandbox's root uid; hand its pid and its child's to ``child``,
        which a thread waits on (:func:`admit`: the ids mapped, the cgroups joined, the child
        let go on, the record written, once the sandbox's files are made); wait for
        ``admitted`` (that thread) and for the helper's greeting. Takes ``command``'s
        descriptors (closed here, whatever happens, once the thread is over); ``child`` is
        always resolved (None when the start failed first), so the thread never waits for
        good."""
        info_r, info_w = os.pipe()
        limits = self._limits
        assert limits is not None
        # bwrap leads a process group of its own: between its clone() and the moment its
        # child takes a parent-death signal, killing bwrap alone would orphan the child (it
        # waits for bwrap's go-ahead forever, holding the sandbox's pipes). The group has both.
        # The spawn is shielded, so a cancelled start still learns the process and reads its
        # info below: close() can then kill the helper or the group (asyncio's own clean-up
        # of a cancelled spawn would kill bwrap alone).
        spawning = asyncio.ensure_future(
            start_piped(
                ["bwrap", "--info-fd", str(info_w), *command.argv],
                pass_fds=(info_w, *limits.pass_fds, *command.pass_fds),
                limit=_STREAM_LIMIT,
                uid=id_base(),
                detach=command.detach,
            )
        )
        try:
            try:
                self._proc, cancelled = await outcome(spawning)
            except OSError as exc:
                raise SandboxError(f"cannot start bubblewrap for sandbox {self.id}: {exc}") from exc
            finally:
                os.close(info_w)
                limits.close_fds()
                command.close_fds()
                if self._proc is None:
                    os.close(info_r)
            self._start_watchers()
            # bwrap writes its child's pid as soon as it made the namespaces, then waits for
            # the user namespace's maps (or closes the fd as it fails). Even when this start is
            # cancelled meanwhile, the pid is read and a pidfd opened: close() must be able to
            # kill the helper, which could otherwise outlive bwrap.
            info, cancelled_reading = await outcome(asyncio.ensure_future(_read_to_end(info_r)))
            cancelled = cancelled or cancelled_reading
            if cancelled is not None:
                try:
                    self._adopt_helper(info)
                except (ValueError, KeyError):
                    pass  # bwrap failed before it made the namespaces
                raise cancelled
            try:
                child_pid = self._adopt_helper(info)
            except (ValueError, KeyError):
                raise await self._death_report() from None  # no child pid: bwrap failed early
            child.set_result((self._proc.pid, child_pid))
            _, cancelled = await outcome(admitted)  # its failure propagates from here
            if cancelled is not None:
                raise cancelled
        finally:
            if not child.done():
                child.set_result(None)
            # Closed unwritten (a failed start), bwrap's child goes on with no ids mapped,
            # which can only fail: it is the unprivileged uid of the range on the host.
            os.close(command.userns_block)
        await self._channel.ready(_START_TIMEOUT_S)

    def _start_watchers(self) -> None:
        """The helper channel on bwrap's pipes, and the tasks that follow bwrap and its
        stderr: what close() waits for."""
        assert self._proc is not None
        assert self._proc.stdout is not None and self._proc.stdin is not None
        self._channel = HelperChannel(
            self._proc.stdout,
            self._proc.stdin,
            name=self.id,
            workdir=self.spec.workdir,
            on_eof=self._death_report,
        )
        self._stderr_task = asyncio.create_task(self._read_stderr())
        self._watch_task = asyncio.create_task(self._follow_bwrap())

    def _adopt_helper(self, info: bytes) -> int:
        """Take the helper's pid from bwrap's info and open a pidfd for it."""
        assert self._proc is not None
        child_pid = int(json.loads(info)["child-pid"])
        self._helper_pidfd = _open_child_pidfd(child_pid, self._proc.pid)
        return child_pid

    async def close(self) -> None:
        """Kill every process of the sandbox, wait until they are gone, remove its files.

        Idempotent. A caller cancelled meanwhile (even repeatedly) still waits until it is
        complete, then gets its cancellation.
        """
        if self._closed_now:
            return
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._shutdown())
        await await_to_the_end(self._closing)

    async def _shutdown(self) -> None:
        proc = self._proc
        if self._channel is not None:
            self._channel.begin_close()
        if proc is not None:
            # SIGKILL to the sandbox's pid 1 makes the kernel kill everything in its pid
            # namespace; bwrap exits only after that, so its exit means nothing is left.
            try:
                if self._helper_pidfd is not None:
                    signal.pidfd_send_signal(self._helper_pidfd, signal.SIGKILL)
                else:
                    _kill_group(proc)
            except ProcessLookupError:
                pass
            if proc.stdin is not None:
                # A helper still alive for any reason (no pidfd for it yet) exits when its
                # request pipe reaches end of file; proc.wait() also waits for its pipes.
                proc.stdin.close()
            if self._limits is not None and self._limits.cgroups:
                # A command the helper was freezing to kill it stays frozen now that the helper
                # is dead, and a frozen process ignores SIGKILL until thawed.
                await asyncio.to_thread(kill_and_thaw, self._limits.cgroups)
            try:
                await asyncio.wait_for(proc.wait(), _CLOSE_TIMEOUT_S)
            except TimeoutError:
                _kill_group(proc)  # with --die-with-parent, bwrap's death takes pid 1 along
                await proc.wait()
            assert self._channel is not None and self._stderr_task is not None
            await self._channel.closed()
            await self._stderr_task
            if self._watch_task is not None:
                await self._watch_task
        if self._helper_pidfd is not None:
            os.close(self._helper_pidfd)
        await asyncio.to_thread(release_and_remove, self._limits, self.sandbox_dir)
        self._on_close(self)

    def close_now(self) -> None:
        """Kill the sandbox, wait for it to be gone and free its resources, blocking; for
        process exit. Pending requests are left unanswered (their loop is gone or stopping)."""
        if self._closed_now or (self._closing is not None and self._closing.done()):
            return
        self._closed_now = True
        if self._channel is not None:
            self._channel.begin_close()
        proc = self._proc
        if proc is not None:
            try:
                if self._helper_pidfd is not None:
                    signal.pidfd_send_signal(self._helper_pidfd, signal.SIGKILL)
                _kill_group(proc)
            except (ProcessLookupError, OSError):
                pass
            if self._limits is not None:
                kill_and_thaw(self._limits.cgroups)  # see _shutdown
            wait_gone(proc.pid, self.sandbox_dir)
        release_and_remove(self._limits, self.sandbox_dir)
        self._on_close(self)

    async def _follow_bwrap(self) -> None:
        """When bwrap dies, its sandbox dies with it (bwrap's --die-with-parent does it too;
        this covers a helper that lost its parent-death signal)."""
        assert self._proc is not None
        # Not proc.wait(): it also waits for the pipes, which the helper holds open.
        try:
            pidfd = os.pidfd_open(self._proc.pid)
        except ProcessLookupError:
            pidfd = None
        if pidfd is not None:
            loop = asyncio.get_running_loop()
            exited = loop.create_future()
            loop.add_reader(pidfd, lambda: exited.done() or exited.set_result(None))
            try:
                await exited
            finally:
                loop.remove_reader(pidfd)
                os.close(pidfd)
        if self._helper_pidfd is not None and self._closing is None:
            try:
                signal.pidfd_send_signal(self._helper_pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while chunk := await self._proc.stderr.read(_STREAM_LIMIT):
            self._stderr_tail += chunk
            del self._stderr_tail[:-_STDERR_TAIL]

    async def _death_report(self) -> SandboxError:
        assert self._proc is not None and self._stderr_task is not None
        try:  # let bwrap exit and its last words arrive
            await asyncio.wait_for(self._proc.wait(), 2.0)
            await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
        except TimeoutError:
            pass
        tail = self._stderr_tail.decode(errors="replace").strip()
        return SandboxError(
            f"sandbox {self.id} stopped unexpectedly (bwrap exit status {self._proc.returncode})"
            + (f": {tail}" if tail else "")
        )


async def outcome(work: asyncio.Future[Any]) -> tuple[Any, asyncio.CancelledError | None]:
    """``work``'s result and, when the caller was cancelled meanwhile and ``work`` succeeded
    all the same, the cancellation, to raise once what ``work`` made is taken care of (a
    spawned process, the helper's pid). When ``work`` failed or was cancelled itself, the
    caller's cancellation is raised at once."""
    try:
        return await await_to_the_end(work), None
    except asyncio.CancelledError as exc:
        if work.cancelled() or work.exception() is not None:
            raise
        return work.result(), exc


async def in_thread(func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)`` in a thread, waited for to the end even when the caller is cancelled
    (see :func:`await_to_the_end`)."""
    return await await_to_the_end(asyncio.ensure_future(asyncio.to_thread(func, *args)))


def _kill_group(proc: PipedProcess | asyncio.subprocess.Process) -> None:
    """SIGKILL bwrap's process group (bwrap, and its child until the child starts a session
    of its own), unless bwrap was reaped already: then its pid may name another group."""
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


async def _read_to_end(fd: int) -> bytes:
    """Read ``fd`` until EOF in the event loop, then close it (here, so a cancelled caller
    cannot close it under the reader)."""
    loop = asyncio.get_running_loop()
    chunks: list[bytes] = []
    done: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return
        except OSError as exc:
            if not done.done():
                done.set_exception(exc)
            return
        if chunk:
            chunks.append(chunk)
        elif not done.done():
            done.set_result(None)

    try:
        os.set_blocking(fd, False)
        loop.add_reader(fd, readable)
        try:
            await done
        finally:
            loop.remove_reader(fd)
    finally:
        os.close(fd)
    return b"".join(chunks)


def admit(
    child: concurrent.futures.Future[tuple[int, int] | None],
    sandbox_dir: Path,
    meta: SandboxMeta,
    limits: SandboxLimits,
    userns_block: int,
) -> SandboxMeta | None:
    """Once :meth:`LocalSandbox._start` hands over bwrap's pid and its child's (waiting for
    them: run in a thread), map the sandbox's ids into the child's user namespace, move it into
    the sandbox's cgroups (before the helper runs: everything it starts inherits both), let it
    go on (a byte on ``userns_block``, from here rather than after a hop back to the event
    loop), then record bwrap's pid in meta.json; the record, or None when the start failed
    first. Blocking. ``userns_block`` stays open until this returns (the caller waits)."""
    pids = child.result()
    if pids is None:
        return None
    bwrap_pid, child_pid = pids
    try:
        write_id_maps(child_pid)
        if limits.cgroups:
            limits.add_process(child_pid)
        os.write(userns_block, b"1")
    except (ProcessLookupError, BrokenPipeError):
        pass  # bwrap's child died at once: the channel reports why
    except OSError as exc:
        raise SandboxError(f"cannot set up sandbox {meta.sandbox_id}'s namespace: {exc}") from exc
    meta = dataclasses.replace(
        meta, cgroups=limits.cgroups, mounts=limits.mounts, bwrap_pid=bwrap_pid
    )
    meta.write(sandbox_dir)
    return meta


def _open_child_pidfd(pid: int, parent: int) -> int | None:
    """A pidfd for ``pid`` if it is ``parent``'s child once opened (so not a reused pid)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    stat = proc_stat(pid)
    if stat is not None and int(stat[1]) == parent:
        return pidfd
    os.close(pidfd)
    return None
