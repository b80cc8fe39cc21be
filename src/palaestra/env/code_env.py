"""``CodeEnv``: a task source, a sandbox backend, a scaffold and a verifier, as one RL environment.

``reset`` picks a task (deterministically from the seed), creates a sandbox, sets it up
(:mod:`~palaestra.env.setup`: the task's healthcheck, its ``[agent] user``), and starts the
scaffold as an asyncio task; the scaffold's first LLM request is the FIRST observation. ``step``
hands the action to the scaffold and returns its next request (MID), or, once the scaffold has
ended, runs the task's collect hooks and keeps its artifacts (:mod:`~palaestra.env.collect`),
runs the verifier in the same sandbox (or in a separate one: :mod:`~palaestra.env.separate`)
and returns LAST with the reward. A multi-step task runs the
scaffold and the verifier once per step (:mod:`~palaestra.env.steps`); the next step's first
request is a MID observation.

How the episode ended is one typed value on LAST, ``info["end"]`` (``ts.end``), an
:class:`~palaestra.env.end.EpisodeEnd`. Its ``reason`` (an :class:`EndReason`) and the time step:

* ``submitted`` / ``format_error_limit``: terminated (discount 0.0), verifier ran;
* ``step_limit`` / ``agent_timeout``: truncated (discount 1.0), verifier ran when
  ``verify_on_truncation`` (the default, as in Harbor), ``end.verified`` says which;
* ``error``: the scaffold or sandbox failed. LAST, reward 0.0, ``end.status == "error"``.
  Drop such episodes from training data: they say nothing about the policy.

``end.status`` (an :class:`EpisodeStatus`) is ``passed`` or ``failed`` by the reward and
``pass_threshold``, or ``error`` when the scaffold, sandbox or verifier failed; then
``end.error_class`` (the exception's class name, ``ScaffoldError`` when the scaffold reported
the failure, ``VerifierError`` / ``VerifierTimeout`` when the verifier gave no reward) and
``end.error_message`` say what. ``end.rewards`` is the verifier's breakdown, ``end.verifier``
its whole result.

LAST's observation is the episode's final request, never None: at the step limit the request
the turn-loop scaffold would have sent next (the conversation with the last action's output:
what a truncated episode bootstraps from); otherwise (a submission, a format-error limit, the
agent's time running out mid-command, an error, a scaffold without a next request) the last
request the policy answered.

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

The agent's time limit (the task's ``[agent].timeout_sec``) counts environment time only —
commands and scaffold work — not the time the policy takes to answer, so results do not depend
on how fast the trainer or inference server happens to be.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from palaestra.env.agent_user import agent_sandbox
from palaestra.env.collect import collect_episode
from palaestra.env.end import EpisodeEnd, error_text, is_infra_error
from palaestra.env.fork import EpisodeSnapshot, fork_episode, restore_episode, take_snapshot
from palaestra.env.sandbox_spec import prepare_sandbox_spec, prepare_verifier_spec
from palaestra.env.separate import verify_separately
from palaestra.env.setup import set_up
from palaestra.env.shaping import Shaping, TurnInfo, final_metadata
from palaestra.env.steps import begin_step, combine, stops_after
from palaestra.env.types import (
    Environment,
    EpisodeError,
    EpisodeStatus,
    TimeStep,
    renamed_argument,
    restart,
    termination,
    transition,
    truncation,
)
from palaestra.llm.client import MediatedClient
from palaestra.llm.types import LLMRequest, LLMResponse, Usage
from palaestra.sandbox import default_backend
from palaestra.sandbox.base import Mount, Sandbox, SandboxBackend, SandboxError, SandboxSpec
from palaestra.scaffolds import Scaffold, make_scaffold
from palaestra.scaffolds.base import EndReason, Outcome
from palaestra.tasks import Task
from palaestra.tasks.source import TaskSet
from palaestra.verify.harbor import HarborVerifier, VerifierResult, VerifierStatus
from palaestra.verify.protocol import Verifier
from palaestra.verify.strategies import Harbor, RewardStrategy, StrategyVerifier, get_strategy

TaskPick = Literal["random", "cycle"] | Callable[[random.Random, int], int]


@dataclass
class _Episode:
    id: str
    task: Task
    sandbox: Sandbox
    client: MediatedClient
    scaffold_task: asyncio.Task[Outcome]
    agent_budget_s: float
    current: Task
    """What the scaffold works on: the task, or the step of a multi-step task now running."""
    done: bool = False
    agent_s: float = 0.0
    policy_s: float = 0.0
    observed_at: float = 0.0
    last_request: LLMRequest | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    #: Each observation answered so far with its action (a snapshot's prefix; ``info["step"]``).
    turns: list[tuple[LLMRequest, LLMResponse]] = field(default_factory=list)
    step_results: list[tuple[Task, VerifierResult]] = field(default_factory=list)


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
        self._episode: _Episode | None = None
        self._closed = False
        self._specs: dict[str, SandboxSpec] = {}
        self._snapshots: set[EpisodeSnapshot] = set()
        self._verifier_specs: dict[str, SandboxSpec] = {}

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
        if self.tasks.is_lazy:  # a generated task may be written to the cache on first use
            task = await asyncio.to_thread(self.tasks.get, task_id)
        else:
            task = self.tasks.get(task_id)
        if note := self.reward.instruction_note():  # what the strategy asks for besides code
            task = task.with_note(note)
        episode_id = uuid.uuid4().hex[:16]
        spec = await self._spec(task)
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
        ep = _Episode(
            id=episode_id,
            task=task,
            sandbox=sandbox,
            client=client,
            scaffold_task=self._start(current, sandbox, client),
            agent_budget_s=self.agent_timeout_sec or current.agent_timeout_sec,
            current=current,
        )
        ep.timings["sandbox_start_s"] = time.perf_counter() - started
        self._episode = ep
        event = await self._advance(ep)
        if isinstance(event, LLMRequest):
            return restart(event, self._observe(ep))
        failure = None if ep.scaffold_task.cancelled() else ep.scaffold_task.exception()
        await self._abandon()
        if isinstance(failure, SandboxError):  # the infrastructure's (an MCP server...): as is
            raise failure
        detail = error_text(event.error_class, event.message)
        raise EpisodeError(
            f"scaffold {self.scaffold.name!r} ended ({event.reason}) before asking the policy "
            f"anything on task {task.id!r}" + (f": {detail}" if detail else "")
        )

    async def step(self, action: LLMResponse | str) -> TimeStep[LLMRequest]:
        ep = self._episode
        if ep is None or ep.done:
            raise EpisodeError("step() needs a running episode: call reset() first")
        if isinstance(action, str):
            action = LLMResponse(content=action)
        elif not isinstance(action, LLMResponse):
            raise TypeError(f"an action is an LLMResponse (or a str), got {type(action).__name__}")
        ep.policy_s += time.perf_counter() - ep.observed_at
        assert ep.last_request is not None
        ep.turns.append((ep.last_request, action))
        ep.usage = ep.usage + action.usage
        if action.cost_usd is not None:
            ep.cost_usd = (ep.cost_usd or 0.0) + action.cost_usd
        ep.client.respond(action)
        event = await self._advance(ep)
        while isinstance(event, Outcome) and ep.task.steps:  # a step ended: the next one?
            following = await self._next_step(ep, event)
            if following is None:
                break
            event = following
        if isinstance(event, LLMRequest):
            info = self._observe(ep)
            info["shaping_reward"] = self._shape(ep, action, event.metadata, last=False)
            return transition(event, info)
        return await self._finish(ep, event, action)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._abandon()
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

    async def _spec(self, task: Task) -> SandboxSpec:
        """The task's sandbox spec, prepared (off the loop) once per task; a separate
        verifier's too, so that a task whose tests image does not build fails before its agent
        runs."""
        if task.id not in self._specs:
            self._specs[task.id] = await prepare_sandbox_spec(task, self.backend.name)
            if task.verifier_environment is not None:
                verifier_spec = await prepare_verifier_spec(task, self.backend.name)
                self._verifier_specs[task.id] = verifier_spec
        return self._specs[task.id]

    def _start(self, unit: Task, sandbox: Sandbox, client: MediatedClient) -> asyncio.Task[Outcome]:
        """The scaffold on ``unit`` (the task or a step), as its ``[agent] user``."""
        view = agent_sandbox(sandbox, unit.agent_user)
        return asyncio.create_task(self.scaffold.run(unit, view, client))

    async def _next_step(self, ep: _Episode, outcome: Outcome) -> LLMRequest | Outcome | None:
        """After a step's agent ended: verify the step, then start the next one and run it to
        its first request (an error outcome when its set-up failed); None: the episode ends
        (:mod:`palaestra.env.steps`)."""
        if outcome.reason is EndReason.ERROR or (
            outcome.truncated and not self.verify_on_truncation
        ):
            return None
        await collect_episode(ep.current, ep.sandbox, self.artifacts_dir, ep.id)
        result = await self.verifier.verify(ep.current, ep.sandbox)
        ep.step_results.append((ep.current, result))
        index = ep.task.steps.index(ep.current)
        if not result.ok or stops_after(ep.current, result) or index + 1 == len(ep.task.steps):
            return None
        ep.current = ep.task.steps[index + 1]
        try:
            await begin_step(ep.current, ep.sandbox, first=False)
        except Exception as e:
            return Outcome(EndReason.ERROR, len(ep.turns), str(e), exception=e)
        ep.agent_s, ep.agent_budget_s = 0.0, self.agent_timeout_sec or ep.current.agent_timeout_sec
        ep.scaffold_task = self._start(ep.current, ep.sandbox, ep.client)
        return await self._advance(ep)

    async def _verify(self, ep: _Episode) -> VerifierResult:
        """The verifier's result: in the agent's sandbox, in a separate one (Harbor's
        ``environment_mode = "separate"``: :mod:`palaestra.env.separate`), or the steps'
        results combined (verified as each ended)."""
        if ep.task.steps:
            return combine(ep.task, [result for _, result in ep.step_results])
        if ep.task.verifier_environment is None:
            return await self.verifier.verify(ep.task, ep.sandbox)
        spec = self._verifier_specs[ep.task.id]
        spec = replace(spec, labels={**spec.labels, "palaestra.episode_id": ep.id})
        return await verify_separately(ep.task, ep.sandbox, self.backend, spec, self.verifier)

    def _scaffold_mounts(self) -> tuple[Mount, ...]:
        """Host paths the scaffold needs in the sandbox (the external scaffold's proxy socket);
        a scaffold declares them with an optional ``sandbox_mounts()`` method."""
        mounts = getattr(self.scaffold, "sandbox_mounts", None)
        return tuple(mounts()) if callable(mounts) else ()

    def _pick(self, options: dict[str, Any]) -> str:
        """The id of the next episode's task."""
        if "task_id" in options:  # a listed id, or any id an open set resolves
            return self.tasks.check(options["task_id"])  # raises, naming close ids
        at, n = self.tasks.id_at, len(self.tasks)
        if "task_index" in options:
            return at(int(options["task_index"]) % n)
        if self.pick == "random":
            return at(self._rng.randrange(n))
        if self.pick == "cycle":
            index, self._cursor = self._cursor % n, self._cursor + 1
            return at(index)
        return at(self.pick(self._rng, n) % n)

    async def _advance(self, ep: _Episode) -> LLMRequest | Outcome:
        """Run the scaffold until it asks the policy something or ends."""
        getter = asyncio.ensure_future(ep.client.next_request())
        started = time.perf_counter()
        remaining = max(ep.agent_budget_s - ep.agent_s, 0.0)
        try:
            done, _ = await asyncio.wait(
                (getter, ep.scaffold_task),
                timeout=remaining if math.isfinite(remaining) else None,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:  # cancelled: the getter goes with it (the scaffold is abandon()'s)
            if not getter.done():
                getter.cancel()
        now = time.perf_counter()
        ep.agent_s += now - started
        if getter in done:
            ep.observed_at = now
            ep.last_request = getter.result()
            return ep.last_request
        if ep.scaffold_task in done:
            try:
                return ep.scaffold_task.result()
            except Exception as e:  # the scaffold or its sandbox failed: an error episode
                return Outcome(EndReason.ERROR, len(ep.turns), str(e), exception=e)
        ep.scaffold_task.cancel()
        await asyncio.gather(ep.scaffold_task, return_exceptions=True)
        limit = f"agent time limit of {ep.agent_budget_s:g} s reached"
        return Outcome(EndReason.AGENT_TIMEOUT, len(ep.turns), limit)

    async def _finish(
        self, ep: _Episode, outcome: Outcome, action: LLMResponse
    ) -> TimeStep[LLMRequest]:
        ep.done = True
        result: VerifierResult | None = None
        try:
            if not ep.task.steps:  # a step's were collected as it ended
                await collect_episode(ep.task, ep.sandbox, self.artifacts_dir, ep.id)
            if outcome.reason is not EndReason.ERROR and (
                not outcome.truncated or self.verify_on_truncation
            ):
                started = time.perf_counter()
                try:
                    result = await self._verify(ep)
                except Exception as e:  # an infrastructure failure while verifying
                    error = error_text(type(e).__name__, str(e))
                    result = VerifierResult(VerifierStatus.ERROR, error=error)
                ep.timings["verifier_s"] = time.perf_counter() - started
        finally:
            await ep.sandbox.close()
        end = self._end(outcome, result)
        ep.timings["agent_s"] = ep.agent_s
        ep.timings["policy_s"] = ep.policy_s
        info = self._observe(ep)
        info.update(
            end=end,
            shaping_reward=self._shape(ep, action, final_metadata(outcome), last=True),
            category=ep.task.category,
            difficulty=ep.task.difficulty,
            timings=dict(ep.timings),
            usage=ep.usage.model_dump(),
            cost_usd=ep.cost_usd,
            executions=outcome.executions,
            sandbox_adjustments=list(ep.sandbox.adjustments),
        )
        if ep.task.steps:  # each verified step: its name and what its verifier found
            info["steps"] = [{"step": t.step, **r.to_dict()} for t, r in ep.step_results]
        observation = ep.last_request
        if outcome.next_request is not None:  # merge what the client adds to every request
            observation = outcome.next_request.model_copy(
                update={"metadata": {**outcome.next_request.metadata, "env_id": self.env_id}}
            )
        assert observation is not None  # reset() returned a request, or raised
        if outcome.truncated:
            return truncation(end.reward, observation, info)
        return termination(end.reward, observation, info)

    def _end(self, outcome: Outcome, result: VerifierResult | None) -> EpisodeEnd:
        reward = result.reward if result is not None and result.reward is not None else 0.0
        error_class = error_message = cause = None
        if outcome.reason is EndReason.ERROR:
            error_class, error_message = outcome.error_class, outcome.message
            cause = outcome.exception
        elif result is not None and not result.ok:
            error_class, error_message = result.error_class, result.error
        if error_class is not None:
            status = EpisodeStatus.ERROR
        elif reward >= self.pass_threshold:
            status = EpisodeStatus.PASSED
        else:
            status = EpisodeStatus.FAILED
        return EpisodeEnd(
            status=status,
            reason=outcome.reason,
            reward=reward,
            rewards=dict(result.rewards) if result is not None else {},
            verified=result is not None,
            error_class=error_class,
            error_message=error_message,
            infra_error=is_infra_error(cause or error_class),
            verifier=result,
        )

    def _shape(
        self, ep: _Episode, action: LLMResponse, metadata: dict[str, Any], *, last: bool
    ) -> float | None:
        """The shaping hook's value for the action just taken (the episode's ``steps``-th);
        ``metadata`` is that of the request that follows it, whose ``format_errors`` count
        (the turn loop's) says whether the action was a format error."""
        if self.shaping is None:
            return None
        format_error = metadata.get("format_errors", 0) > 0
        return float(self.shaping(TurnInfo(len(ep.turns) - 1, action, format_error, last)))

    @staticmethod
    def _observe(ep: _Episode) -> dict[str, Any]:
        return {"episode_id": ep.id, "task_id": ep.task.id, "step": len(ep.turns)}

    async def _abandon(self) -> None:
        """End the current episode early (if any), freeing its sandbox."""
        ep, self._episode = self._episode, None
        if ep is None:
            return
        if not ep.scaffold_task.done():
            ep.scaffold_task.cancel()
            await asyncio.gather(ep.scaffold_task, return_exceptions=True)
        await ep.sandbox.close()
