"""Episodes prepared ahead: :meth:`CodeEnv.prepare <palaestra.env.code_env.CodeEnv.prepare>`.

A reset does three things before its first observation: it makes the task's sandbox and sets it
up, then runs the scaffold until its first request. For a built-in scaffold the last part is
nothing; for a coding-agent CLI (:mod:`palaestra.scaffolds.harness`) it is the CLI's start-up:
Node.js or Bun loading a large bundle, reading its configuration, preparing its tools, 0.2-2 s
of CPU. ``prepare(seed=, options=)`` does all three in the background for the episode the next
``reset(seed=, options=)`` will start, while the current episode runs; that reset takes the
episode as it stands (waiting only for what is not done yet), and its first observation is the
request the scaffold has been waiting to send.

What it changes and what it does not:

* The episode is the same: the task is picked as the reset picks it (the rng and the
  ``"cycle"`` cursor are read, not advanced, by ``prepare``), nothing of the agent has run
  before the reset (a scaffold acts only on the policy's answers, and the first request is
  not answered until the reset returns it), and the sandbox is a fresh one, as every
  episode's. A reset that picks another task closes the prepared episode and starts its own:
  wasted work, never a wrong episode.
* The agent's time limit counts from the reset: the scaffold's start-up before it is the
  environment's set-up, as the sandbox's creation is.
* It takes the start-up off the episode's wall time, not off the machine's CPU: a machine
  whose cores are all busy runs no more episodes a second for it. It pays where the policy is
  the bottleneck (a GPU serving many episodes), so that episodes wait less for the CPU work
  between the policy's answers.
* One prepared episode at a time per environment, one sandbox more alive while it waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from palaestra.env.episode import RunningEpisode, abandon_episode


@dataclass
class Prepared:
    """An episode being started ahead for the task ``task_id``."""

    task_id: str
    starting: asyncio.Task[RunningEpisode]


def prepare(task_id: str, begin: Callable[[str], Coroutine[Any, Any, RunningEpisode]]) -> Prepared:
    """Start ``begin(task_id)`` (the environment's sandbox, set-up and scaffold start) now."""
    return Prepared(task_id, asyncio.create_task(begin(task_id)))


async def take(prepared: Prepared) -> RunningEpisode:
    """The prepared episode, once its start is done (what that start raised, raised here: the
    reset fails as it would have failed itself). ``timings["ready_wait_s"]``: how long the
    reset waited for it (0.0: it was ready). Cancelled while it waits, the episode is closed."""
    waited = time.perf_counter()
    try:
        ep = await asyncio.shield(prepared.starting)
    except asyncio.CancelledError:
        await close(prepared)
        raise
    ep.timings["ready_wait_s"] = time.perf_counter() - waited
    return ep


#: Discards under way, held here: a caller cancelled while it waits for one leaves it running
#: (the event loop keeps only weak references to tasks).
_DISCARDING: set[asyncio.Task[None]] = set()


async def close(prepared: Prepared) -> None:
    """:func:`discard` ``prepared`` to the end, even when the caller is cancelled meanwhile
    (the caller's cancellation is raised once the discard has been handed over)."""
    task = asyncio.ensure_future(discard(prepared))
    _DISCARDING.add(task)
    task.add_done_callback(_DISCARDING.discard)
    await asyncio.shield(task)


async def discard(prepared: Prepared) -> None:
    """Close a prepared episode that no reset will take: its start is waited for (a sandbox
    half made is the backend's to finish or undo, not abandoned midway), then its scaffold is
    cancelled and its sandbox closed."""
    await asyncio.wait({prepared.starting})  # a cancelled wait leaves the start running
    if prepared.starting.cancelled() or prepared.starting.exception() is not None:
        return  # it failed to start: nothing of it is left to close
    await abandon_episode(prepared.starting.result())
