"""``RolloutStream``: episodes, or GRPO groups, streamed to a trainer as they finish.

::

    async with RolloutStream("gen/edit-distance", policy, concurrency=64, sampler=curriculum,
                             group_filter=has_reward_variance, max_staleness=2) as stream:
        async for group in stream.groups(8):
            advantages = grpo(group.rewards)        # the trainer's step
            ...
            await policy.load_weights(new_weights)  # bumps policy.policy_version

* **Concurrency and back-pressure.** At most ``concurrency`` episodes run at once; a group of
  ``n`` takes ``n`` of those slots when it starts, together, and gives them back once it is in
  the buffer (or dropped). Finished items wait in a buffer of ``buffer`` items; while it is
  full no new episode starts, so a slow trainer holds at most ``concurrency`` episodes in
  flight plus ``buffer`` items ready.
* **Errors are never rewards.** An episode that ends with status ``error`` (or raises) is
  counted and, with ``on_error="retry"``, run again (up to ``max_retries`` times, then the
  group is dropped); with ``on_error="drop_group"`` its group is dropped at once (the others
  in flight are cancelled). An error never enters a group as reward 0.
* **Tasks.** A :class:`~palaestra.rl.sampling.TaskSampler` draws each group's task (the env
  resets with ``seed=draw.seed, options={"task_id": draw.task_id}``) and gets every completed
  group's :class:`~palaestra.rl.sampling.GroupOutcome` (``update``), before the filter and
  the staleness check. Without a sampler, draw ``i`` resets with ``seed + i`` and the env
  picks the task from that seed (every member of a group the same one).
* **Filter.** ``group_filter(outcome)`` False drops the group (``has_reward_variance``...).
* **Staleness** (:mod:`palaestra.rl.admission`). With ``max_staleness=k``, a group whose
  oldest first turn is more than ``k`` policy versions behind the policy when it is handed to
  the consumer (or already when it finishes) is stale: dropped (``stale="drop"``) or kept and
  marked (``stale="keep"``). With ``update_every=G`` (the consumer's items per update) draws
  that would be taken after more than ``k`` updates wait to start. Updates never interrupt
  episodes in flight.
* **Cancellation.** Leaving the ``async with`` block, ``aclose()``, a cancelled consumer or a
  consumer breaking out of a ``groups()`` loop it closes cancels every episode in flight; each
  closes its sandbox; no row of an unfinished group is written.
* **Store.** With ``out_dir``, every finished episode try goes to ``out_dir/results.db``
  (:mod:`palaestra.rl.stream_store`): ``palaestra report out_dir`` reports the run.
* **Ray.** ``executor="ray"`` or a ``RayOptions``: episodes on Ray actors (see docs/ray.md).
* **Sync code.** :meth:`RolloutStream.groups_sync` / :meth:`episodes_sync` iterate from plain
  code (a loop in a background thread: :mod:`palaestra.rl.sync_iter`).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from palaestra.env.end import EpisodeEnd
from palaestra.env.registry import load_tasks, make, make_policy
from palaestra.env.types import Environment, EpisodeStatus
from palaestra.llm.client import LLMClient
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.llm.versions import current_version
from palaestra.rl.admission import StalenessGate
from palaestra.rl.sampling import GroupFilter, TaskDraw, TaskSampler
from palaestra.rl.stream_store import StreamRecorder, number_rows, stream_identity
from palaestra.rl.stream_types import Group, StreamStats
from palaestra.rl.sync_iter import SyncIterator
from palaestra.rl.versions import StalePolicy, check_staleness_options, first_version
from palaestra.run.ray_executor import RayExecutor, RayOptions
from palaestra.run.rollout import Episode, rollout
from palaestra.run.rows import episode_row
from palaestra.run.store import EpisodeRow

OnError = Literal["retry", "drop_group"]
EnvFactory = Callable[[], Environment[LLMRequest, LLMResponse]]


__all__ = ["Group", "RolloutStream", "StreamStats"]


@dataclass
class _Ready:
    """A finished item waiting in the buffer, with its episodes' first-turn versions."""

    item: Group | Episode
    first_versions: list[int | None]
    stale: bool


@dataclass
class _Failed:
    """A try that ended in error, as its store row (which says why)."""

    row: EpisodeRow


class _DropGroup(Exception):
    """A member of the group ran out of retries (or ``on_error="drop_group"``)."""


def _unwrap(error: BaseException | None) -> BaseException:
    """The one error inside the task groups' exception groups (the whole group if several)."""
    assert error is not None
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


class _Signal:
    """Wake every waiter when the stream's state changes; waiters re-check their condition."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            self._event.clear()
            await self._event.wait()


class RolloutStream:
    """Streams finished episodes or GRPO groups; see the module docstring.

    ``env``: an env id (``palaestra.make(env, **env_kwargs)``, one environment per episode in
    flight) or a factory returning a fresh environment. ``policy``: the
    :class:`~palaestra.llm.client.LLMClient` every episode uses. ``seed`` seeds the sampler's
    RNG and the seeds of draws that carry none. ``update_every``: how many items the consumer
    takes per policy update at most, for admission control (:mod:`palaestra.rl.admission`).
    """

    def __init__(
        self,
        env: str | EnvFactory,
        policy: LLMClient | str,
        *,
        concurrency: int = 8,
        buffer: int = 4,
        sampler: TaskSampler | None = None,
        group_filter: GroupFilter | None = None,
        on_error: OnError = "retry",
        max_retries: int = 2,
        max_staleness: int | None = None,
        stale: StalePolicy = "drop",
        update_every: int | None = None,
        seed: int = 0,
        out_dir: Path | str | None = None,
        executor: Literal["local", "ray"] | RayOptions = "local",
        **env_kwargs: Any,
    ) -> None:
        if concurrency < 1 or buffer < 1 or max_retries < 0:
            raise ValueError(
                f"concurrency={concurrency} and buffer={buffer} must be >= 1, "
                f"max_retries={max_retries} >= 0"
            )
        if on_error not in ("retry", "drop_group"):
            raise ValueError(f"on_error={on_error!r}: choose 'retry' or 'drop_group'")
        check_staleness_options(max_staleness, stale, current_version(policy))
        if not isinstance(env, str) and env_kwargs:
            raise ValueError("env keyword arguments apply to an env id; pass them to the factory")
        self.env = env
        self.policy = policy
        self.concurrency = concurrency
        self.buffer = buffer
        self.sampler = sampler
        self.group_filter = group_filter
        self.on_error = on_error
        self.max_retries = max_retries
        self.max_staleness = max_staleness
        self.stale = stale
        self._gate = StalenessGate(max_staleness, stale, update_every)
        self.seed = seed
        self.out_dir = out_dir
        self.env_kwargs = env_kwargs
        self._remote: RayExecutor | None = None
        if executor != "local":  # a RayOptions, or "ray" for the defaults
            options = RayOptions() if executor == "ray" else executor
            if not isinstance(env, str) or not isinstance(options, RayOptions):
                raise ValueError("executor: 'local', or 'ray' / RayOptions with an env id")
            self._remote = RayExecutor(env, policy, options, concurrency=concurrency,
                                       env_overrides=env_kwargs)  # fmt: skip
        self.stats = StreamStats()
        self._rng = random.Random(seed)
        self._items: deque[_Ready] = deque()
        self._free = concurrency
        self._outstanding = 0  # draws started and not yet handed over or dropped
        self._consumer_waiting = False
        self._signal: _Signal | None = None
        self._producer: asyncio.Task[None] | None = None
        self._idle: list[Environment[LLMRequest, LLMResponse]] = []
        self._closing: set[asyncio.Task[None]] = set()
        self._recorder: StreamRecorder | None = None
        self._attempts: Counter[str] = Counter()
        self._tasks: Any = None
        self._closed = False

    # -- consuming --------------------------------------------------------------------------

    async def groups(self, size: int, *, draws: int | None = None) -> AsyncIterator[Group]:
        """Yield groups of ``size`` attempts as they complete; ``draws`` groups are started
        (dropped ones are not replaced), or without end when None."""
        self._start(size, draws, grouped=True)
        try:
            while (item := await self._next()) is not None:
                assert isinstance(item, Group)
                yield item
        finally:
            await self.aclose()

    async def episodes(self, *, draws: int | None = None) -> AsyncIterator[Episode]:
        """Yield single episodes as they finish (each its own draw; groups of one)."""
        self._start(1, draws, grouped=False)
        try:
            while (item := await self._next()) is not None:
                assert isinstance(item, Episode)
                yield item
        finally:
            await self.aclose()

    def groups_sync(self, size: int, *, draws: int | None = None) -> SyncIterator[Group]:
        """:meth:`groups` for plain code: iterate it, then close it (or use ``with``)."""
        return SyncIterator(lambda: self.groups(size, draws=draws), self.aclose)

    def episodes_sync(self, *, draws: int | None = None) -> SyncIterator[Episode]:
        """:meth:`episodes` for plain code."""
        return SyncIterator(lambda: self.episodes(draws=draws), self.aclose)

    async def __aenter__(self) -> RolloutStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Cancel what runs, close every environment and the store. Idempotent."""
        if self._closed:
            return
        self._closed = True
        stop_reason = None
        if self._producer is not None and not self._producer.done():
            stop_reason = "closed"
            self._producer.cancel()
        try:
            if self._producer is not None:
                (failure,) = await asyncio.gather(self._producer, return_exceptions=True)
                if isinstance(failure, Exception):
                    failure = _unwrap(failure)
                    stop_reason = f"failed: {type(failure).__name__}: {failure}"
        finally:
            if self._closing:
                await asyncio.gather(*self._closing, return_exceptions=True)
            idle, self._idle = self._idle, []
            await asyncio.gather(*(env.close() for env in idle), return_exceptions=True)
            if self._remote is not None:
                await self._remote.aclose()
            if self._recorder is not None:
                await self._recorder.aclose(stop_reason)

    async def _next(self) -> Group | Episode | None:
        """The next item to hand over, judged for staleness against the policy now."""
        assert self._signal is not None and self._producer is not None
        producer = self._producer
        while True:
            self._consumer_waiting = True
            self._signal.notify()  # no update of the consumer's is pending: admission may go on
            try:
                await self._signal.wait_for(lambda: bool(self._items) or producer.done())
            finally:
                self._consumer_waiting = False
            if not self._items:
                break
            ready = self._items.popleft()
            self._outstanding -= 1
            self.stats.buffered = len(self._items)
            self._signal.notify()
            if self._judge_stale(ready) and self.stale == "drop":
                continue
            self.stats.yielded += 1
            return ready.item
        if not producer.cancelled() and producer.exception() is not None:
            raise _unwrap(producer.exception())
        return None

    def _judge_stale(self, ready: _Ready) -> bool:
        """Whether ``ready`` is stale now; counted the first time it is found so."""
        if ready.stale:
            return True
        stale = self._gate.stale_count(ready.first_versions, current_version(self.policy))
        if stale:
            ready.stale = True
            self.stats.stale += stale
            if isinstance(ready.item, Group):
                ready.item.stale = True
            if self.stale == "drop":
                self.stats.dropped_stale += 1
        return ready.stale

    # -- producing --------------------------------------------------------------------------

    def _start(self, size: int, draws: int | None, *, grouped: bool) -> None:
        if self._producer is not None or self._closed:
            raise RuntimeError("a RolloutStream is iterated once; create another one")
        if size < 1 or size > self.concurrency:
            raise ValueError(
                f"a group of {size} needs {size} episodes at once: raise concurrency "
                f"(now {self.concurrency}) to at least the group size"
            )
        self._signal = _Signal()
        self._producer = asyncio.create_task(self._produce(size, draws, grouped))
        self._producer.add_done_callback(lambda _: self._signal and self._signal.notify())

    async def _produce(self, size: int, draws: int | None, grouped: bool) -> None:
        assert self._signal is not None
        if isinstance(self.env, str):
            self._tasks = await asyncio.to_thread(load_tasks, self.env)
        if self._remote is not None:
            await self._remote.start()
        elif isinstance(self.policy, str):
            self.policy = make_policy(self.policy, self._tasks or ())
        if self.out_dir is not None:
            env = await self._acquire_env()
            self._idle.append(env)
            planned = None if draws is None else draws * size
            self._recorder = await StreamRecorder.open(
                self.out_dir,
                stream_identity(self.env, self.policy, env, size, self.seed),
                {"planned": planned},
            )
        async with asyncio.TaskGroup() as group:
            for index in itertools.count() if draws is None else range(draws):
                await self._signal.wait_for(
                    lambda: self._free >= size and len(self._items) < self.buffer
                )
                if not self._admits():
                    self.stats.admission_waits += 1
                    await self._signal.wait_for(
                        lambda: (
                            self._admits() and self._free >= size and len(self._items) < self.buffer
                        )
                    )
                draw = self._draw(index)
                self._free -= size
                self._outstanding += 1
                group.create_task(self._run_draw(draw, size, grouped))

    def _admits(self) -> bool:
        return self._gate.admits(
            taken=self.stats.yielded,
            outstanding=self._outstanding,
            consumer_waiting=self._consumer_waiting,
        )

    def _draw(self, index: int) -> TaskDraw:
        if self.sampler is None:
            return TaskDraw(task_id="", seed=self.seed + index)
        draw = self.sampler.draw(self._rng)
        if draw.seed is None:
            draw = TaskDraw(draw.task_id, self.seed + index, draw.difficulty)
        return draw

    async def _acquire_env(self) -> Environment[LLMRequest, LLMResponse]:
        if self._idle:
            return self._idle.pop()
        if isinstance(self.env, str):
            return make(self.env, tasks=self._tasks, **self.env_kwargs)
        return self.env()

    async def _close_env(self, env: Environment[LLMRequest, LLMResponse]) -> None:
        """Close ``env``; the close goes on (and aclose waits for it) if we are cancelled."""
        task = asyncio.ensure_future(env.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        await asyncio.shield(task)

    async def _try(self, draw: TaskDraw) -> tuple[Episode, int | None] | _Failed:
        """One episode; an error (status or exception) comes back as :class:`_Failed`."""
        env = None if self._remote is not None else await self._acquire_env()
        options = {"task_id": draw.task_id} if draw.task_id else None
        version = current_version(self.policy)
        stats = self.stats
        stats.started += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        started = time.perf_counter()
        episode: Episode | None = None
        try:
            if self._remote is not None:
                episode = await self._remote.run(draw.seed, options)
            else:
                assert env is not None and not isinstance(self.policy, str)
                episode = await rollout(env, self.policy, seed=draw.seed, options=options)
        except Exception as e:  # a broken environment (rollout turns episode failures into
            # error episodes): an error all the same, never a reward
            failed = Episode(
                turns=[], end=EpisodeEnd.from_exception(e), task_id=draw.task_id,
                wall_s=time.perf_counter() - started,
            )  # fmt: skip
        finally:
            stats.in_flight -= 1
            if env is not None and episode is not None:
                self._idle.append(env)
            elif env is not None:  # raised or cancelled: the env's state is unknown, so it goes
                await self._close_env(env)
        stats.finished += 1
        if episode is not None and episode.status != EpisodeStatus.ERROR:
            return episode, version
        failed = episode or failed
        stats.errors += 1
        stats.error_classes[str(failed.end.error_class)] += 1
        return _Failed(episode_row(failed, attempt=0, seed=draw.seed))

    async def _run_draw(self, draw: TaskDraw, size: int, grouped: bool) -> None:
        """Run one draw's group, then buffer it (or drop it); hold ``size`` slots until then."""
        assert self._signal is not None
        buffered = False
        try:
            results: list[tuple[Episode, int | None] | None] = [None] * size
            rows: list[list[EpisodeRow]] = [[] for _ in range(size)]

            async def member(i: int) -> None:
                for attempt_try in itertools.count():
                    result = await self._try(draw)
                    if not isinstance(result, _Failed):
                        results[i] = result
                        row = episode_row(result[0], attempt=0, seed=draw.seed)
                        row.values.update(final=1, **{"try": attempt_try})
                        rows[i].append(row)
                        return
                    retry = self.on_error == "retry" and attempt_try < self.max_retries
                    rows[i].append(result.row)
                    result.row.values.update(final=int(not retry), **{"try": attempt_try})
                    if not retry:
                        raise _DropGroup
                    self.stats.retried += 1

            dropped = False
            try:
                async with asyncio.TaskGroup() as members:
                    for i in range(size):
                        members.create_task(member(i))
            except* _DropGroup:
                dropped = True
            if dropped:
                self.stats.dropped_error += 1
                await self._record(draw, rows)
                return
            finished = [r for r in results if r is not None]
            item = self._complete(draw, finished, grouped)
            await self._record(draw, rows)
            if item is not None:
                await self._signal.wait_for(lambda: len(self._items) < self.buffer)
                self._items.append(item)
                buffered = True
                self.stats.buffered = len(self._items)
                self.stats.max_buffered = max(self.stats.max_buffered, self.stats.buffered)
        finally:
            self._free += size
            self._outstanding -= not buffered  # a buffered item counts until it is taken
            self._signal.notify()

    def _complete(
        self, draw: TaskDraw, finished: list[tuple[Episode, int | None]], grouped: bool
    ) -> _Ready | None:
        """Feed the sampler, then apply the staleness check and the filter."""
        episodes = [episode for episode, _ in finished]
        task_ids = {e.task_id for e in episodes}
        if len(task_ids) != 1:
            raise ValueError(
                f"the attempts of one group ran different tasks ({sorted(map(str, task_ids))}): "
                "the environment does not pick its task from the seed; pass a TaskSampler"
            )
        if not draw.task_id:
            draw = TaskDraw(str(episodes[0].task_id), draw.seed, draw.difficulty)
        versions = [first_version(e, started) for e, started in finished]
        group = Group(draw, episodes, first_versions=versions)
        self.stats.completed_groups += 1
        if self.sampler is not None:
            self.sampler.update(group.outcome)
        ready = _Ready(group if grouped else episodes[0], versions, stale=False)
        if self._judge_stale(ready) and self.stale == "drop":
            return None
        if self.group_filter is not None and not self.group_filter(group.outcome):
            self.stats.filtered += 1
            return None
        return ready

    async def _record(self, draw: TaskDraw, rows: list[list[EpisodeRow]]) -> None:
        """Write a finished draw's tries (:func:`~palaestra.rl.stream_store.number_rows`)."""
        if self._recorder is not None:
            await self._recorder.write(number_rows(draw.task_id, draw.seed, rows, self._attempts))
