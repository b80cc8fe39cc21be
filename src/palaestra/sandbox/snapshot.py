"""Snapshots: a sandbox's files frozen, their storage counted by the sandboxes that need it."""

from __future__ import annotations

import abc
import asyncio

from palaestra.sandbox.cancellation import await_to_the_end
from palaestra.sandbox.errors import SandboxError
from palaestra.sandbox.spec import SandboxSpec


class SandboxSnapshot(abc.ABC):
    """A sandbox's files frozen by :meth:`Sandbox.snapshot`; ``spec`` is that sandbox's.

    :meth:`SandboxBackend.restore` starts any number of sandboxes from it, each with its own
    copy. Release it with :meth:`release` (or ``async with``); its backend's ``aclose``, process
    exit and, after a crash, the janitor release it too. Its storage is freed once it is released
    and no sandbox that still needs it (a container running its image) is open.
    """

    def __init__(self, snapshot_id: str, spec: SandboxSpec) -> None:
        self.id = snapshot_id
        self.spec = spec
        self._users = 0
        self._released = False
        self._freeing: asyncio.Future[None] | None = None

    @property
    def released(self) -> bool:
        return self._released

    def hold(self) -> None:
        """Keep the storage while a sandbox started from it needs it (:meth:`let_go` ends it);
        raises :class:`SandboxError` once released."""
        if self._released:
            raise SandboxError(f"snapshot {self.id} was released; take a new one")
        self._users += 1

    async def let_go(self) -> None:
        """A sandbox started from it no longer needs it."""
        self._users -= 1
        if self._released and self._users == 0:
            await self._free_once()

    async def release(self) -> None:
        """No more sandboxes start from it; its storage goes as soon as none needs it.
        Idempotent."""
        self._released = True
        if self._users == 0:
            await self._free_once()

    async def _free_once(self) -> None:
        if self._freeing is None:
            self._freeing = asyncio.ensure_future(self._free())
        await await_to_the_end(self._freeing)

    @abc.abstractmethod
    async def _free(self) -> None:
        """Remove the snapshot's storage (its copy of the files, its image)."""

    async def __aenter__(self) -> SandboxSnapshot:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()
