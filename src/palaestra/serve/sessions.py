"""The served environments: one palaestra environment (its own episode, its own sandbox) per
remote session, with the server's limits.

:class:`Sessions` is what every protocol adapter shares. A session is *reserved* under a key
the adapter picks (its protocol's session id, or its own session object), its environment is
made on first use (:meth:`Sessions.env`) and closed (``await env.close()``: the sandbox and
every process in it) when the session is *released*: the client deleted it or disconnected,
it sat idle past ``idle_timeout_s`` (the reaper), or the server shuts down
(:meth:`Sessions.close_all`). A session with a request in flight (:meth:`Sessions.busy`: a
step that runs the verifier may take minutes) is never idle.

At most ``max_sessions`` are reserved at once; one more is :class:`AtCapacity`, which each
adapter answers with its protocol's error.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

from palaestra.env.types import Environment

#: What a served environment is: observations are LLM requests, actions LLM responses.
ServedEnv = Environment[Any, Any]


@dataclass(frozen=True)
class Limits:
    """The server's own limits (``palaestra serve``'s options)."""

    max_sessions: int = 64
    """Sessions (environments, sandboxes) held at once; one more is refused."""
    idle_timeout_s: float = 300.0
    """A session with no request for this long is closed (its sandbox too)."""
    max_request_bytes: int = 4 * 1024 * 1024
    """The largest request body (or WebSocket message) accepted."""

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {self.max_sessions}")
        if self.idle_timeout_s <= 0:
            raise ValueError(f"idle_timeout_s must be positive, got {self.idle_timeout_s}")
        if self.max_request_bytes < 1024:
            raise ValueError(
                f"max_request_bytes must be at least 1024, got {self.max_request_bytes}"
            )


class AtCapacity(RuntimeError):
    """The server holds ``max_sessions`` sessions already."""

    def __init__(self, held: int, limit: int) -> None:
        super().__init__(
            f"the server holds {held} sessions, its limit (--max-sessions {limit}); close one "
            "or retry later"
        )
        self.held = held
        self.limit = limit


class SessionClosed(RuntimeError):
    """The session was released (idle past the timeout, deleted, or the server stopping)."""


@dataclass
class _Session:
    last_active: float
    env: ServedEnv | None = None
    in_flight: int = 0


class Sessions:
    """The server's sessions, each holding at most one environment made by ``make_env``."""

    def __init__(self, make_env: Callable[[], ServedEnv], limits: Limits) -> None:
        self._make_env = make_env
        self.limits = limits
        self._sessions: dict[Hashable, _Session] = {}
        self._released: dict[Hashable, str] = {}  # why a key was released (bounded below)
        self._closing: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._sessions

    def reserve(self, key: Hashable) -> bool:
        """Hold a slot for ``key`` (on the event loop); False when it holds one already;
        :class:`AtCapacity` when the server is full, :class:`SessionClosed` when ``key`` was
        released (a session is never reopened)."""
        self._loop = asyncio.get_running_loop()
        if key in self._sessions:
            return False
        if key in self._released:
            raise SessionClosed(f"this session is closed ({self._released[key]}); open a new one")
        if len(self._sessions) >= self.limits.max_sessions:
            raise AtCapacity(len(self._sessions), self.limits.max_sessions)
        self._sessions[key] = _Session(last_active=time.monotonic())
        return True

    def _get(self, key: Hashable) -> _Session:
        session = self._sessions.get(key)
        if session is None:
            why = self._released.get(key, "it was never opened")
            raise SessionClosed(f"this session is closed ({why}); open a new one")
        return session

    async def env(self, key: Hashable) -> ServedEnv:
        """The session's environment, made on first use (the session must be reserved)."""
        session = self._get(key)
        if session.env is None:  # cheap: the tasks are loaded once, the sandbox comes at reset
            session.env = self._make_env()
        return session.env

    @contextlib.asynccontextmanager
    async def busy(self, key: Hashable) -> AsyncIterator[ServedEnv]:
        """The session's environment, with a request in flight (never idle meanwhile)."""
        env = await self.env(key)
        session = self._get(key)
        session.in_flight += 1
        session.last_active = time.monotonic()
        try:
            yield env
        finally:
            session.in_flight -= 1
            session.last_active = time.monotonic()

    def touch(self, key: Hashable) -> None:
        """A request for ``key`` arrived: it is not idle."""
        if (session := self._sessions.get(key)) is not None:
            session.last_active = time.monotonic()

    async def release(
        self, key: Hashable, why: str = "the client closed it", *, reusable: bool = False
    ) -> None:
        """End the session: its environment is closed (sandbox and all). Idempotent.
        ``reusable``: the key may be reserved again (a session that never started)."""
        session = self._sessions.pop(key, None)
        if session is None:
            return
        if not reusable:
            self._released[key] = why
        if len(self._released) > 4 * self.limits.max_sessions:  # keep the reasons bounded
            self._released.pop(next(iter(self._released)))
        if session.env is not None:
            await session.env.close()

    def release_soon(self, key: Hashable, why: str = "the client closed it") -> None:
        """:meth:`release` from synchronous code on the event loop's thread: it runs as a task
        that :meth:`close_all` waits for."""
        task = asyncio.get_running_loop().create_task(self.release(key, why))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def release_threadsafe(self, key: Hashable, why: str = "the client closed it") -> None:
        """:meth:`release_soon` from any thread (a protocol server's worker thread)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return  # nothing was ever reserved
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self.release_soon(key, why)
        else:
            loop.call_soon_threadsafe(self.release_soon, key, why)

    def idle(self) -> list[Hashable]:
        """The sessions with nothing in flight and no request for ``idle_timeout_s``."""
        cutoff = time.monotonic() - self.limits.idle_timeout_s
        return [
            key for key, s in self._sessions.items() if s.in_flight == 0 and s.last_active < cutoff
        ]

    async def reap(self, end_session: Callable[[Hashable], Awaitable[None]]) -> None:
        """Forever: release each idle session, then ``end_session(key)`` ends it in the
        protocol (so the client's next request gets the protocol's error)."""
        interval = min(self.limits.idle_timeout_s / 4, 5.0)
        while True:
            await asyncio.sleep(interval)
            for key in self.idle():
                try:
                    await self.release(key, f"idle for more than {self.limits.idle_timeout_s:g} s")
                finally:
                    await end_session(key)

    async def close_all(self) -> None:
        """Release every session (the server is stopping) and wait for pending closes."""
        await asyncio.gather(
            *(self.release(key, "the server stopped") for key in list(self._sessions)),
            *list(self._closing),
            return_exceptions=True,
        )
