"""``RunRecorder``: the one path by which episode tries reach a run's ``results.db``.

``evaluate`` and ``RolloutStream`` both make a try's row with
:func:`~palaestra.run.rows.episode_row` (the episode, its ``attempt``, ``try`` and ``final``)
and write it here, which adds the run's columns (``run_id``, ``finished_at``) and writes it in
a transaction of its own. A write goes on when its caller is cancelled (Ctrl-C, a stream
closed), so a finished episode's row lands; :meth:`RunRecorder.aclose` waits for such writes
before it ends the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from palaestra.run.store import EpisodeRow, ResultStore


class RunRecorder:
    """Writes one run's rows to ``out_dir/results.db``; open with :meth:`open`.

    ``store`` is the open store, for what a run reads back (done jobs, cost so far);
    ``resumed`` whether the run continues a stored one. ``on_stored(row)`` runs once a row is
    committed, before the writer resumes (and also when the writer was cancelled meanwhile).
    """

    def __init__(
        self,
        store: ResultStore,
        run_id: str,
        resumed: bool,
        on_stored: Callable[[EpisodeRow], None] | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.resumed = resumed
        self.on_stored = on_stored
        self._writes: set[asyncio.Future[int]] = set()

    @classmethod
    async def open(
        cls,
        out_dir: Path | str,
        run_token: str,
        identity: dict[str, Any],
        config: dict[str, Any],
        on_stored: Callable[[EpisodeRow], None] | None = None,
    ) -> RunRecorder:
        """Open the store and begin (or resume) the run; a refused resume
        (:class:`~palaestra.run.store.RunMismatchError`) closes the store and raises."""
        store = await ResultStore.open(out_dir)
        try:
            resumed = await store.begin_run(run_token, identity=identity, config=config)
            run_id = await store.run_id()
        except BaseException:
            await store.aclose()
            raise
        assert run_id is not None
        return cls(store, run_id, resumed, on_stored)

    async def write(self, row: EpisodeRow) -> None:
        """Write ``row`` (its run columns filled in) in one transaction."""
        row.values.update(run_id=self.run_id, finished_at=time.time())
        write = asyncio.ensure_future(self.store.add_episode(row))
        self._writes.add(write)
        write.add_done_callback(lambda done: self._stored(row, done))
        await asyncio.shield(write)

    def _stored(self, row: EpisodeRow, write: asyncio.Future[int]) -> None:
        self._writes.discard(write)
        if self.on_stored is not None and not write.cancelled() and write.exception() is None:
            self.on_stored(row)

    async def drain(self) -> None:
        """Wait for the writes in flight (their callers may have been cancelled)."""
        if self._writes:
            await asyncio.wait(self._writes)

    async def aclose(self, stop_reason: str | None) -> None:
        """Wait for the writes in flight, end the run (``stop_reason``: why it stopped early,
        None when it ran out), close the store."""
        await self.drain()
        try:
            await self.store.finish_run(time.time(), stop_reason)
        finally:
            await self.store.aclose()
