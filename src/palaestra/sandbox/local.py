"""The local backend: sandboxes made of Linux namespaces with bubblewrap.

A sandbox is one long-lived ``bwrap`` process with its own mount, pid, network, ipc and uts
namespaces. Its root is an empty read-only tmpfs on which the host's system directories
(``/usr``, ``/etc``...) are bound read-only; the writable directories of the spec (the workdir,
``/tmp``, ``/logs``..., plus ``/root`` and ``/var/tmp``) are bound from per-sandbox directories
on the host under the state directory. Nothing else of the host is visible.

Pid 1 of the sandbox is a small stdlib-only helper (:mod:`palaestra.sandbox._helper`) that runs
commands on request over bwrap's stdin/stdout, so an exec costs a round trip, not a process
launch. Files move in and out as tar streams through the helper, never by touching the backing
directories from the host: a symlink planted inside would make host-side paths escape. (The
one exception is a warm sandbox's spec files, copied in on the host when it is handed out,
before anything but the helper ran in it; see :class:`LocalBackend`.)

Requirements: Linux, bubblewrap, running as root (or with a setuid bwrap), and a Python 3.9+
at ``/usr/bin/python3`` on the host for the helper.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import functools
import hashlib
import importlib.util
import json
import logging
import os
import posixpath
import py_compile
import re
import secrets
import shutil
import signal
import stat
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from palaestra.sandbox._channel import HelperChannel, sandbox_path
from palaestra.sandbox.base import (
    DEFAULT_OUTPUT_LIMIT,
    ExecResult,
    Sandbox,
    SandboxBackend,
    SandboxClosedError,
    SandboxError,
    SandboxSpec,
    await_to_the_end,
)
from palaestra.sandbox.janitor import (
    RUN_ID_LABEL,
    SandboxMeta,
    clean_up_at_exit,
    proc_stat,
    process_start_time,
    reclaim_leftovers,
    wait_gone,
)
from palaestra.sandbox.limits import (
    SandboxLimits,
    apply_limits,
    favor_dynamic_moves,
    kill_and_thaw,
    mounts_under,
    unmount,
)
from palaestra.sandbox.limits import mount as mount_fs
from palaestra.sandbox.limits import release as release_limits

log = logging.getLogger(__name__)

DEFAULT_STATE_DIR = Path("/tmp/palaestra-sandboxes")
#: Environment variable giving :class:`LocalBackend`'s default ``warm`` pool size.
WARM_ENV = "PALAESTRA_WARM_SANDBOXES"

#: Host directories bound read-only at the same place (symlinks are recreated as symlinks);
#: /etc is filtered.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc", "/opt")
#: Never shown from the host's /etc, whatever their permissions.
ETC_SECRETS = frozenset({
    "shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d", "master.passwd",
    "opasswd", "private", "krb5.keytab", "credstore", "credstore.encrypted", "wireguard",
    "system-connections",
})  # fmt: skip
#: Always writable besides the spec's directories; HOME is /root.
EXTRA_WRITABLE_DIRS = ("/root", "/var/tmp")
_STICKY_DIRS = frozenset({"/tmp", "/var/tmp"})
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
}
#: Docker's default capability set minus CAP_MKNOD (a block device node would reach the host's
#: disks: there is no device cgroup here), CAP_NET_RAW and CAP_SETPCAP (bwrap, run as root,
#: leaves the bounding set full; with no_new_privs, which bwrap sets, and without SETPCAP,
#: nothing can regain a capability). Root inside keeps root's file access and can switch
#: users, but cannot mount, ptrace, load modules or change the clock.
CAPABILITIES = (
    "CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
    "CAP_NET_BIND_SERVICE", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETUID", "CAP_SYS_CHROOT",
)  # fmt: skip

_HELPER = Path(__file__).with_name("_helper")
_HELPER_DIR_IN_SANDBOX = "/.palaestra"
# Imported rather than run as a script, so that its bytecode is loaded, not compiled anew at
# every start; `main` as its first argument marks the helper in `ps`.
_HELPER_BOOT = (
    "import sys; sys.path.insert(0, '/.palaestra'); from _helper.server import main; main()"
)
_PYTHON = "/usr/bin/python3"
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

_START_TIMEOUT_S = 60.0
_CLOSE_TIMEOUT_S = 10.0
_STDERR_TAIL = 4096
_STREAM_LIMIT = 1 << 20


class LocalBackend(SandboxBackend):
    """Creates bubblewrap sandboxes on this machine.

    Sandboxes are recorded under ``state_dir/<run_id>/`` (``state_dir`` defaults to
    ``$PALAESTRA_STATE_DIR`` or ``/tmp/palaestra-sandboxes``). Before its first sandbox, a
    backend reclaims what dead runs left there (see :mod:`palaestra.sandbox.janitor`); this
    happens in ``create`` rather than the constructor to keep the blocking work off the loop.

    ``warm`` (default ``$PALAESTRA_WARM_SANDBOXES``, else 0: off) keeps that many sandboxes
    started ahead of time for each of the :attr:`warm_keys` most recently created kinds of
    sandbox. A kind is every spec field but ``files`` and ``labels``, the two that do not change
    how a sandbox starts. ``create`` hands out a warm sandbox of the spec's kind when there is
    one: the spec's files are copied into its writable directories on the host (nothing but the
    helper has run in it, so no link can have been planted), its record gets the spec's labels,
    and a replacement starts in the background. Otherwise it starts one as usual, then fills the
    pool of that kind in the background. A handed-out sandbox is like a fresh one in every way;
    it is never handed out twice. Warm sandboxes are open sandboxes of this backend: ``aclose``,
    process exit and the janitor close them like any other.
    """

    name = "local"
    #: How many kinds of sandbox (see above) keep a warm pool; the least recently created kind
    #: beyond that loses its pool, and its warm sandboxes are closed.
    warm_keys = 2

    def __init__(
        self,
        run_id: str | None = None,
        state_dir: Path | str | None = None,
        *,
        warm: int | None = None,
    ) -> None:
        self.run_id = run_id or secrets.token_hex(6)
        if not _RUN_ID.fullmatch(self.run_id):
            raise ValueError(f"run_id {self.run_id!r} must match {_RUN_ID.pattern}")
        self.state_dir = Path(
            state_dir or os.environ.get("PALAESTRA_STATE_DIR") or DEFAULT_STATE_DIR
        ).absolute()
        self.warm = _warm_from_env() if warm is None else warm
        if self.warm < 0:
            raise ValueError(f"warm={self.warm}: the warm pool size cannot be negative")
        #: Sandboxes handed out of a warm pool, and sandboxes started for one (figures; tests).
        self.pool_hits = 0
        self.pool_started = 0
        self._open: set[LocalSandbox] = set()
        self._pools: OrderedDict[Hashable, _Pool] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()  # refills and closes of evicted pools
        self._closing = False
        self._starting_up: asyncio.Future[None] | None = None  # the start-up janitor pass
        self._owner = (os.getpid(), process_start_time(os.getpid()))

    async def create(self, spec: SandboxSpec) -> LocalSandbox:
        if spec.image is not None and spec.rootfs is None:
            raise SandboxError(
                f"the local backend cannot run image {spec.image!r} itself: export it to a "
                "directory and pass it as SandboxSpec.rootfs, or use the docker backend"
            )
        writable = _writable_dirs(spec)
        files = _files_to_copy(spec, writable)
        # Every create waits for the start-up janitor pass (once per backend, even when it
        # failed): one racing it could have its run directory removed while still empty.
        starting = self._starting_up
        if starting is None or (
            not starting.done() and starting.get_loop() is not asyncio.get_running_loop()
        ):
            starting = self._starting_up = asyncio.ensure_future(self._start_up())
        if not starting.done():
            await asyncio.shield(starting)
        pool = self._pool_for(spec) if self.warm else None
        if pool is not None and (sandbox := await self._take(pool, spec, files)) is not None:
            self.pool_hits += 1
        else:
            sandbox = await self._launch(spec, writable, files)
        if pool is not None:
            self._refill(pool)
        return sandbox

    async def _start_up(self) -> None:
        clean_up_at_exit(_close_all_now)
        await asyncio.to_thread(reclaim_leftovers, self.state_dir)
        if os.geteuid() == 0:
            moves = await asyncio.to_thread(favor_dynamic_moves)
            log.debug("cgroup2 favordynmods: %s", moves)

    async def _launch(
        self, spec: SandboxSpec, writable: list[str], files: dict[str, Path]
    ) -> LocalSandbox:
        """Start a sandbox for ``spec`` (a cold start)."""
        sandbox_id = f"sb-{secrets.token_hex(6)}"
        sandbox_dir = self.state_dir / self.run_id / sandbox_id
        meta = SandboxMeta(
            sandbox_id=sandbox_id,
            owner_pid=self._owner[0],
            owner_start=self._owner[1],
            labels={**spec.labels, RUN_ID_LABEL: self.run_id},
        )
        sandbox = LocalSandbox(sandbox_id, spec, sandbox_dir, on_close=self._closed)
        self._open.add(sandbox)
        _live.add(sandbox)
        populating = asyncio.ensure_future(
            asyncio.to_thread(_populate, spec, sandbox_dir, meta, writable, files)
        )
        try:
            sandbox._limits = await await_to_the_end(populating)
            meta = dataclasses.replace(
                meta,
                cgroups=sandbox._limits.cgroups,
                mounts=sandbox._limits.mounts,
            )
            await sandbox._start(_bwrap_args(spec, sandbox_dir, writable, sandbox._limits))
            sandbox._meta = meta = dataclasses.replace(meta, bwrap_pid=sandbox.bwrap_pid)
            await _in_thread(meta.write, sandbox_dir)
        except BaseException:
            if populating.done() and not populating.cancelled() and not populating.exception():
                sandbox._limits = populating.result()  # cancelled meanwhile: release them too
            await sandbox.close()
            raise
        return sandbox

    # -- the warm pool -------------------------------------------------------------------------

    def _pool_for(self, spec: SandboxSpec) -> _Pool | None:
        """The pool of ``spec``'s kind, made if new and marked most recently used; None for a
        spec that cannot be a key (a field holds something unhashable)."""
        key = _pool_key(spec)
        if key is None:
            return None
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _Pool(key, dataclasses.replace(spec, files={}, labels={}))
        self._pools.move_to_end(key)
        while len(self._pools) > self.warm_keys:
            _, evicted = self._pools.popitem(last=False)
            self._drop(evicted)
        return pool

    def _drop(self, pool: _Pool) -> None:
        """Stop filling an evicted pool and close its warm sandboxes, in the background."""
        if pool.fill is not None:
            pool.fill.cancel()
        ready = list(pool.ready)
        pool.ready.clear()
        if ready:
            self._track(_close_all(ready))

    async def _take(
        self, pool: _Pool, spec: SandboxSpec, files: dict[str, Path]
    ) -> LocalSandbox | None:
        """A warm sandbox of ``pool`` made into one for ``spec``, or None when none is left."""
        while pool.ready:
            sandbox = pool.ready.popleft()
            if not sandbox._is_running():  # died while it waited (killed from outside)
                await sandbox.close()
                continue
            assert sandbox._meta is not None
            meta = dataclasses.replace(
                sandbox._meta, labels={**spec.labels, RUN_ID_LABEL: self.run_id}
            )
            try:
                await _in_thread(_hand_out, sandbox.sandbox_dir, files, meta)
            except BaseException:
                await sandbox.close()
                raise
            sandbox.spec, sandbox._meta = spec, meta
            return sandbox
        return None

    def _refill(self, pool: _Pool) -> None:
        """Start filling ``pool`` back up in the background, unless that is under way, the pool
        was evicted meanwhile or the backend is closing."""
        if pool.fill is None and not self._closing and self._pools.get(pool.key) is pool:
            pool.fill = self._track(self._fill(pool))

    async def _fill(self, pool: _Pool) -> None:
        """Start warm sandboxes one at a time (leaving the CPU to running episodes) until the
        pool holds :attr:`warm`. A failure ends the refill: the next create is cold."""
        try:
            writable = _writable_dirs(pool.spec)
            while self._wants(pool) and len(pool.ready) < self.warm:
                sandbox = await self._launch(pool.spec, writable, {})
                self.pool_started += 1
                if not self._wants(pool):
                    await sandbox.close()
                    break
                pool.ready.append(sandbox)
        except Exception as exc:
            log.warning(
                "could not start a warm sandbox (%s); the next one of its kind starts cold", exc
            )
        finally:
            pool.fill = None

    def _wants(self, pool: _Pool) -> bool:
        return not self._closing and self._pools.get(pool.key) is pool

    def _track(self, coro: Any) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def pool_ready(self) -> None:
        """Wait until the warm pools' background work is over: each pool full (or its refill
        failed) and evicted warm sandboxes closed. Using the pool never needs it; it is there
        to warm up before a first batch of episodes, and for tests and benchmarks."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        """Close every sandbox this backend created that is still open, warm ones included,
        once background refills are stopped."""
        self._closing = True
        try:
            for pool in self._pools.values():
                if pool.fill is not None:
                    pool.fill.cancel()
            self._pools.clear()
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
            await asyncio.gather(*(sandbox.close() for sandbox in list(self._open)))
        finally:
            self._closing = False
        try:
            await asyncio.to_thread(os.rmdir, self.state_dir / self.run_id)
        except OSError:
            pass  # never created, or holds sandboxes of another backend with this run id

    def _closed(self, sandbox: LocalSandbox) -> None:
        self._open.discard(sandbox)
        _live.discard(sandbox)


@dataclasses.dataclass(eq=False)
class _Pool:
    """Warm sandboxes of one kind: started from ``spec`` (files and labels left out)."""

    key: Hashable
    spec: SandboxSpec
    ready: deque[LocalSandbox] = dataclasses.field(default_factory=deque)
    fill: asyncio.Task[None] | None = None


async def _outcome(work: asyncio.Future[Any]) -> tuple[Any, asyncio.CancelledError | None]:
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


async def _in_thread(func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)`` in a thread, waited for to the end even when the caller is cancelled
    (see :func:`await_to_the_end`)."""
    return await await_to_the_end(asyncio.ensure_future(asyncio.to_thread(func, *args)))


def _pool_key(spec: SandboxSpec) -> Hashable | None:
    """What determines how a sandbox for ``spec`` starts: every field but files and labels."""
    items = []
    for f in dataclasses.fields(spec):
        if f.name not in ("files", "labels"):
            value = getattr(spec, f.name)
            value = tuple(sorted(value.items())) if isinstance(value, dict) else value
            items.append((f.name, value))
    key = tuple(items)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _warm_from_env() -> int:
    raw = os.environ.get(WARM_ENV, "").strip()
    try:
        return int(raw) if raw else 0
    except ValueError:
        raise ValueError(
            f"{WARM_ENV}={raw!r} must be a whole number of sandboxes to keep started (0: none)"
        ) from None


async def _close_all(sandboxes: list[LocalSandbox]) -> None:
    await asyncio.gather(*(sandbox.close() for sandbox in sandboxes))


def _hand_out(sandbox_dir: Path, files: dict[str, Path], meta: SandboxMeta) -> None:
    """Copy a spec's files into a warm sandbox and record its labels. Blocking; only before
    anything but the helper has run in the sandbox (no planted links)."""
    _copy_files(sandbox_dir, files)
    meta.write(sandbox_dir)


#: Every open local sandbox of this process, whatever became of its backend object: what
#: :func:`_close_all_now` closes at exit.
_live: set[LocalSandbox] = set()


def _close_all_now() -> None:
    """Close every open sandbox synchronously, blocking; registered with
    :func:`palaestra.sandbox.janitor.clean_up_at_exit` (exit, SIGTERM...), when no event loop
    may be left. Their now empty run directories go too."""
    for sandbox in list(_live):
        if sandbox.owner_pid != os.getpid():
            continue  # in a forked child: the sandbox is its parent's
        sandbox.close_now()
        try:
            os.rmdir(sandbox.sandbox_dir.parent)
        except OSError:
            pass  # other sandboxes of the run are still there


class LocalSandbox(Sandbox):
    """A running bubblewrap sandbox; made by :meth:`LocalBackend.create`."""

    def __init__(
        self,
        sandbox_id: str,
        spec: SandboxSpec,
        sandbox_dir: Path,
        on_close: Callable[[LocalSandbox], None],
    ) -> None:
        self.id = sandbox_id
        self.spec = spec
        self.sandbox_dir = sandbox_dir
        self._on_close = on_close
        self._proc: asyncio.subprocess.Process | None = None
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

    # -- lifecycle -----------------------------------------------------------------------------

    async def _start(self, bwrap_args: list[str]) -> None:
        """Launch bwrap and wait for the helper's greeting."""
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
            asyncio.create_subprocess_exec(
                "bwrap",
                "--info-fd",
                str(info_w),
                *bwrap_args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(info_w, *limits.pass_fds),
                limit=_STREAM_LIMIT,
                process_group=0,
            )
        )
        try:
            self._proc, cancelled = await _outcome(spawning)
        except OSError as exc:
            raise SandboxError(f"cannot start bubblewrap for sandbox {self.id}: {exc}") from exc
        finally:
            os.close(info_w)
            limits.close_fds()
            if self._proc is None:
                os.close(info_r)
        self._start_watchers()
        # bwrap writes the helper's pid once the sandbox is set up (or closes the fd as it
        # fails). Even when this start is cancelled meanwhile, the pid is read and a pidfd
        # opened: close() must be able to kill the helper, which could otherwise outlive bwrap.
        info, cancelled_reading = await _outcome(
            asyncio.ensure_future(asyncio.to_thread(_read_to_end, info_r))
        )
        cancelled = cancelled or cancelled_reading
        if cancelled is not None:
            try:
                self._adopt_helper(info)
            except (ValueError, KeyError):
                pass  # bwrap failed before it started the helper
            raise cancelled
        try:
            child_pid = self._adopt_helper(info)
        except (ValueError, KeyError):
            raise await self._death_report() from None  # no helper pid: bwrap failed early
        if limits.cgroups:
            # Before the first command: everything the helper starts inherits the cgroups.
            try:
                await asyncio.to_thread(limits.add_process, child_pid)
            except ProcessLookupError:
                pass  # the helper died at once: the channel reports why, just below
            except OSError as exc:
                raise SandboxError(
                    f"cannot move sandbox {self.id} into its cgroups: {exc}"
                ) from exc
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
        await asyncio.to_thread(_release_and_remove, self._limits, self.sandbox_dir)
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
        _release_and_remove(self._limits, self.sandbox_dir)
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

    def _usable_channel(self) -> HelperChannel:
        if self.closed or self._channel is None:
            raise SandboxClosedError(f"sandbox {self.id} is closed")
        return self._channel

    # -- the Sandbox API -----------------------------------------------------------------------

    async def exec(
        self,
        cmd: str | list[str],
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | int | None = None,
        stdin: str | bytes | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> ExecResult:
        return await self._usable_channel().exec(
            cmd, timeout=timeout, cwd=cwd, env=env, user=user, stdin=stdin,
            output_limit=output_limit,
        )  # fmt: skip

    async def upload(self, src: Path | str, dst: str) -> None:
        """Copy a host file to exactly ``dst``, or a host directory's contents into ``dst``.

        Parents are created; an existing directory at ``dst`` receives the new contents.
        """
        await self._usable_channel().upload(src, dst)

    async def download(self, src: str, dst: Path | str) -> None:
        """Copy the in-sandbox file ``src`` to exactly ``dst``, or a directory's contents into it.

        Symbolic links are never followed: ``src`` itself must not be one, and links inside a
        directory that point outside of it (or anywhere absolute) are left out.
        """
        await self._usable_channel().download(src, dst)

    async def kill_all(self) -> None:
        await self._usable_channel().kill_all()


# -- building the sandbox ------------------------------------------------------------------------


def _is_within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _writable_dirs(spec: SandboxSpec) -> list[str]:
    """Every writable directory, sorted (so a directory comes before the ones inside it)."""
    dirs = {sandbox_path(d) for d in (spec.workdir, *spec.writable_dirs, *EXTRA_WRITABLE_DIRS)}
    if "/" in dirs:
        raise SandboxError("the local backend cannot make / writable; list subdirectories")
    return sorted(dirs)


def _outermost(dirs: list[str]) -> list[str]:
    """The sorted ``dirs`` that are not inside another one: only these need a bind mount."""
    roots: list[str] = []
    for d in dirs:
        if not roots or not _is_within(d, roots[-1]):
            roots.append(d)
    return roots


def _files_to_copy(spec: SandboxSpec, writable: list[str]) -> dict[str, Path]:
    files = {}
    for target, source in spec.files.items():
        path = sandbox_path(target)
        if not any(_is_within(path, d) for d in writable):
            raise SandboxError(
                f"spec.files target {target} is not inside a writable directory "
                f"({', '.join(writable)}); add its directory to writable_dirs"
            )
        files[path] = Path(source)
    return files


def _backing(sandbox_dir: Path, path: str) -> Path:
    """The host directory behind the in-sandbox ``path`` (inside a writable directory)."""
    return sandbox_dir / "fs" / path.lstrip("/")


def _populate(
    spec: SandboxSpec,
    sandbox_dir: Path,
    meta: SandboxMeta,
    writable: list[str],
    files: dict[str, Path],
) -> SandboxLimits:
    """Create the sandbox's directory, its meta.json, its limits (cgroups, disk quota) and
    backing directories; copy files in.

    Runs before the sandbox starts, when nothing inside can have planted links yet.
    """
    state_dir = sandbox_dir.parent.parent
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for attempt in range(3):
        try:
            sandbox_dir.mkdir(parents=True)
            break
        except FileNotFoundError:
            # The run directory was empty for a moment and went (a janitor, or the run's
            # last sandbox closing): make it again.
            if attempt == 2:
                raise
    meta.write(sandbox_dir)
    _helper_dir(state_dir)  # made once per process, here rather than on the event loop
    if spec.rootfs is None:
        _system_dir_args()
    else:
        _check_rootfs(Path(spec.rootfs))
    run_id = meta.labels[RUN_ID_LABEL]
    limits = apply_limits(spec, f"{run_id}.{meta.sandbox_id}", sandbox_dir / "fs")
    try:
        if spec.rootfs is not None:
            # The writable layer lives in fs/ (under the disk quota when there is one); it
            # disappears with the sandbox, the shared read-only rootfs stays as it was.
            layer = sandbox_dir / "fs" / ".overlay"
            (layer / "upper").mkdir(parents=True)
            (layer / "work").mkdir()
            (sandbox_dir / "root").mkdir()
            mount_fs(
                "overlay", sandbox_dir / "root", "overlay",
                f"lowerdir={Path(spec.rootfs).resolve()},upperdir={layer / 'upper'},"
                f"workdir={layer / 'work'}",
            )  # fmt: skip
            limits.mounts.append(str(sandbox_dir / "root"))
        dataclasses.replace(meta, cgroups=limits.cgroups, mounts=limits.mounts).write(sandbox_dir)
        _make_backing(sandbox_dir, writable, files)
    except BaseException:
        release_limits(limits)
        raise
    return limits


def _check_rootfs(rootfs: Path) -> None:
    if not rootfs.is_dir():
        raise SandboxError(f"SandboxSpec.rootfs {rootfs} is not a directory")
    if any(c in str(rootfs.resolve()) for c in ",:\\"):
        raise SandboxError(
            f"SandboxSpec.rootfs {rootfs}: overlayfs cannot take a path with ',', ':' or '\\'; "
            "move or link it elsewhere"
        )
    python = rootfs / _PYTHON.lstrip("/")
    if not (python.exists() or python.is_symlink()):
        raise SandboxError(
            f"SandboxSpec.rootfs {rootfs} has no {_PYTHON}: the local backend runs its helper "
            "with the image's Python 3.9+. Install it in the image (Debian: "
            "`apt-get install -y python3-minimal`) or use the docker backend"
        )


def _make_backing(sandbox_dir: Path, writable: list[str], files: dict[str, Path]) -> None:
    for path in writable:
        _backing(sandbox_dir, path).mkdir(parents=True, exist_ok=True)
        if path in _STICKY_DIRS:
            _backing(sandbox_dir, path).chmod(0o1777)
    _copy_files(sandbox_dir, files)


def _copy_files(sandbox_dir: Path, files: dict[str, Path]) -> None:
    """Copy a spec's files into the backing directories (which exist)."""
    for target, source in files.items():
        dest = _backing(sandbox_dir, target)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)
        elif source.exists():
            shutil.copy2(source, dest)
        else:
            raise FileNotFoundError(errno.ENOENT, "spec.files source does not exist", str(source))


def _bwrap_args(
    spec: SandboxSpec, sandbox_dir: Path, writable: list[str], limits: SandboxLimits
) -> list[str]:
    argv = [
        "--die-with-parent", "--new-session", "--as-pid-1",
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--hostname", spec.hostname, "--cap-drop", "ALL",
    ]  # fmt: skip
    if spec.network == "none":
        argv.append("--unshare-net")
    for cap in CAPABILITIES:
        argv += ["--cap-add", cap]
    if spec.rootfs is not None:  # the overlay made by _populate, writable, as the root
        argv += ["--bind", str(sandbox_dir / "root"), "/"]
    else:
        argv += _system_dir_args()
    argv += ["--proc", "/proc", "--dev", "/dev"]
    binds = [("--bind", str(_backing(sandbox_dir, path)), path) for path in _outermost(writable)]
    for mount in sorted(spec.mounts, key=lambda m: sandbox_path(m.target).count("/")):
        binds.append(
            ("--ro-bind" if mount.read_only else "--bind", str(mount.source), mount.target)
        )
    binds.append(("--ro-bind", str(_helper_dir(sandbox_dir.parent.parent)), _HELPER_DIR_IN_SANDBOX))
    made: set[str] = set()
    for kind, source, target in binds:
        argv += [*_make_parents(sandbox_path(target), made), kind, source, target]
    if spec.rootfs is None:
        argv += ["--remount-ro", "/"]
    argv += ["--chdir", "/", "--clearenv"]
    for key, value in {**BASE_ENV, **spec.env}.items():
        argv += ["--setenv", key, value]
    config = json.dumps(limits.helper, separators=(",", ":"))
    return [*argv, "--", _PYTHON, "-I", "-S", "-B", "-c", _HELPER_BOOT, config]


_helper_dir_lock = threading.Lock()


def _helper_dir(state_dir: Path) -> Path:
    with _helper_dir_lock:  # creation threads run concurrently
        made = _make_helper_dir(state_dir)
        if not (made / "_helper").is_dir():  # removed by hand meanwhile
            _make_helper_dir.cache_clear()
            made = _make_helper_dir(state_dir)
        return made


@functools.cache
def _make_helper_dir(state_dir: Path) -> Path:
    """``<state_dir>-helper/<hash>/_helper/``: the helper package's sources and their bytecode
    for this Python version, made once (beside the state directory, which janitors sweep). An
    interpreter of another version inside a root filesystem finds no bytecode of its own there
    and compiles the sources (a few milliseconds more per start)."""
    sources = {path.name: path.read_bytes() for path in sorted(_HELPER.glob("*.py"))}
    digest = hashlib.sha256(
        b"".join(name.encode() + b"\0" + data for name, data in sources.items())
    )
    target = Path(f"{state_dir}-helper") / digest.hexdigest()[:16]
    if not (target / "_helper").is_dir():
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / "_helper").mkdir(parents=True)
        for name in sources:
            copy = tmp / "_helper" / name
            shutil.copy2(_HELPER / name, copy)
            py_compile.compile(
                str(copy),
                cfile=importlib.util.cache_from_source(str(copy)),
                dfile=f"{_HELPER_DIR_IN_SANDBOX}/_helper/{name}",
                doraise=True,
            )
        try:
            tmp.rename(target)
        except OSError:  # made meanwhile by another process
            shutil.rmtree(tmp, ignore_errors=True)
    return target


@functools.cache
def _system_dir_args() -> tuple[str, ...]:
    """Binds for the host's system directories that exist; symlinks stay symlinks; /etc
    filtered (see :func:`_filtered_etc`)."""
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif path == "/etc" and os.path.isdir(path):
            args += _filtered_etc(path)
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return tuple(args)


def _filtered_etc(path: str) -> list[str]:
    """Binds showing the host's ``path`` (/etc) without its secrets.

    /etc is bound read-only whole (a bind per file would cost bubblewrap milliseconds), then
    every secret in it is masked: entries not world-readable (shadow, gshadow, sudoers, ssh
    host keys, ssl/private...) and the known secrets of :data:`ETC_SECRETS` whatever their
    mode. A masked file reads as empty (``/dev/null``); a masked directory is an empty,
    read-only tmpfs. passwd, group, hosts, resolv.conf, certificates, alternatives, ld.so.* stay.
    """
    args = ["--ro-bind", path, path]
    for root, dirs, files in os.walk(path):
        for name in sorted([*dirs, *files]):
            full = os.path.join(root, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue  # resolved inside the sandbox, where its target is masked or absent
            secret = name in ETC_SECRETS or name.endswith((".key", "_key"))
            if not secret and st.st_mode & 0o004:
                continue
            if stat.S_ISDIR(st.st_mode):
                args += ["--tmpfs", full, "--remount-ro", full]
                dirs.remove(name)
            else:
                args += ["--ro-bind", "/dev/null", full]
    return args


def _make_parents(path: str, made: set[str]) -> list[str]:
    """``--dir`` for the ancestors of ``path`` outside the system directories.

    bwrap would create missing ones with mode 0700 itself, shutting non-root users out.
    """
    parents = []
    parent = posixpath.dirname(path)
    while parent != "/":
        parents.append(parent)
        parent = posixpath.dirname(parent)
    args = []
    for parent in reversed(parents):
        if parent not in made and not any(_is_within(parent, d) for d in SYSTEM_DIRS):
            made.add(parent)
            args += ["--dir", parent]
    return args


def _release_and_remove(limits: SandboxLimits | None, sandbox_dir: Path) -> None:
    """Release a closed sandbox's limits and remove its directory. Blocking.

    Without a record of its limits (a start whose populating thread outlived its caller) the
    mounts under the directory are found and unmounted all the same: removing the directory
    around a live mount would lose the only trace of it.
    """
    if limits is not None:
        release_limits(limits)
    else:
        for path in mounts_under(sandbox_dir):
            unmount(path)
    shutil.rmtree(sandbox_dir, ignore_errors=True)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL bwrap's process group (bwrap, and its child until the child starts a session
    of its own), unless bwrap was reaped already: then its pid may name another group."""
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _read_to_end(fd: int) -> bytes:
    """Read ``fd`` until EOF, then close it (here, so a cancelled caller cannot close it under
    the thread that reads it)."""
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


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
