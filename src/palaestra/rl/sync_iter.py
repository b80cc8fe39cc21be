"""An async iterator, consumed from plain (non-async) code.

:class:`SyncIterator` runs an event loop in a background thread; the async iterator lives on
that loop, so whatever it drives (a rollout stream's episodes, say) keeps running between two
``next()`` calls of the consumer. Closing it (``close()``, leaving its ``with`` block, or the
consumer's ``for`` loop ending or breaking out and dropping it) closes the async iterator on
its loop, then stops the loop and joins the thread: nothing is left running.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class SyncIterator(Generic[T]):
    """Iterate ``make()`` (an async iterator, built on the background loop) synchronously;
    ``close`` (a coroutine function) runs on that loop when the iteration ends."""

    def __init__(
        self,
        make: Callable[[], AsyncIterator[T]],
        close: Callable[[], Awaitable[None]] | None = None,
        *,
        name: str = "palaestra-sync",
    ) -> None:
        self._close_fn = close
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self._closed = False

        async def build() -> AsyncIterator[T]:
            return make()

        try:
            self._iterator = self.call(build())
        except BaseException:
            self._stop()
            raise

    def call(self, coro: Coroutine[Any, Any, R]) -> R:
        """Run ``coro`` on the iterator's loop and return its result (from this thread): how
        sync code reaches what lives on that loop (``policy.load_weights(...)``, say)."""
        if self._closed:
            coro.close()
            raise RuntimeError("the iterator is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        if self._closed:
            raise StopIteration

        async def step() -> T:
            return await self._iterator.__anext__()

        try:
            return self.call(step())
        except StopAsyncIteration:
            self.close()
            raise StopIteration from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the async iterator and ``close``, then stop the loop. Idempotent."""
        if self._closed:
            return
        try:
            aclose = getattr(self._iterator, "aclose", None)
            if aclose is not None:
                self.call(aclose())
            if self._close_fn is not None:
                self.call(self._close_fn())  # type: ignore[arg-type]
        finally:
            self._stop()

    def _stop(self) -> None:
        self._closed = True
        try:
            for cleanup in (self._loop.shutdown_asyncgens, self._loop.shutdown_default_executor):
                asyncio.run_coroutine_threadsafe(cleanup(), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> SyncIterator[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a consumer that dropped it without closing
        if not getattr(self, "_closed", True):
            self.close()
