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
  counted. With ``on_error="retry"`` an infrastructure error (``EpisodeEnd.infra_error``: a
  sandbox that fails to start or dies, a dropped connection, a transient LLM API error) runs
  again after a backoff, up to ``retries`` times (:class:`~palaestra.run.retry.RetryPolicy`,
  the rule ``evaluate`` follows), then the group is dropped; a deterministic error (a policy
  bug, a verifier or task failure, a sandbox the task's spec cannot make) drops its group at
  once, since another try would fail the same way. With ``on_error="drop_group"`` any error
  drops its group at once. A dropped group's other attempts in flight are cancelled. An error
  never enters a group as reward 0.
* **Tasks.** A :class:`~palaestra.rl.sampler.TaskSampler` draws each group's task (the env
  resets with ``seed=draw.seed, options={"task_id": draw.task_id}``) and gets every completed
  group's :class:`~palaestra.rl.sampler.GroupOutcome` (``update``), before the filter and
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
  (:mod:`palaestra.rl.stream_store`; written by ``evaluate``'s
  :class:`~palaestra.run.recorder.RunRecorder`): ``palaestra report out_dir`` reports the run.
* **Executors.** Episodes run on an :class:`~palaestra.run.executor.EpisodeExecutor`, as in
  ``evaluate``: in this process (:class:`~palaestra.run.executor.LocalExecutor`, one environment
  per episode in flight, reused), or with ``executor="ray"`` or a ``RayOptions`` on Ray actors
  (see docs/ray.md).
* **Sync code.** :meth:`RolloutStream.groups_sync` / :meth:`episodes_sync` iterate from plain
  code (a loop in a background thread: :mod:`palaestra.rl.sync_iter`).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import uuid
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
from palaestra.rl.sampler import GroupFilter, TaskDraw, TaskSampler
from palaestra.rl.stream_store import number_rows, stream_identity
from palaestra.rl.stream_types import Group, StreamStats
from palaestra.rl.sync_iter import SyncIterator
from palaestra.rl.versions import StalePolicy, check_staleness_options, first_version
from palaestra.run.executor import EnvFactory, EpisodeExecutor, LocalExecutor
from palaestra.run.ray_executor import RayExecutor, RayOptions
from palaestra.run.recorder import RunRecorder
from palaestra.run.retry import RetryPolicy
from palaestra.run.rollout import Episode
from palaestra.run.rows import episode_row
from palaestra.run.store import EpisodeRow

OnError = Literal["retry", "drop_group"]


__all__ = ["Group", "RolloutStream", "StreamStats"]


@dataclass
class _Ready:
    """A finished item waiting in the buffer, with its episodes' first-turn versions."""

    item: Group | Episode
    first_versions: list[int | None]
    stale: bool


class _DropGroup(Exception):
    """A member of the group ended in an error that is not retried (any error with
    ``on_error="drop_group"``), or ran out of retries."""


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
    ``retries``: how many more tries an infrastructure error gets, ``retry_backoff_s`` apart
    (doubling; 1 s when None), or a :class:`~palaestra.run.retry.RetryPolicy`, as in
    ``evaluate`` (``max_retries`` is its old name, deprecated).
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
        retries: int | RetryPolicy = 2,
        retry_backoff_s: float | None = None,
        max_retries: int | None = None,
        max_staleness: int | None = None,
        stale: StalePolicy = "drop",
        update_every: int | None = None,
        seed: int = 0,
        out_dir: Path | str | None = None,
        executor: Literal["local", "ray"] | RayOptions = "local",
        **env_kwargs: Any,
    ) -> None:
        if concurrency < 1 or buffer < 1:
            raise ValueError(f"concurrency={concurrency} and buffer={buffer} must be >= 1")
        self.retry = RetryPolicy.of(
            retries, retry_backoff_s, max_retries=max_retries, owner="RolloutStream"
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
        self.max_staleness = max_staleness
        self.stale = stale
        self._gate = StalenessGate(max_staleness, stale, update_every)
        self.seed = seed
        self.out_dir = out_dir
        self.env_kwargs = env_kwargs
        self._executor: EpisodeExecutor | None = None  # local: made once the policy is
        if executor != "local":  # a RayOptions, or "ray" for the defaults
            options = RayOptions() if executor == "ray" else executor
            if not isinstance(env, str) or not isinstance(options, RayOptions):
                raise ValueError("executor: 'local', or 'ray' / RayOptions with an env id")
            self._executor = RayExecutor(
                env, policy, options, concurrency=concurrency, env_overrides=env_kwargs
            )
        self.stats = StreamStats()
        self._rng = random.Random(seed)
        self._items: deque[_Ready] = deque()
        self._free = concurrency
        self._outstanding = 0  # draws started and not yet handed over or dropped
        self._consumer_waiting = False
        self._signal: _Signal | None = None
        self._producer: asyncio.Task[None] | None = None
        self._recorder: RunRecorder | None = None
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
            if self._executor is not None:
                await self._executor.aclose()
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
        if isinstance(self._executor, RayExecutor):
            await self._executor.start()
            env: Any = None  # the actors' own; the identity reads the parts' names
        else:
            if isinstance(self.policy, str):
                self.policy = make_policy(self.policy, self._tasks or ())
            self._executor = local = LocalExecutor(self._make_env, self.policy)
            env = local.spare()  # an env that cannot be made ends the stream now, with its error
        if self.out_dir is not None:
            planned = None if draws is None else draws * size
            identity = stream_identity(self.env, self.policy, env, size, self.seed, self.env_kwargs)
            self._recorder = await RunRecorder.open(
                self.out_dir, uuid.uuid4().hex[:12], identity, {"planned": planned}
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

    def _make_env(self) -> Environment[LLMRequest, LLMResponse]:
        if isinstance(self.env, str):
            return make(self.env, tasks=self._tasks, **self.env_kwargs)
        return self.env()

    async def _play(self, draw: TaskDraw) -> Episode:
        """One try on the executor; an exception out of it is an error episode all the same
        (the executor's rollout turns an episode's own failures into error episodes)."""
        assert self._executor is not None
        options = {"task_id": draw.task_id} if draw.task_id else None
        stats = self.stats
        stats.started += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        started = time.perf_counter()
        try:
            episode = await self._executor.run(draw.seed, options)
        except Exception as e:  # a broken environment: an error all the same, never a reward
            end = EpisodeEnd.from_exception(e)
            wall_s = time.perf_counter() - started
            episode = Episode(turns=[], end=end, task_id=draw.task_id, wall_s=wall_s)
        finally:
            stats.in_flight -= 1
        stats.finished += 1
        if episode.status == EpisodeStatus.ERROR:
            stats.errors += 1
            stats.error_classes[str(episode.end.error_class)] += 1
        return episode

    async def _member(self, draw: TaskDraw, rows: list[EpisodeRow]) -> tuple[Episode, int | None]:
        """One attempt of a draw: its tries under the retry policy (each one's row appended
        to ``rows``), the final episode and the policy version it started on; raises
        :class:`_DropGroup` when the final try is an error."""
        retry = self.retry if self.on_error == "retry" else RetryPolicy(0)
        version: int | None = None

        async def play() -> Episode:
            nonlocal version
            version = current_version(self.policy)
            return await self._play(draw)

        async def record(episode: Episode, try_index: int, final: bool) -> None:
            row = episode_row(episode, attempt=0, seed=draw.seed, try_index=try_index, final=final)
            rows.append(row)
            self.stats.retried += not final

        episode = await retry.run(play, record)
        if episode.status == EpisodeStatus.ERROR:
            raise _DropGroup
        return episode, version

    async def _run_draw(self, draw: TaskDraw, size: int, grouped: bool) -> None:
        """Run one draw's group, then buffer it (or drop it); hold ``size`` slots until then."""
        assert self._signal is not None
        buffered = False
        try:
            results: list[tuple[Episode, int | None] | None] = [None] * size
            rows: list[list[EpisodeRow]] = [[] for _ in range(size)]

            async def member(i: int) -> None:
                results[i] = await self._member(draw, rows[i])

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
        """Write a finished draw's tries (:func:`~palaestra.rl.stream_store.number_rows`), one
        transaction each."""
        if self._recorder is not None:
            for row in number_rows(draw.task_id, draw.seed, rows, self._attempts):
                await self._recorder.write(row)
