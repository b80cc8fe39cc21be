"""Self-play: a creator policy writes tasks, a solver policy calibrates them, a pool keeps them.

::

    play = SelfPlay("pool/", solver, attempts=4)
    async for episode in play.stream(creator, seeds, draws=32):   # a RolloutStream of proposals
        print(episode.reward, episode.info["judgment"].info)

Each creator episode (:class:`~palaestra.env.creator.CreatorEnv`) ends with :meth:`judge`:

1. validation (:func:`palaestra.run.validate.validate_proposal`): a rejected proposal is kept
   under the pool's ``.rejected/`` with its reason, and rewards the creator 0;
2. an accepted task enters the pool with its provenance (creator, policy version, parent,
   the validation record, the similarity to its nearest pool task);
3. calibration: the solver attempts it ``attempts`` times (one GRPO-style group of a
   :class:`~palaestra.rl.stream.RolloutStream`); the solve rate ``p`` is appended to the task's
   history (its difficulty is ``1 - p``);
4. the creator's reward: :func:`learnability` ``1 - 2|p - 0.5|`` minus
   :func:`repetition_penalty` of the similarity (clipped at 0).

:func:`failed_tasks` reads a run's store for the tasks the solver failed; :meth:`SelfPlay.stream`
with ``mode="variant"`` asks for easier, related variants of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from palaestra.env.code_env import CodeEnv
from palaestra.env.creator import CreatorContext, CreatorEnv, Judgment
from palaestra.env.types import EpisodeStatus
from palaestra.llm.client import LLMClient
from palaestra.llm.versions import current_version
from palaestra.rl.stream import RolloutStream
from palaestra.run.rollout import Episode
from palaestra.run.store import read_episodes
from palaestra.run.validate import Validation, validate_proposal
from palaestra.sandbox import SandboxBackend, default_backend
from palaestra.scaffolds import Scaffold
from palaestra.tasks import Task
from palaestra.tasks.pool import Pool
from palaestra.tasks.source import TaskSet

#: The version of the creator's protocol (prompt, format, reward) stored in each provenance.
CREATOR_VERSION = "creator-1"


def learnability(p: float) -> float:
    """``1 - 2|p - 0.5|``: 1 at a solve rate of one half, 0 at 0 and at 1."""
    return 1.0 - 2.0 * abs(p - 0.5)


def repetition_penalty(similarity: float, *, start: float = 0.5) -> float:
    """The penalty for a task this similar (Jaccard) to its nearest pool task: 0 below
    ``start``, then the similarity itself (a near-copy loses about all its reward)."""
    return similarity if similarity >= start else 0.0


def failed_tasks(run_dir: Path | str) -> list[str]:
    """The ids of the tasks a run's solver failed (final tries only, errors excluded)."""
    rows = read_episodes(run_dir)
    return sorted({r["task_id"] for r in rows if r["status"] == EpisodeStatus.FAILED})


class SelfPlay:
    """The creator's judge and the loop around it; see the module docstring.

    ``pool``: the pool directory (or a :class:`Pool`). ``solver``: the policy that calibrates
    accepted tasks, ``attempts`` times each, ``scaffold`` its scaffold (a name, or one built
    with limits, e.g. ``make_scaffold("bash", step_limit=5)``). ``duplicate_at``: the
    similarity at which validation refuses a proposal as a copy.
    """

    def __init__(
        self,
        pool: Pool | Path | str,
        solver: LLMClient,
        *,
        attempts: int = 4,
        scaffold: str | Scaffold = "bash",
        sandbox: str | SandboxBackend = "local",
        duplicate_at: float = 0.9,
        max_solve_s: float = 60.0,
        creator_version: str = CREATOR_VERSION,
    ) -> None:
        if attempts < 1:
            raise ValueError(f"attempts={attempts}: the solver needs at least one attempt")
        self.pool = pool if isinstance(pool, Pool) else Pool(pool)
        self.solver = solver
        self.attempts = attempts
        self.scaffold = scaffold
        self.backend = sandbox if isinstance(sandbox, SandboxBackend) else default_backend(sandbox)
        self.duplicate_at = duplicate_at
        self.max_solve_s = max_solve_s
        self.creator_version = creator_version
        self._creator: LLMClient | None = None
        self._lock = asyncio.Lock()

    async def solve_rate(self, task: Task) -> float | None:
        """The solver's solve rate on ``task`` over ``attempts`` tries (None: every try of the
        group errored out, so the task stays unmeasured)."""
        stream = RolloutStream(
            lambda: CodeEnv(
                TaskSet([task], name=task.id), sandbox=self.backend, scaffold=self.scaffold
            ),
            self.solver,
            concurrency=self.attempts,
        )
        async with stream:
            async for group in stream.groups(self.attempts, draws=1):
                return group.outcome.solve_rate
        return None

    def _provenance(self, context: CreatorContext, validation: Validation) -> dict[str, Any]:
        creator = self._creator
        return {
            "creator": self.creator_version,
            "creator_policy": None
            if creator is None
            else getattr(creator, "name", type(creator).__name__),
            "policy_version": current_version(creator) if creator is not None else None,
            "solver_policy_version": current_version(self.solver),
            "parent": context.parent,
            "env_id": context.env_id,
            "validation": validation.to_dict(),
            "similarity": validation.similarity,
            "nearest": validation.nearest,
        }

    async def judge(self, text: str, context: CreatorContext) -> Judgment:
        """Validate, admit, calibrate and reward one proposal."""
        staging = (await asyncio.to_thread(self.pool.staging_dir)) / "task"
        try:
            validation = await validate_proposal(
                text,
                staging,
                self.backend,
                pool=self.pool,
                duplicate_at=self.duplicate_at,
                max_solve_s=self.max_solve_s,
            )
            if not validation.accepted:
                await asyncio.to_thread(
                    self.pool.reject,
                    text,
                    str(validation.reason),
                    {
                        "detail": validation.detail,
                        "parent": context.parent,
                        "validation": validation.to_dict(),
                    },
                )
                return Judgment(0.0, False, {"validation": validation.to_dict()})
            assert validation.proposal is not None
            async with self._lock:
                task = await asyncio.to_thread(
                    self.pool.add,
                    staging,
                    validation.proposal,
                    self._provenance(context, validation),
                )
        finally:
            await asyncio.to_thread(self.pool.discard, staging.parent)
        rate = await self.solve_rate(task)
        info = {
            "validation": validation.to_dict(),
            "task_id": task.id,
            "solve_rate": rate,
            "similarity": validation.similarity,
        }
        if rate is None:
            return Judgment(0.0, True, info)
        await asyncio.to_thread(self.pool.record_solve_rate, task.id, rate)
        reward = max(0.0, learnability(rate) - repetition_penalty(validation.similarity))
        return Judgment(reward, True, info)

    def creator_env(
        self, seeds: TaskSet | Sequence[Task], *, mode: str = "new", env_id: str | None = None
    ) -> CreatorEnv:
        """A creator environment judged by this self-play."""
        return CreatorEnv(seeds, judge=self.judge, mode=mode, env_id=env_id)

    async def stream(
        self,
        creator: LLMClient,
        seeds: TaskSet | Sequence[Task],
        *,
        draws: int,
        mode: str = "new",
        concurrency: int = 2,
        out_dir: Path | str | None = None,
    ) -> AsyncIterator[Episode]:
        """``draws`` creator episodes through a :class:`RolloutStream`, as they finish; each
        one's judgment (``episode.info["judgment"]``) has already calibrated its task."""
        self._creator = creator
        stream = RolloutStream(
            lambda: self.creator_env(seeds, mode=mode),
            creator,
            concurrency=concurrency,
            out_dir=out_dir,
        )
        async with stream:
            async for episode in stream.episodes(draws=draws):
                yield episode
