"""Episodes on a Ray cluster: :class:`RayExecutor` (the ``ray`` extra).

The driver (``evaluate``, ``RolloutStream``) keeps the plan, the one SQLite store and the
progress bar; episodes run on :class:`EpisodeActor` actors spread over the cluster's nodes
(``SPREAD``, placed by the resources each actor asks for: CPUs, memory, custom resources such
as ``docker``). Each actor builds its own environments, sandbox backend and warm pool, and its
own policy: from a name (``make_policy``: ``oracle``, ``openai:<model>`` for a shared
OpenAI-compatible endpoint, ``hf:<dir>`` for a local model on every node) or a picklable
client. An episode comes back as plain data, the same :class:`~palaestra.run.rollout.Episode`
the local path returns, and is recorded by the driver alone.

Faults: an actor is restarted by Ray when it or its node dies, and its start runs the sandbox
janitor, which reclaims what the dead incarnation left on that node; it runs again every
:data:`JANITOR_PERIOD_S` while the actor lives (a dead incarnation may still be exiting when
its successor starts, and its sandboxes are spared while their owner runs). An episode in flight on
a dead actor is lost, never recorded, and runs again on the least loaded actor (up to
:attr:`RayOptions.max_lost` times). Nothing else is redone: what finished is in the store.

An actor that does not answer (its node died before Ray noticed, it waits for room to restart
or to start at all) would hold the episodes sent to it forever. So while episodes wait, every
actor is asked whether it answers (a ping in a concurrency group of its own, which busy
episodes never hold up); the episodes of one silent for :attr:`RayOptions.unavailable_after_s`
while another answers are lost too, and go to the actors that answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import pickle
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from palaestra.env.registry import load_tasks, make, make_policy
from palaestra.llm.client import LLMClient
from palaestra.run.executor import LocalExecutor
from palaestra.run.rollout import Episode
from palaestra.sandbox import default_backend
from palaestra.sandbox.docker import reclaim_dead_owners
from palaestra.sandbox.janitor import reclaim_leftovers
from palaestra.sandbox.local import LocalBackend

log = logging.getLogger(__name__)

#: Actors are named ``<prefix><run token>-<i>`` (``ray list actors`` shows whose they are).
ACTOR_PREFIX = "palaestra-episodes-"
#: Driver environment variables an actor needs to reach a shared policy endpoint.
FORWARDED_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
#: How long closing waits for the actors to close their environments before killing them.
CLOSE_TIMEOUT_S = 60.0
#: The actors' concurrency group for pings: answered even while every episode slot is busy.
HEALTH_GROUP = "health"
#: Seconds between an actor's passes of the sandbox janitor on its node.
JANITOR_PERIOD_S = 10.0


class RayClusterError(RuntimeError):
    """The Ray cluster cannot be reached or used."""


@dataclass(frozen=True)
class RayOptions:
    """How episodes spread over a Ray cluster.

    ``address``: the cluster (``auto``: the one this machine belongs to, as ``ray start``
    made it; ``ray://host:10001``; None: an existing connection, else a new local
    instance). ``actors``: how many (None: one per alive node). ``slots``: episodes in flight
    per actor (None: the caller's concurrency shared out). ``num_cpus``, ``memory`` (bytes)
    and ``resources`` (custom, e.g. ``{"docker": 1}``) are what each actor reserves.
    ``max_lost``: how many times one episode may be lost with its actor before the run fails.
    ``unavailable_after_s``: how long an actor may go without answering (see the module
    docstring) before the episodes waiting on it go elsewhere.
    """

    address: str | None = None
    actors: int | None = None
    slots: int | None = None
    num_cpus: float = 1.0
    memory: int | None = None
    resources: dict[str, float] = field(default_factory=dict)
    max_lost: int = 3
    unavailable_after_s: float = 120.0


def _janitor(backend: object) -> Callable[[], object]:
    """One blocking pass of ``backend``'s janitor: dead owners' sandboxes on this node."""
    if isinstance(backend, LocalBackend):
        return functools.partial(reclaim_leftovers, backend.state_dir)

    def docker() -> None:  # in a thread of its own: the caller's loop may be running
        with ThreadPoolExecutor(1) as thread:
            thread.submit(asyncio.run, reclaim_dead_owners()).result()

    return docker


def _every(period: float, call: Callable[[], object], stop: threading.Event) -> None:
    """Call ``call`` every ``period`` seconds until ``stop`` is set (a thread's body); a pass
    that fails is logged and the next one tried."""
    while not stop.wait(period):
        try:
            call()
        except Exception:
            log.warning("the sandbox janitor's pass failed", exc_info=True)


class EpisodeActor:
    """One Ray actor: a :class:`LocalExecutor` over its own environments and policy.

    Its start reclaims the sandboxes of dead owners on its node (the janitor), so an actor
    restarted after a crash leaves nothing of its previous incarnation running."""

    def __init__(self, env_id: str, policy: str | LLMClient, env_overrides: dict[str, Any]) -> None:
        # The janitor, now: a backend's own pass waits for its first sandbox, which a
        # restarted actor may never get (the run's last episodes done elsewhere); then again
        # and again, in a thread of its own, while the actor lives.
        backend = default_backend(env_overrides.get("sandbox", "local"))
        reclaim = _janitor(backend)
        reclaim()
        forever = threading.Event()
        threading.Thread(
            target=_every, args=(JANITOR_PERIOD_S, reclaim, forever), daemon=True
        ).start()
        tasks = load_tasks(env_id)
        agent = make_policy(policy, tasks) if isinstance(policy, str) else policy
        self.node_id = _node_id()
        self._executor = LocalExecutor(lambda: make(env_id, tasks=tasks, **env_overrides), agent)

    async def run(
        self, seed: int | None, options: dict[str, Any] | None, max_cost_usd: float | None
    ) -> Episode:
        return await self._executor.run(seed, options, max_cost_usd)

    def node(self) -> str:
        return self.node_id

    async def aclose(self) -> None:
        await self._executor.aclose()


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


@dataclass
class _Actor:
    handle: Any
    load: int = 0
    back: asyncio.Future[Any] | None = None
    """Set while the actor restarts after a loss: done once it answers again."""
    silent_since: float | None = field(default_factory=time.monotonic)
    """Since when it has not answered a ping (monotonic); None while it answers."""
    given_up: asyncio.Future[None] | None = None
    """Done when the episodes waiting on it are to go elsewhere."""

    @property
    def rank(self) -> tuple[bool, int]:
        """Actors that answer first, then the least loaded."""
        return (self.back is not None and not self.back.done(), self.load)

    def giving_up(self) -> asyncio.Future[None]:
        """What an episode sent to it waits on beside its result."""
        if self.given_up is None or self.given_up.done():
            self.given_up = asyncio.get_running_loop().create_future()
        return self.given_up

    def give_up(self) -> None:
        """Send its waiting episodes elsewhere; later ones avoid it until it answers (the
        watch alone does it, at most once an interval: a retried episode is never sent away
        again by another's failure)."""
        if self.given_up is not None and not self.given_up.done():
            self.given_up.set_result(None)
        self.until_it_answers()

    def until_it_answers(self) -> None:
        """Rank it behind the actors that answer (:attr:`back`) until it answers again."""
        if self.back is None or self.back.done():
            self.back = asyncio.ensure_future(_answers(self.handle))


class RayExecutor:
    """Runs episodes on :class:`EpisodeActor` actors; see the module docstring.

    ``env_overrides`` must name the sandbox (each node builds its own backend); the scaffold
    is a name or an object that pickles (a turn-loop scaffold with its options does). Start it with :meth:`start`; :meth:`aclose` closes and kills the
    actors and disconnects a Ray connection it opened.
    """

    def __init__(
        self,
        env_id: str,
        policy: str | LLMClient,
        options: RayOptions,
        *,
        concurrency: int,
        env_overrides: dict[str, Any],
    ) -> None:
        if not isinstance(env_overrides.get("sandbox", ""), str):
            raise ValueError(
                "with Ray, pass sandbox by name (a string): every node builds its own backend"
            )
        scaffold = env_overrides.get("scaffold", "")
        if not isinstance(scaffold, str):
            try:
                pickle.dumps(scaffold)
            except Exception as e:
                raise ValueError(
                    f"with Ray, pass scaffold by name or as an object that pickles ({e})"
                ) from None
        self.env_id = env_id
        self.policy = policy
        self.options = options
        self.concurrency = concurrency
        self.env_overrides = env_overrides
        self.lost = 0
        self._actors: list[_Actor] = []
        self._watch: asyncio.Future[None] | None = None
        self._connected = False
        self._closed = False

    async def start(self) -> None:
        """Connect to the cluster and start the actors (each one's start runs the janitor)."""
        import ray

        if not ray.is_initialized():
            try:
                await asyncio.to_thread(
                    ray.init,
                    address=self.options.address,
                    log_to_driver=False,
                    logging_level="error",
                )
            except ConnectionError as e:
                raise RayClusterError(
                    f"no Ray cluster at {self.options.address!r} ({e}); start one with "
                    "`ray start --head` or pass its address"
                ) from None
            self._connected = True
        nodes = await asyncio.to_thread(ray.nodes)
        count = self.options.actors or sum(1 for n in nodes if n.get("Alive"))
        slots = self.options.slots or max(1, -(-self.concurrency // count))
        env_vars = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
        actor_class = ray.remote(concurrency_groups={HEALTH_GROUP: 1})(EpisodeActor)
        placement = dict(
            num_cpus=self.options.num_cpus,
            memory=self.options.memory,
            resources=dict(self.options.resources),
            max_concurrency=slots,
            max_restarts=-1,
            max_task_retries=0,
            scheduling_strategy="SPREAD",
            runtime_env={"env_vars": env_vars} if env_vars else None,
        )
        token = secrets.token_hex(4)
        self._actors = [
            _Actor(
                actor_class.options(name=f"{ACTOR_PREFIX}{token}-{i}", **placement).remote(
                    self.env_id, self.policy, self.env_overrides
                )
            )
            for i in range(count)
        ]
        self._watch = asyncio.ensure_future(self._watch_actors())

    async def nodes(self) -> list[str]:
        """The node id of every actor (waits for them to start)."""
        return list(await asyncio.gather(*(a.handle.node.remote() for a in self._actors)))

    @property
    def handles(self) -> list[Any]:
        return [a.handle for a in self._actors]

    async def run(
        self,
        seed: int | None,
        options: dict[str, Any] | None,
        max_cost_usd: float | None = None,
        prepare_next: dict[str, Any] | None = None,
    ) -> Episode:
        """One episode on the least loaded actor. ``prepare_next`` is not used: the next call
        may go to another actor, whose environments would start it for nothing."""
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

        lost: BaseException | None = None
        for _ in range(self.options.max_lost + 1):
            actor = min(self._actors, key=lambda a: a.rank)
            if actor.back is not None and not actor.back.done():
                # none answers (the best one restarts): wait for it, not a loss at once
                await asyncio.wait({actor.back}, timeout=self.options.unavailable_after_s)
            actor.load += 1
            ref = actor.handle.run.remote(seed, options, max_cost_usd)
            result = asyncio.ensure_future(_result(ref))
            try:
                await asyncio.wait((result, actor.giving_up()), return_when=asyncio.FIRST_COMPLETED)
                if result.done():
                    return result.result()
                self.lost += 1  # the actor does not answer: the episode goes elsewhere
                lost = TimeoutError(
                    f"its actor did not answer for {self.options.unavailable_after_s:g}s"
                )
                result.cancel()
                _cancel(ref)
            except (ActorDiedError, ActorUnavailableError, RayActorError) as e:
                self.lost += 1  # the actor or its node died: the episode goes elsewhere
                lost = e
                actor.until_it_answers()
            except asyncio.CancelledError:
                result.cancel()
                _cancel(ref)
                raise
            finally:
                actor.load -= 1
        reason = str(lost).strip().splitlines()[-1] if lost is not None else "unknown"
        raise RuntimeError(
            f"an episode (seed {seed}) was lost with its actor {self.options.max_lost + 1} "
            f"times (last: {reason}); see `ray status` and the Ray logs"
        )

    async def _watch_actors(self) -> None:
        """While episodes wait on actors, ping every actor each ``interval``; give up on one
        silent for ``unavailable_after_s`` while another answers (with none answering, there
        is nowhere better to send its episodes)."""
        patience = self.options.unavailable_after_s
        interval = min(15.0, patience / 3)
        while True:
            await asyncio.sleep(interval)
            actors = list(self._actors)
            if not any(a.load for a in actors):
                continue
            answers = await asyncio.gather(*(_ping(a.handle, interval) for a in actors))
            now = time.monotonic()
            for actor, answered in zip(actors, answers, strict=True):
                if answered:
                    actor.silent_since = None
                elif actor.silent_since is None:
                    actor.silent_since = now
            if all(a.silent_since is not None for a in actors):
                continue
            for actor in actors:
                silent = actor.silent_since
                if actor.load and silent is not None and now - silent >= patience:
                    actor.give_up()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        import ray

        if self._watch is not None:
            self._watch.cancel()
        # An actor not back from a loss could not close anything: it is killed below.
        answering = [a for a in self._actors if a.back is None or a.back.done()]
        for actor in self._actors:
            if actor.back is not None:
                actor.back.cancel()
        try:
            closing = asyncio.gather(
                *(a.handle.aclose.remote() for a in answering), return_exceptions=True
            )
            with contextlib.suppress(TimeoutError):  # then the kill below frees them
                await asyncio.wait_for(closing, CLOSE_TIMEOUT_S)
            for actor in self._actors:
                ray.kill(actor.handle, no_restart=True)
        finally:
            self._actors = []
            if self._connected:
                await asyncio.to_thread(ray.shutdown)


async def _answers(handle: Any, within: float = 300.0) -> None:
    """Return once a restarted actor answers, is found gone for good, or ``within`` seconds
    passed. A restart takes a while (longer on a loaded node): until it is done, each ask is
    answered at once with "the actor is restarting", so ask again."""
    from ray.exceptions import ActorDiedError

    deadline = time.monotonic() + within
    while True:
        try:
            await _node(handle)
            return
        except ActorDiedError:
            return
        except Exception:  # noqa: BLE001 - unavailable (restarting) or unreachable: ask again
            if time.monotonic() > deadline:
                return
            await asyncio.sleep(0.5)


async def _ping(handle: Any, timeout: float) -> bool:
    """Whether the actor answers within ``timeout`` seconds."""
    try:
        await asyncio.wait_for(_node(handle), timeout)
        return True
    except Exception:
        return False


async def _node(handle: Any) -> str:
    """The actor's node, asked in its health group (never behind busy episode slots)."""
    return await handle.node.options(concurrency_group=HEALTH_GROUP).remote()


async def _result(ref: Any) -> Episode:
    return await ref


def _cancel(ref: Any) -> None:
    import ray

    with contextlib.suppress(Exception):  # a task of an actor that is gone
        ray.cancel(ref)
