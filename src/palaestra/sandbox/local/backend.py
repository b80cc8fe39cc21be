"""The local backend: creates bubblewrap sandboxes, coordinates the start-up janitor pass,
keeps the warm pools and the process-wide record of open sandboxes closed at exit."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import os
import re
import secrets
from pathlib import Path
from typing import Any

from palaestra.sandbox.base import (
    SandboxBackend,
    SandboxError,
    SandboxSnapshot,
    SandboxSpec,
    SandboxSpecError,
    await_to_the_end,
)
from palaestra.sandbox.janitor import (
    RUN_ID_LABEL,
    SandboxMeta,
    clean_up_at_exit,
    process_start_time,
    reclaim_leftovers,
)
from palaestra.sandbox.limits import SandboxLimits, favor_dynamic_moves
from palaestra.sandbox.local.bwrap import BwrapCommand, bwrap_command, unused_mounts
from palaestra.sandbox.local.layout import (
    bind_sources,
    files_to_copy,
    fill,
    open_to_the_sandboxes,
    prepare,
    writable_binds,
    writable_dirs,
)
from palaestra.sandbox.local.mountns import mount_points
from palaestra.sandbox.local.pool import WarmPools
from palaestra.sandbox.local.sandbox import LocalSandbox, admit, in_thread
from palaestra.sandbox.local.snapshot import LocalSnapshot
from palaestra.sandbox.local.snapshot import live as live_snapshots

log = logging.getLogger(__name__)

DEFAULT_STATE_DIR = Path("/tmp/palaestra-sandboxes")
#: Environment variable giving :class:`LocalBackend`'s default ``warm`` pool size.
WARM_ENV = "PALAESTRA_WARM_SANDBOXES"
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


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
        self._open: set[LocalSandbox] = set()
        self._snapshots: set[LocalSnapshot] = set()
        self._pools = WarmPools(self.warm, self.warm_keys, self._launch, self.run_id)
        self._starting_up: asyncio.Future[None] | None = None  # the start-up janitor pass
        self._owner = (os.getpid(), process_start_time(os.getpid()))

    async def create(self, spec: SandboxSpec) -> LocalSandbox:
        if spec.image is not None and spec.rootfs is None:
            raise SandboxSpecError(
                f"the local backend cannot run image {spec.image!r} itself: export it to a "
                "directory and pass it as SandboxSpec.rootfs, or use the docker backend"
            )
        writable = writable_dirs(spec)
        files = files_to_copy(spec, writable)
        await self._started()
        pool = self._pools.pool_for(spec) if self.warm else None
        sandbox = await self._pools.take(pool, spec, files) if pool is not None else None
        if sandbox is None:
            sandbox = await self._launch(spec, writable, files)
        if pool is not None:
            self._pools.refill(pool)
        return sandbox

    async def _started(self) -> None:
        """Wait for the start-up janitor pass (once per backend, even when it failed): a
        sandbox started while it runs could have its run directory removed while still empty."""
        starting = self._starting_up
        if starting is None or (
            not starting.done() and starting.get_loop() is not asyncio.get_running_loop()
        ):
            starting = self._starting_up = asyncio.ensure_future(self._start_up())
        if not starting.done():
            await asyncio.shield(starting)

    async def _start_up(self) -> None:
        clean_up_at_exit(_close_all_now)
        await asyncio.to_thread(reclaim_leftovers, self.state_dir)
        await asyncio.to_thread(open_to_the_sandboxes, self.state_dir)
        if os.geteuid() == 0:
            moves = await asyncio.to_thread(favor_dynamic_moves)
            log.debug("cgroup2 favordynmods: %s", moves)

    async def restore(
        self, snapshot: SandboxSnapshot, *, labels: dict[str, str] | None = None
    ) -> LocalSandbox:
        """Start a sandbox from a copy of ``snapshot``'s files (never from a warm pool: the
        copy must be in place before the sandbox starts)."""
        if not isinstance(snapshot, LocalSnapshot):
            raise SandboxError(
                f"snapshot {snapshot.id} is not a local one; restore it with the backend that "
                "took it"
            )
        spec = dataclasses.replace(snapshot.spec, labels={**snapshot.spec.labels, **(labels or {})})
        await self._started()
        snapshot.hold()
        try:
            return await self._launch(spec, writable_dirs(spec), {}, seed=snapshot.files)
        finally:
            await snapshot.let_go()

    async def _launch(
        self,
        spec: SandboxSpec,
        writable: list[str],
        files: dict[str, Path],
        *,
        seed: Path | None = None,
    ) -> LocalSandbox:
        """Start a sandbox for ``spec`` (a cold start), from a snapshot's files if ``seed``
        names them."""
        sandbox_id = f"sb-{secrets.token_hex(6)}"
        sandbox_dir = self.state_dir / self.run_id / sandbox_id
        meta = SandboxMeta(
            sandbox_id=sandbox_id,
            owner_pid=self._owner[0],
            owner_start=self._owner[1],
            labels={**spec.labels, RUN_ID_LABEL: self.run_id},
        )
        sandbox = LocalSandbox(
            sandbox_id, spec, sandbox_dir, on_close=self._closed, snapshots=self._snapshots
        )
        self._open.add(sandbox)
        _live.add(sandbox)
        preparing = asyncio.ensure_future(asyncio.to_thread(_prepare, spec, sandbox_dir, meta))
        child: concurrent.futures.Future[tuple[int, int] | None] = concurrent.futures.Future()
        admitting: asyncio.Future[SandboxMeta | None] | None = None
        try:
            sandbox._limits, detach = await await_to_the_end(preparing)
            limits = sandbox._limits
            root = sandbox_dir / "root" if spec.rootfs is not None else None
            binds = writable_binds(sandbox_dir, writable)
            sources = bind_sources(spec, sandbox_dir)
            fill_args = (spec, sandbox_dir, meta, writable, files, seed, limits)
            if spec.rootfs is not None or seed is not None:
                # A root filesystem's overlay is a mount, which must exist before bwrap's
                # mount namespace is copied from this one (and a snapshot's seed holds its
                # layer): made first. Otherwise the files are made while bwrap starts (it
                # touches none before its maps are written, which waits for them).
                await in_thread(fill, *fill_args)
                fill_args = None
            command = bwrap_command(spec, root, binds, sources, limits, detach)
            admitting = asyncio.ensure_future(
                asyncio.to_thread(
                    _fill_and_admit, fill_args, child, sandbox_dir, meta, limits, command
                )
            )
            await sandbox._start(command, child, admitting)
            sandbox._meta = admitting.result()
        except BaseException:
            if not child.done():
                child.set_result(None)  # the thread waiting for bwrap's pids ends
            if preparing.done() and not preparing.cancelled() and not preparing.exception():
                sandbox._limits = preparing.result()[0]  # cancelled meanwhile: release them too
            if admitting is not None:  # what it makes must be there before close removes it
                await _finished(admitting)
            await sandbox.close()
            raise
        return sandbox

    @property
    def pool_hits(self) -> int:
        """Sandboxes handed out of a warm pool (a figure; tests)."""
        return self._pools.hits

    @property
    def pool_started(self) -> int:
        """Sandboxes started for a warm pool (a figure; tests)."""
        return self._pools.started

    async def pool_ready(self) -> None:
        """Wait until the warm pools' background work is over: each pool full (or its refill
        failed) and evicted warm sandboxes closed. Using the pool never needs it; it is there
        to warm up before a first batch of episodes, and for tests and benchmarks."""
        await self._pools.settled()

    async def aclose(self) -> None:
        """Close every sandbox this backend created that is still open, warm ones included,
        once background refills are stopped, and release its snapshots."""
        self._pools.closing = True
        try:
            await self._pools.empty()
            await asyncio.gather(*(sandbox.close() for sandbox in list(self._open)))
            await asyncio.gather(*(snapshot.release() for snapshot in list(self._snapshots)))
        finally:
            self._pools.closing = False
        try:
            await asyncio.to_thread(os.rmdir, self.state_dir / self.run_id)
        except OSError:
            pass  # never created, or holds sandboxes of another backend with this run id

    def _closed(self, sandbox: LocalSandbox) -> None:
        self._open.discard(sandbox)
        _live.discard(sandbox)


def _prepare(
    spec: SandboxSpec, sandbox_dir: Path, meta: SandboxMeta
) -> tuple[SandboxLimits, tuple[str, ...]]:
    """:func:`~.layout.prepare`, then the host's mounts bwrap does without, from the mount
    table as it is once the sandbox's own mounts are made (:mod:`.mountns`; none when it
    cannot be read). Blocking."""
    limits = prepare(spec, sandbox_dir, meta)
    sources = [Path(os.path.realpath(source)) for source in bind_sources(spec, sandbox_dir)]
    try:
        return limits, unused_mounts(sandbox_dir, sources, mount_points())
    except OSError:
        return limits, ()


def _fill_and_admit(
    fill_args: tuple[Any, ...] | None,
    child: concurrent.futures.Future[tuple[int, int] | None],
    sandbox_dir: Path,
    meta: SandboxMeta,
    limits: SandboxLimits,
    command: BwrapCommand,
) -> SandboxMeta | None:
    """One thread for what a start does beside bwrap's: :func:`~.layout.fill` (unless made
    already), then :func:`~.sandbox.admit`. Blocking."""
    if fill_args is not None:
        fill(*fill_args)
    return admit(child, sandbox_dir, meta, limits, command.userns_block)


async def _finished(work: asyncio.Future[Any]) -> None:
    """Wait for ``work`` to end, however often the caller is cancelled meanwhile, and
    whatever it gives (a failure is reported by what waited for it first, or lost with the
    start it belonged to)."""
    while not work.done():
        try:
            await asyncio.wait([work])
        except asyncio.CancelledError:
            pass
    if not work.cancelled():
        work.exception()  # retrieved: a start that failed first has said why already


def _warm_from_env() -> int:
    raw = os.environ.get(WARM_ENV, "").strip()
    try:
        return int(raw) if raw else 0
    except ValueError:
        raise ValueError(
            f"{WARM_ENV}={raw!r} must be a whole number of sandboxes to keep started (0: none)"
        ) from None


#: Every open local sandbox of this process, whatever became of its backend object: what
#: :func:`_close_all_now` closes at exit.
_live: set[LocalSandbox] = set()


def _close_all_now() -> None:
    """Close every open sandbox synchronously, blocking; registered with
    :func:`palaestra.sandbox.janitor.clean_up_at_exit` (exit, SIGTERM...), when no event loop
    may be left, and remove every snapshot. Their now empty run directories go too."""
    for snapshot in list(live_snapshots):
        if snapshot.owner_pid == os.getpid():
            snapshot.remove_now()
            try:
                os.rmdir(snapshot.directory.parent)
            except OSError:
                pass  # sandboxes or other snapshots of the run are still there
    for sandbox in list(_live):
        if sandbox.owner_pid != os.getpid():
            continue  # in a forked child: the sandbox is its parent's
        sandbox.close_now()
        try:
            os.rmdir(sandbox.sandbox_dir.parent)
        except OSError:
            pass  # other sandboxes of the run are still there
