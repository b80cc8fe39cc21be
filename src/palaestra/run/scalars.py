"""Scalar streams of a run that never block the event loop: a background file appender, JSONL.

:class:`BackgroundAppender` writes byte chunks to a file on a thread of its own, flushing after
each batch, so a callback on the event loop (``evaluate(on_episode=...)``) only queues bytes.
:class:`JsonlScalarWriter` and :class:`palaestra.run.tensorboard.ScalarWriter` are built on it
and share one interface, :class:`ScalarStream`.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Protocol

_STOP = object()


class ScalarStream(Protocol):
    """What the scalar writers share; ``None`` is an unknown value."""

    def add_scalars(
        self, step: int, scalars: dict[str, float | None], wall_time: float | None = None
    ) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class BackgroundAppender:
    """Appends byte chunks to ``file`` in a writer thread; ``append`` never waits on I/O.

    The thread flushes the file to the OS after each batch of queued chunks, so a reader sees
    every chunk shortly after it is appended. :meth:`close` writes what is queued, closes the
    file, and raises the first write error, if any (chunks after it are dropped). Call it: the
    thread is a daemon, so what is still queued when the interpreter exits without it is lost.
    """

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._error: OSError | None = None
        self._closed = False
        self._thread = threading.Thread(
            target=self._run, name=f"palaestra-appender:{getattr(file, 'name', '?')}", daemon=True
        )
        self._thread.start()

    def append(self, data: bytes) -> None:
        if self._closed:
            raise ValueError("append to a closed BackgroundAppender")
        self._queue.put(data)

    def flush(self) -> None:
        """Wait until everything appended so far is written and flushed (blocking)."""
        if not self._closed:
            done = threading.Event()
            self._queue.put(done)
            done.wait()
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Write what is queued, close the file, end the thread (blocking); idempotent."""
        if not self._closed:
            self._closed = True
            self._queue.put(_STOP)
            self._thread.join()
        if self._error is not None:
            raise self._error

    def _guard(self, op: Callable[..., object], *args: object) -> None:
        """Run one file operation unless one failed before; keep the first error."""
        if self._error is None:
            try:
                op(*args)
            except OSError as e:
                self._error = e

    def _run(self) -> None:
        stop = False
        while not stop:
            batch = [self._queue.get()]
            while not self._queue.empty():  # the only consumer: empty() then get() is safe
                batch.append(self._queue.get())
            waiters = []
            for item in batch:
                if item is _STOP:
                    stop = True
                elif isinstance(item, threading.Event):
                    waiters.append(item)
                else:
                    self._guard(self._file.write, item)
            self._guard(self._file.flush)
            if stop:
                try:
                    self._file.close()
                except OSError as e:
                    self._error = self._error or e
            for waiter in waiters:
                waiter.set()


class JsonlScalarWriter:
    """One JSON line per call, ``{"step", "wall_time", **scalars}`` (None as null), appended.

    A file this writer created and never wrote to is removed on :meth:`close`: a run refused
    before its first episode leaves nothing behind.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            file = self.path.open("xb")
            self._created = True
        except FileExistsError:
            file = self.path.open("ab")
            self._created = False
        self._lines = 0
        self._out = BackgroundAppender(file)

    def add_scalars(
        self, step: int, scalars: dict[str, float | None], wall_time: float | None = None
    ) -> None:
        line = {"step": step, "wall_time": time.time() if wall_time is None else wall_time}
        self._out.append((json.dumps({**line, **scalars}) + "\n").encode())
        self._lines += 1

    def flush(self) -> None:
        self._out.flush()

    def close(self) -> None:
        self._out.close()
        if self._created and not self._lines:
            self.path.unlink(missing_ok=True)
