"""``CodeEnv``: a task source, a sandbox backend, a scaffold and a verifier, as one RL environment.

``reset`` picks a task (deterministically from the seed), creates a sandbox, sets it up
(:mod:`~palaestra.env.setup`: the task's healthcheck, its ``[agent] user``), and starts the
scaffold as an asyncio task; the scaffold's first LLM request is the FIRST observation. ``step``
hands the action to the scaffold and returns its next request (MID), or, once the scaffold has
ended, runs the task's collect hooks and keeps its artifacts (:mod:`~palaestra.env.collect`),
runs the verifier in the same sandbox (or in a separate one: :mod:`~palaestra.env.separate`)
and returns LAST with the reward. A multi-step task runs the scaffold and the verifier once per
step (:mod:`~palaestra.env.steps`); the next step's first
request is a MID observation.

How the episode ended is one typed value on LAST, ``info["end"]`` (``ts.end``), an
:class:`~palaestra.env.end.EpisodeEnd`. Its ``reason`` (an :class:`EndReason`) and the time step:

* ``submitted`` / ``format_error_limit``: terminated (discount 0.0), verifier ran;
* ``step_limit`` / ``agent_timeout``: truncated (discount 1.0), verifier ran when
  ``verify_on_truncation`` (the default, as in Harbor), ``end.verified`` says which;
* ``error``: the scaffold or sandbox failed. LAST, reward 0.0, ``end.status == "error"``.
  Drop such episodes from training data: they say nothing about the policy.

``end.status`` (an :class:`EpisodeStatus`: passed, failed by ``pass_threshold``, or error)
and the error's class and message: :func:`~palaestra.env.end.classify_end`. LAST's observation
is never None: the request the scaffold would have sent next at the step limit, else the last
one the policy answered (:func:`~palaestra.env.episode.last_observation`).

Every time step's ``info`` has ``episode_id``, ``task_id`` and ``step`` (actions so far); MID
and LAST also ``shaping_reward`` (the shaping hook's value for the action just taken, None
without a hook: :mod:`palaestra.env.shaping`); LAST also ``end``, ``category``,
``difficulty``, ``timings``, ``usage``, ``cost_usd``, the scaffold's ``executions`` and
``sandbox_adjustments`` (what the backend changed from the task's limits, e.g. more CPUs than
the host has), and for a multi-step task ``steps`` (each verified step's result). The
observation is a function of the seed and the task only (its metadata names the task, the turn,
the scaffold and the env, not the episode): the same seed gives the same observation.
``snapshot``, ``restore`` and ``fork`` save an episode between steps and start new episodes
from it: :mod:`palaestra.env.fork`.
``prepare(seed=, options=)`` starts the episode the next ``reset(seed=, options=)`` will start
(its sandbox, its set-up, its scaffold up to the first request: a harness CLI's start-up) while
the current one runs; that reset takes it (:mod:`palaestra.env.ahead`).

The agent's time limit (the task's ``[agent].timeout_sec``) counts environment time only, not
the time the policy takes to answer (:mod:`palaestra.env.episode`).

The parts, one job each: :mod:`~palaestra.env.episode` (the running episode, its clock),
:mod:`~palaestra.env.steps` (multi-step tasks), :mod:`~palaestra.env.verification` (when and
where the verifier runs), :mod:`~palaestra.env.end` (how the episode ended),
:mod:`~palaestra.env.shaping` (per-turn shaping); this module is the state machine that calls
them.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from palaestra.env import ahead
from palaestra.env.end import classify_end, error_text
from palaestra.env.episode import (
    RunningEpisode,
    abandon_episode,
    advance,
    last_info,
    last_observation,
    observe,
    start_scaffold,
    take_action,
)
from palaestra.env.fork import EpisodeSnapshot, fork_episode, restore_episode, take_snapshot
from palaestra.env.picking import TaskPick, pick_task
from palaestra.env.sandbox_spec import TaskSpecs
from palaestra.env.setup import set_up
from palaestra.env.shaping import Shaping, final_metadata, shape_turn
from palaestra.env.steps import next_step
from palaestra.env.types import (
    Environment,
    EpisodeError,
    TimeStep,
    renamed_argument,
    restart,
    termination,
    transition,
    truncation,
)
from palaestra.env.verification import verify_end
from palaestra.llm.client import MediatedClient
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.sandbox import default_backend
from palaestra.sandbox.base import Mount, SandboxBackend, SandboxError
from palaestra.scaffolds import Scaffold, make_scaffold
from palaestra.scaffolds.base import Outcome
from palaestra.tasks import Task
from palaestra.tasks.source import TaskSet
from palaestra.verify.harbor import HarborVerifier
from palaestra.verify.protocol import Verifier
from palaestra.verify.strategies import Harbor, RewardStrategy, StrategyVerifier, get_strategy


class CodeEnv(Environment[LLMRequest, LLMResponse]):
    """The workhorse environment; see the module docstring for its semantics.

    ``tasks``: a :class:`TaskSet`, a sequence of tasks, or a path to Harbor task directories.
    ``sandbox``: a backend name (``"local"``) or a :class:`SandboxBackend` instance.
    ``scaffold``: a scaffold name (``"bash"``) or instance.
    ``pick``: ``"random"`` (seeded by ``reset(seed=)``), ``"cycle"`` (in order), or a
    function ``(rng, n_tasks) -> index``; ``reset(options={"task_id": ...})`` overrides it.
    ``sampler`` is its deprecated name (a sampler is a curriculum: ``palaestra.rl.TaskSampler``).
    ``pass_threshold``: the reward at or above which an episode counts as passed.
    ``reward``: how the verifier's report becomes the reward, a strategy name (``"harbor"``,
    the default: ``test.sh``'s reward; ``"exec_only"``, ``"io"``, ``"assertions"``,
    ``"coderl"``, ``"partial"``, ``"cure"``) or a :class:`RewardStrategy`; a task that does not
    report what it needs ends as an error episode (``RewardStrategyError``). See
    docs/rewards.md.
    ``verifier``: any :class:`~palaestra.verify.Verifier` (default: the Harbor verifier, which
    runs the task's ``tests/test.sh``).
    ``shaping``: an optional per-turn reward hook (:mod:`palaestra.env.shaping`), reported in
    ``info["shaping_reward"]``, never added to the reward. ``artifacts_dir``: where each
    episode's artifacts are kept, ``<dir>/<episode-id>/`` (:mod:`palaestra.env.collect`).
    """

    def __init__(
        self,
        tasks: TaskSet | Sequence[Task] | Path | str,
        *,
        sandbox: str | SandboxBackend = "local",
        scaffold: str | Scaffold = "bash",
        verifier: Verifier | None = None,
        pick: TaskPick = "random",
        verify_on_truncation: bool = True,
        agent_timeout_sec: float | None = None,
        pass_threshold: float = 1.0,
        env_id: str | None = None,
        reward: str | RewardStrategy = "harbor",
        shaping: Shaping | None = None,
        artifacts_dir: Path | None = None,
        sampler: TaskPick | None = None,
    ) -> None:
        if sampler is not None:
            pick = renamed_argument("CodeEnv", "sampler", "pick", sampler)
        if isinstance(tasks, str | Path):
            tasks = TaskSet.from_dir(tasks)
        self.tasks = tasks if isinstance(tasks, TaskSet) else TaskSet(tasks)
        if not self.tasks:
            raise ValueError("CodeEnv needs at least one task; the task set is empty")
        self.backend = sandbox if isinstance(sandbox, SandboxBackend) else default_backend(sandbox)
        self.scaffold = make_scaffold(scaffold) if isinstance(scaffold, str) else scaffold
        self.reward = get_strategy(reward)
        verifier = verifier or HarborVerifier()
        self.verifier: Verifier = (
            verifier if isinstance(self.reward, Harbor) else StrategyVerifier(verifier, self.reward)
        )
        self.pick = pick
        self.verify_on_truncation = verify_on_truncation
        self.agent_timeout_sec = agent_timeout_sec
        self.pass_threshold = pass_threshold
        self.env_id = env_id or self.tasks.name
        self.shaping, self.artifacts_dir = shaping, artifacts_dir
        self._rng = random.Random()
        self._cursor = 0
        self._episode: RunningEpisode | None = None
        self._prepared: ahead.Prepared | None = None
        self._closed = False
        self._specs = TaskSpecs()
        self._snapshots: set[EpisodeSnapshot] = set()

    # -- episode control ------------------------------------------------------------------

    async def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> TimeStep[LLMRequest]:
        if self._closed:
            raise EpisodeError("reset() on a closed environment; create a new one")
        await self._abandon()
        if seed is not None:
            self._rng.seed(seed)
        task_id = self._pick(options or {})
        prepared, self._prepared = self._prepared, None
        if prepared is not None and prepared.task_id == task_id:
            ep = await ahead.take(prepared)
        else:
            if prepared is not None:  # prepared for another task: not this episode's
                await ahead.close(prepared)
            ep = await self._begin(task_id)
        self._episode = ep
        task = ep.task
        event = await advance(ep)
        if isinstance(event, LLMRequest):
            return restart(event, observe(ep))
        failure = None if ep.scaffold_task.cancelled() else ep.scaffold_task.exception()
        await self._abandon()
        if isinstance(failure, SandboxError):  # the infrastructure's (an MCP server...): as is
            raise failure
        detail = error_text(event.error_class, event.message)
        raise EpisodeError(
            f"scaffold {self.scaffold.name!r} ended ({event.reason}) before asking the policy "
            f"anything on task {task.id!r}" + (f": {detail}" if detail else "")
        )

    async def prepare(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """Start, in the background, the episode the next ``reset(seed=seed, options=options)``
        will start: its task picked as that reset will pick it, its sandbox made and set up,
        its scaffold run up to its first request (a harness CLI's start-up). Returns at once;
        the current episode, if any, goes on. That reset takes the episode as it stands; a
        reset that picks another task closes it. See :mod:`palaestra.env.ahead` for what it
        changes (an episode's wall time) and what it does not (the episode, the machine's
        CPU). With a ``pick`` function, ``options`` must name the task (``task_id`` or
        ``task_index``): calling the function ahead would advance its state (a curriculum's)
        for an episode that may never run."""
        if self._closed:
            raise EpisodeError("prepare() on a closed environment; create a new one")
        task_id = self._peek(seed, options or {})
        while self._prepared is not None:  # another call may prepare while this one discards
            if self._prepared.task_id == task_id:
                return
            prepared, self._prepared = self._prepared, None
            await ahead.close(prepared)
        if not self._closed:  # closed meanwhile: nothing to start
            self._prepared = ahead.prepare(task_id, self._begin)

    @property
    def prepared_task_id(self) -> str | None:
        """The task of the episode :meth:`prepare` has started (None: none)."""
        return None if self._prepared is None else self._prepared.task_id

    def is_prepared_for(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> bool:
        """Whether :meth:`prepare` has started the episode ``reset(seed=, options=)`` would
        start (what an executor holding several environments asks to pick the right one)."""
        if self._prepared is None:
            return False
        try:
            return self._peek(seed, options or {}) == self._prepared.task_id
        except ValueError:
            return False

    async def step(self, action: LLMResponse | str) -> TimeStep[LLMRequest]:
        ep = self._episode
        if ep is None or ep.done:
            raise EpisodeError("step() needs a running episode: call reset() first")
        if isinstance(action, str):
            action = LLMResponse(content=action)
        elif not isinstance(action, LLMResponse):
            raise TypeError(f"an action is an LLMResponse (or a str), got {type(action).__name__}")
        take_action(ep, action)
        event = await advance(ep)
        while isinstance(event, Outcome) and ep.task.steps:  # a step ended: the next one?
            following = await next_step(
                ep,
                event,
                scaffold=self.scaffold,
                verifier=self.verifier,
                verify_on_truncation=self.verify_on_truncation,
                artifacts_dir=self.artifacts_dir,
                agent_timeout_sec=self.agent_timeout_sec,
            )
            if following is None:
                break
            event = following
        if isinstance(event, LLMRequest):
            info = observe(ep)
            info["shaping_reward"] = shape_turn(
                self.shaping, len(ep.turns) - 1, action, event.metadata, last=False
            )
            return transition(event, info)
        return await self._finish(ep, event, action)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._abandon()
        prepared, self._prepared = self._prepared, None
        if prepared is not None:
            await ahead.close(prepared)
        await asyncio.gather(*(snapshot.release() for snapshot in list(self._snapshots)))

    async def abandon(self) -> None:
        await self._abandon()

    # -- snapshots: palaestra.env.fork ----------------------------------------------------

    async def snapshot(self) -> EpisodeSnapshot:
        """The episode as it waits for an action (files, conversation, counters); released
        by :meth:`EpisodeSnapshot.release` or when this env closes."""
        return await take_snapshot(self, self._snapshots)

    async def restore(self, snapshot: EpisodeSnapshot) -> TimeStep[LLMRequest]:
        """End the current episode and start one from ``snapshot``: its FIRST time step."""
        return await restore_episode(self, snapshot)

    async def fork(
        self, snapshot: EpisodeSnapshot, n: int
    ) -> list[tuple[CodeEnv, TimeStep[LLMRequest]]]:
        """``n`` new environments, each with an episode restored from ``snapshot``."""
        return await fork_episode(self, snapshot, n)

    @property
    def episode_id(self) -> str | None:
        return self._episode.id if self._episode else None

    # -- internals ------------------------------------------------------------------------

    def _pick(self, options: dict[str, Any]) -> str:
        """The id of the next episode's task (:func:`~palaestra.env.picking.pick_task`)."""
        task_id, self._cursor = pick_task(self.tasks, self.pick, self._rng, self._cursor, options)
        return task_id

    async def _begin(self, task_id: str) -> RunningEpisode:
        """A new episode on ``task_id``: its sandbox made and set up, its scaffold started."""
        if self.tasks.is_lazy:  # a generated task may be written to the cache on first use
            task = await asyncio.to_thread(self.tasks.get, task_id)
        else:
            task = self.tasks.get(task_id)
        if note := self.reward.instruction_note():  # what the strategy asks for besides code
            task = task.with_note(note)
        episode_id = uuid.uuid4().hex[:16]
        spec = await self._specs.agent(task, self.backend.name)
        spec = replace(
            spec,
            labels={**spec.labels, "palaestra.episode_id": episode_id},
            mounts=(*spec.mounts, *self._scaffold_mounts()),
        )
        started = time.perf_counter()
        current = task.steps[0] if task.steps else task  # a multi-step task's first step
        sandbox = await self.backend.create(spec)
        await set_up(sandbox, task, current)  # healthcheck...; closes the sandbox if it fails
        client = MediatedClient(metadata={"env_id": self.env_id})
        ep = RunningEpisode(
            id=episode_id,
            task=task,
            sandbox=sandbox,
            client=client,
            scaffold_task=start_scaffold(self.scaffold, current, sandbox, client),
            agent_budget_s=self.agent_timeout_sec or current.agent_timeout_sec,
            current=current,
        )
        ep.timings["sandbox_start_s"] = time.perf_counter() - started
        return ep

    def _peek(self, seed: int | None, options: dict[str, Any]) -> str:
        """The id of the task ``reset(seed=seed, options=options)`` would pick now, nothing
        advanced (the rng's and the cursor's copies are read)."""
        if callable(self.pick) and not {"task_id", "task_index"} & options.keys():
            raise ValueError(
                "prepare() with a pick function needs the task named: options={'task_id': "
                "...} or {'task_index': ...} (calling the function ahead would advance its "
                "state for an episode that may never run)"
            )
        rng = random.Random()
        rng.setstate(self._rng.getstate())
        if seed is not None:
            rng.seed(seed)
        return pick_task(self.tasks, self.pick, rng, self._cursor, options)[0]

    def _scaffold_mounts(self) -> tuple[Mount, ...]:
        """Host paths the scaffold needs in the sandbox (the external scaffold's proxy socket);
        a scaffold declares them with an optional ``sandbox_mounts()`` method."""
        mounts = getattr(self.scaffold, "sandbox_mounts", None)
        return tuple(mounts()) if callable(mounts) else ()

    async def _finish(
        self, ep: RunningEpisode, outcome: Outcome, action: LLMResponse
    ) -> TimeStep[LLMRequest]:
        """The LAST time step: verify (:mod:`palaestra.env.verification`), classify the end
        (:func:`~palaestra.env.end.classify_end`), report (:func:`~palaestra.env.episode.last_info`)."""
        ep.done = True
        result = await verify_end(
            ep,
            outcome,
            verifier=self.verifier,
            backend=self.backend,
            verifier_spec=self._specs.verifier(ep.task.id),
            verify_on_truncation=self.verify_on_truncation,
            artifacts_dir=self.artifacts_dir,
        )
        end = classify_end(outcome, result, self.pass_threshold)
        metadata = final_metadata(outcome)
        shaping_reward = shape_turn(self.shaping, len(ep.turns) - 1, action, metadata, last=True)
        info = last_info(ep, end, outcome, shaping_reward)
        observation = last_observation(ep, outcome, self.env_id)
        if outcome.truncated:
            return truncation(end.reward, observation, info)
        return termination(end.reward, observation, info)

    async def _abandon(self) -> None:
        """End the current episode early (if any), freeing its sandbox."""
        ep, self._episode = self._episode, None
        if ep is not None:
            await abandon_episode(ep)
