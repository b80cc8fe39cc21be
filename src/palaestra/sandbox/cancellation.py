"""Cancellation that waits: work that cannot be stopped ends before a cancellation goes on."""

from __future__ import annotations

import asyncio
from typing import TypeVar

_T = TypeVar("_T")


async def await_to_the_end(work: asyncio.Future[_T]) -> _T:
    """Await ``work`` (a thread, a spawn, a sandbox's close); when the caller is cancelled
    meanwhile, once or again, wait for ``work`` to end before the cancellation goes on.

    A thread cannot be stopped, and what follows a cancellation (closing the sandbox, the
    event loop ending) must not race it: a directory, cgroup, process or container made
    after the clean-up is never cleaned up.
    """
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        while not work.done():
            try:
                await asyncio.wait([work])
            except asyncio.CancelledError:
                pass  # cancelled again: the work still ends first
        raise
