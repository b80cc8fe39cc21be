"""The local backend's warm pools: sandboxes started ahead of time, one pool per kind.

A kind is every spec field but ``files`` and ``labels``, the two that do not change how a
sandbox starts (:func:`pool_key`). :class:`WarmPools` keeps a pool for each of the most recently
created kinds, fills them in the background and hands a warm sandbox out for a spec of its kind;
:class:`~palaestra.sandbox.local.backend.LocalBackend` says when (see its docstring).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path
from typing import Any

from palaestra.sandbox.base import SandboxSpec
from palaestra.sandbox.janitor import RUN_ID_LABEL
from palaestra.sandbox.local.layout import hand_out, writable_dirs
from palaestra.sandbox.local.sandbox import LocalSandbox, in_thread

log = logging.getLogger(__name__)

#: Starts a sandbox for a spec, its writable directories and its files (a cold start).
Launch = Callable[[SandboxSpec, list[str], dict[str, Path]], Awaitable[LocalSandbox]]


@dataclasses.dataclass(eq=False)
class Pool:
    """Warm sandboxes of one kind: started from ``spec`` (files and labels left out)."""

    key: Hashable
    spec: SandboxSpec
    ready: deque[LocalSandbox] = dataclasses.field(default_factory=deque)
    fill: asyncio.Task[None] | None = None


class WarmPools:
    """Up to ``size`` warm sandboxes for each of the ``kinds`` most recently created kinds of
    sandbox, started with ``launch`` and labelled for run ``run_id`` when handed out."""

    def __init__(self, size: int, kinds: int, launch: Launch, run_id: str) -> None:
        self.size = size
        self.kinds = kinds
        self.run_id = run_id
        self._launch = launch
        #: Sandboxes handed out of a warm pool, and sandboxes started for one.
        self.hits = 0
        self.started = 0
        #: The pools, least recently used first.
        self.by_kind: OrderedDict[Hashable, Pool] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()  # refills and closes of evicted pools
        #: Set while the backend closes: no refill starts.
        self.closing = False

    def pool_for(self, spec: SandboxSpec) -> Pool | None:
        """The pool of ``spec``'s kind, made if new and marked most recently used; None for a
        spec that cannot be a key (a field holds something unhashable)."""
        key = pool_key(spec)
        if key is None:
            return None
        pool = self.by_kind.get(key)
        if pool is None:
            pool = self.by_kind[key] = Pool(key, dataclasses.replace(spec, files={}, labels={}))
        self.by_kind.move_to_end(key)
        while len(self.by_kind) > self.kinds:
            _, evicted = self.by_kind.popitem(last=False)
            self._drop(evicted)
        return pool

    def _drop(self, pool: Pool) -> None:
        """Stop filling an evicted pool and close its warm sandboxes, in the background."""
        if pool.fill is not None:
            pool.fill.cancel()
        ready = list(pool.ready)
        pool.ready.clear()
        if ready:
            self._track(_close_all(ready))

    async def take(
        self, pool: Pool, spec: SandboxSpec, files: dict[str, Path]
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
                await in_thread(hand_out, sandbox.sandbox_dir, files, meta)
            except BaseException:
                await sandbox.close()
                raise
            sandbox.spec, sandbox._meta = spec, meta
            self.hits += 1
            return sandbox
        return None

    def refill(self, pool: Pool) -> None:
        """Start filling ``pool`` back up in the background, unless that is under way, the pool
        was evicted meanwhile or the backend is closing."""
        if pool.fill is None and not self.closing and self.by_kind.get(pool.key) is pool:
            pool.fill = self._track(self._fill(pool))

    async def _fill(self, pool: Pool) -> None:
        """Start warm sandboxes one at a time (leaving the CPU to running episodes) until the
        pool holds :attr:`size`. A failure ends the refill: the next create is cold."""
        try:
            writable = writable_dirs(pool.spec)
            while self._wants(pool) and len(pool.ready) < self.size:
                sandbox = await self._launch(pool.spec, writable, {})
                self.started += 1
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

    def _wants(self, pool: Pool) -> bool:
        return not self.closing and self.by_kind.get(pool.key) is pool

    def _track(self, coro: Any) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def settled(self) -> None:
        """Wait until the background work is over: each pool full (or its refill failed) and
        evicted warm sandboxes closed."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def empty(self) -> None:
        """Stop every refill, forget the pools and wait for the background work to end (the
        warm sandboxes stay open: they are the backend's to close)."""
        for pool in self.by_kind.values():
            if pool.fill is not None:
                pool.fill.cancel()
        self.by_kind.clear()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)


def pool_key(spec: SandboxSpec) -> Hashable | None:
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


async def _close_all(sandboxes: list[LocalSandbox]) -> None:
    await asyncio.gather(*(sandbox.close() for sandbox in sandboxes))
