"""Grouping concurrent requests into batches for one model.

Requests that arrive within ``batch_window_s`` of each other, or while a batch is generating,
are handed to ``run_batch`` together (up to ``max_batch_size``), in the worker thread. The
batcher runs as a task of the event loop of its callers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

from palaestra.llm.types import LLMRequest, LLMResponse

#: Serves a batch of requests: one response, or this request's exception, per request.
RunBatch = Callable[[list[LLMRequest]], list[LLMResponse | Exception]]


@dataclass
class _Job:
    request: LLMRequest
    future: asyncio.Future[LLMResponse]


class Batcher:
    """Queues requests and runs them in batches with ``run_batch`` on ``executor``; ``name``
    names the policy in errors."""

    def __init__(
        self,
        run_batch: RunBatch,
        executor: Executor,
        *,
        max_batch_size: int,
        batch_window_s: float,
        name: str,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size={max_batch_size} must be >= 1")
        self.max_batch_size = max_batch_size
        self.batch_window_s = batch_window_s
        self._run_batch = run_batch
        self._executor = executor
        self._name = name
        self._queue: asyncio.Queue[_Job] | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def submit(self, request: LLMRequest) -> LLMResponse:
        """Queue ``request`` and wait for its response (starts the batch loop on first use, and
        again on a new event loop)."""
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._loop is not loop:
            self._queue = asyncio.Queue()
            self._loop = loop
            self._task = loop.create_task(self._batch_loop(self._queue))
        assert self._queue is not None
        job = _Job(request, loop.create_future())
        self._queue.put_nowait(job)
        return await job.future

    async def _batch_loop(self, queue: asyncio.Queue[_Job]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = [await queue.get()]
            deadline = loop.time() + self.batch_window_s
            while len(jobs) < self.max_batch_size:
                if not queue.empty():
                    jobs.append(queue.get_nowait())
                    continue
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    jobs.append(await asyncio.wait_for(queue.get(), remaining))
                except TimeoutError:
                    break
            jobs = [j for j in jobs if not j.future.done()]  # callers that gave up
            if not jobs:
                continue
            try:
                results = await loop.run_in_executor(
                    self._executor, self._run_batch, [j.request for j in jobs]
                )
            except BaseException as e:
                for j in jobs:
                    if not j.future.done():
                        j.future.set_exception(
                            e if isinstance(e, Exception) else RuntimeError(f"{self._name} stopped")
                        )
                if not isinstance(e, Exception):
                    raise
                continue
            for j, result in zip(jobs, results, strict=True):
                if j.future.done():
                    continue
                if isinstance(result, Exception):
                    j.future.set_exception(result)
                else:
                    j.future.set_result(result)

    async def aclose(self) -> None:
        """Stop the batch loop (a batch running in the executor finishes there)."""
        if self._task is not None and self._loop is asyncio.get_running_loop():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
