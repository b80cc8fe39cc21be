"""Snapshots of a :class:`~palaestra.env.code_env.CodeEnv` episode, and episodes started from
them: Go-Explore's return to a promising state, GRPO groups that share a prefix.

``await env.snapshot()``, while the env waits for an action (after ``reset`` or a MID ``step``),
takes an :class:`EpisodeSnapshot`: the sandbox's files (a
:class:`~palaestra.sandbox.SandboxSnapshot`), the scaffold's conversation
(:class:`~palaestra.scaffolds.loop.LoopState`), the observation the env waits on, the turns played
so far (each observation with the action that answered it, token ids and all) and the episode's
counters (steps, agent time used, policy time, usage, cost). The episode goes on unchanged; the
time the snapshot takes counts neither as agent nor as policy time.

``await env.restore(snapshot)`` ends the env's episode (as ``reset`` does) and starts a new one
from the snapshot: a new sandbox with a copy of its files, the scaffold resumed from its
conversation. It returns FIRST, as every episode starts in dm_env (a new episode id, reward
None); its observation equals the snapshot's, ``info["step"]`` is the steps taken before and
``info["restored_from"]`` the snapshot's id. Limits go on from where they stood: the step limit
counts the turns before, the agent time limit the time used before. LAST's ``executions`` and
``usage`` cover the whole episode, prefix included; :attr:`EpisodeSnapshot.turns` is the prefix
a trainer prepends to the turns it plays from there.

``await env.fork(snapshot, n)`` makes ``n`` new environments (copies of ``env``'s configuration
sharing its backend, scaffold and verifier), each with an episode restored from the snapshot, and
returns them with their FIRST time steps: ``[(env_1, ts_1), ...]``. Each owns its episode and its
sandbox; close each when done.

Only what the snapshot holds carries over: files, not processes (a server the agent started is
not running in a restored sandbox). Scaffolds whose state is their conversation (``bash``,
``tools``) can be snapshot; ``terminus`` (a live terminal) and external agents cannot.

A snapshot is released with :meth:`EpisodeSnapshot.release` (or ``async with``), and by the env
that took it when that env closes; episodes restored from it do not need it any more (Docker's
image stays until their containers close). See docs/snapshots.md.
"""

from __future__ import annotations

import asyncio
import copy
import random
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from palaestra.env.agent_user import agent_sandbox
from palaestra.env.episode import RunningEpisode, advance, observe
from palaestra.env.types import EpisodeError, TimeStep, restart
from palaestra.llm.client import MediatedClient
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.sandbox.base import SandboxSnapshot
from palaestra.scaffolds.loop import LoopState, TurnScaffold
from palaestra.tasks import Task

if TYPE_CHECKING:
    from palaestra.env.code_env import CodeEnv

#: A turn before the snapshot: the observation and the action that answered it.
PlayedTurn = tuple[LLMRequest, LLMResponse]


@dataclass(eq=False)
class EpisodeSnapshot:
    """An episode frozen between two steps; see the module docstring.

    ``observation`` is the request the episode waited on, ``turns`` the turns played before it
    (their actions carry the policy's token ids), ``steps`` their count, ``conversation`` the
    scaffold's state, ``sandbox`` the sandbox's files, ``episode_id`` the episode it was taken
    from.
    """

    id: str
    task: Task
    episode_id: str
    observation: LLMRequest
    turns: tuple[PlayedTurn, ...]
    conversation: LoopState
    sandbox: SandboxSnapshot
    _episode: RunningEpisode
    _owner: set[EpisodeSnapshot] = field(repr=False)

    @property
    def steps(self) -> int:
        return len(self.turns)

    @property
    def released(self) -> bool:
        return self.sandbox.released

    async def release(self) -> None:
        """Free its sandbox files (idempotent); episodes restored from it go on."""
        self._owner.discard(self)
        await self.sandbox.release()

    async def __aenter__(self) -> EpisodeSnapshot:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()


async def take_snapshot(env: CodeEnv, owner: set[EpisodeSnapshot]) -> EpisodeSnapshot:
    """``env``'s episode as it waits for an action; added to ``owner`` (the env's snapshots)."""
    ep = env._episode
    if ep is None or ep.done or not ep.client.waiting or ep.last_request is None:
        raise EpisodeError(
            "snapshot() needs an episode waiting for an action: call it after reset() or a "
            "step() that returned MID"
        )
    scaffold = _resumable(env)
    started = time.perf_counter()
    conversation = scaffold.state_of(ep.client)
    files = await ep.sandbox.snapshot()
    # Neither agent nor policy time: the policy's clock starts again from here.
    ep.observed_at += time.perf_counter() - started
    record = replace(ep, turns=list(ep.turns), timings=dict(ep.timings))
    snapshot = EpisodeSnapshot(
        id=files.id,
        task=ep.task,
        episode_id=ep.id,
        observation=ep.last_request,
        turns=tuple(ep.turns),
        conversation=conversation,
        sandbox=files,
        _episode=record,
        _owner=owner,
    )
    owner.add(snapshot)
    return snapshot


async def restore_episode(env: CodeEnv, snapshot: EpisodeSnapshot) -> TimeStep[LLMRequest]:
    """End ``env``'s episode and start one from ``snapshot``; its FIRST time step."""
    if env._closed:
        raise EpisodeError("restore() on a closed environment; create a new one")
    if snapshot.released:
        raise EpisodeError(f"snapshot {snapshot.id} was released; take a new one")
    _resumable(env)
    await env.abandon()
    episode_id = uuid.uuid4().hex[:16]
    started = time.perf_counter()
    sandbox = await env.backend.restore(
        snapshot.sandbox, labels={"palaestra.episode_id": episode_id}
    )
    client = MediatedClient(metadata={"env_id": env.env_id})
    record = snapshot._episode
    # The unit the scaffold was on (a multi-step task's current step), as its [agent] user.
    view = agent_sandbox(sandbox, record.current.agent_user)
    task = _resumable(env).run(record.current, view, client, snapshot.conversation)
    ep = replace(
        record,
        id=episode_id,
        sandbox=sandbox,
        client=client,
        scaffold_task=asyncio.create_task(task),
        turns=list(record.turns),
        timings={**record.timings, "sandbox_start_s": time.perf_counter() - started},
    )
    env._episode = ep
    event = await advance(ep)
    ep.agent_s = record.agent_s  # rebuilding the waiting request is no agent work
    if isinstance(event, LLMRequest):
        return restart(event, {**observe(ep), "restored_from": snapshot.id})
    await env.abandon()
    raise EpisodeError(
        f"the episode restored from snapshot {snapshot.id} ended ({event.reason}) before asking "
        f"the policy anything: {event.message}"
    )


async def fork_episode(
    env: CodeEnv, snapshot: EpisodeSnapshot, n: int
) -> list[tuple[CodeEnv, TimeStep[LLMRequest]]]:
    """``n`` new environments like ``env``, each with an episode restored from ``snapshot``."""
    if n < 1:
        raise ValueError(f"fork(n={n}): n is the number of episodes to start, at least 1")
    forks = [_copy(env) for _ in range(n)]
    try:
        results: list[Any] = await asyncio.gather(
            *(fork.restore(snapshot) for fork in forks), return_exceptions=True
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise failures[0]
    except BaseException:  # one failed, or the caller was cancelled: no fork is left open
        await asyncio.gather(*(fork.close() for fork in forks))
        raise
    return list(zip(forks, results, strict=True))


def _resumable(env: CodeEnv) -> TurnScaffold[Any]:
    scaffold = env.scaffold
    if not isinstance(scaffold, TurnScaffold) or not scaffold.turns.resumable:
        raise EpisodeError(
            f"scaffold {scaffold.name!r} cannot resume an episode, so it has no snapshots: "
            "use a scaffold whose state is its conversation (bash, tools)"
        )
    return scaffold


def _copy(env: CodeEnv) -> CodeEnv:
    """A new environment with ``env``'s configuration (backend, scaffold, verifier, tasks,
    limits shared) and none of its episode state."""
    clone = copy.copy(env)
    clone._episode = None
    clone._prepared = None  # the episode env prepared is env's to take or close
    clone._closed = False
    clone._rng = random.Random()
    clone._snapshots = set()
    return clone
