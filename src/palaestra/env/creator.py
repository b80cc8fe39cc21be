"""``CreatorEnv``: the creator's side of self-play, as an environment of one turn.

``make("creator:<seed source>")`` builds one. ``reset`` returns an observation asking the
policy for a new task in the proposal format (:mod:`palaestra.tasks.proposal`, documented in
docs/self-play.md), with example tasks from the seed source; ``reset(options=...)`` may name a
``category``, a ``target`` solve rate, or a ``parent`` task id of the seed source (a task the
solver failed: the policy is asked for an easier, related variant). In ``mode="variant"``
every reset takes a parent from the seed source (by the seed) unless the options name one.

``step(proposal)`` ends the episode (LAST, terminated). Its reward is the *judge*'s: an async
function ``(text, CreatorContext) -> Judgment``. Self-play passes one that validates,
calibrates and rewards learnability (:class:`palaestra.rl.self_play.SelfPlay`); the default,
:func:`parse_judge`, rewards a proposal that parses, passes the static checks and loads as a
Harbor task (1.0) over one that does not (0.0), without running anything.
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from palaestra.env.end import EpisodeEnd
from palaestra.env.types import (
    Environment,
    EpisodeError,
    EpisodeStatus,
    TimeStep,
    restart,
    termination,
)
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.scaffolds.base import EndReason
from palaestra.tasks import Task, TaskError, load_task
from palaestra.tasks.proposal import (
    ProposalError,
    forbidden,
    parse_proposal,
    proposal_of,
    write_proposal,
)
from palaestra.tasks.source import TaskSet

SYSTEM_PROMPT = """\
You write programming tasks for another agent to solve in a Linux sandbox (Debian, bash,
python3, coreutils; no network). Answer with ONE ```json block holding one object:
{"id": "short-slug", "instruction": "...", "files": {"path": "content"},
 "tests": {"test.sh": "#!/bin/bash ..."}, "solution": "#!/bin/bash ...",
 "outputs": ["path"], "metadata": {"category": "...", "difficulty": "easy|medium|hard"}}
- files: the workspace, copied to /app (relative paths). outputs: files under /app the
  solution writes.
- tests/test.sh runs after the solver, with the other test files in /tests; it must write 1
  (pass) or 0 (fail) to /logs/verifier/reward.txt, or a JSON object to reward.json.
- solution: a bash script that solves the task from /app and the instruction alone.
- The tests must pass on the solution, fail when nothing is done, fail on empty outputs, on
  outputs that echo the input and when /app is deleted, and give the same result every run.
- No network, no reading /tests or /logs from the solution.
- The tests may read what the solver wrote, but run its code (anything under /app) only
  through /tests/palaestra_check.py (shipped): a Python test started with
  `python3 -E -s -S -B /tests/palaestra_launch.py /tests/test_x.py` calling
  `run_command(argv, cwd="/app")` or `run_python(code, value)`.
A task is worth most when the solver solves it about half of the time."""


@dataclass(frozen=True)
class CreatorContext:
    """What the creator was asked: the judge's second argument (and its provenance)."""

    env_id: str | None
    parent: str | None = None
    category: str | None = None
    target: float | None = None
    episode_id: str = ""


@dataclass(frozen=True)
class Judgment:
    """The judge's verdict: the creator's reward, whether the task was accepted, and what to
    put in LAST's ``info["judgment"]`` (the validation record, the solve rate...)."""

    reward: float
    accepted: bool
    info: dict[str, Any] = field(default_factory=dict)


Judge = Callable[[str, CreatorContext], Awaitable[Judgment]]


def _loads(text: str) -> list[str]:
    """Problems of a proposal that parses: static refusals, else the Harbor loader's."""
    proposal = parse_proposal(text)
    if refused := forbidden(proposal):
        return refused
    with tempfile.TemporaryDirectory(prefix="palaestra-proposal-") as tmp:
        try:
            load_task(write_proposal(proposal, Path(tmp) / "task"))
        except TaskError as e:
            return [str(e)]
    return []


async def parse_judge(text: str, context: CreatorContext) -> Judgment:
    """The default judge: 1.0 for a proposal that parses, passes the static checks and loads
    as a Harbor task; 0.0 with the reason otherwise. Runs nothing in a sandbox."""
    try:
        problems = await asyncio.to_thread(_loads, text)
    except ProposalError as e:
        problems = [str(e)]
    if problems:
        return Judgment(0.0, False, {"reason": "; ".join(problems)})
    return Judgment(1.0, True)


def _example(task: Task) -> str:
    return "```json\n" + json.dumps(proposal_of(task).to_json(), indent=1) + "\n```"


class CreatorEnv(Environment[LLMRequest, LLMResponse]):
    """One proposal per episode; see the module docstring. ``seeds``: the seed tasks (examples
    and parents); ``examples``: how many appear in each observation."""

    def __init__(
        self,
        seeds: TaskSet | Sequence[Task] = (),
        *,
        judge: Judge = parse_judge,
        examples: int = 1,
        mode: str = "new",
        env_id: str | None = None,
    ) -> None:
        if mode not in ("new", "variant"):
            raise ValueError(f"mode={mode!r}: choose 'new' or 'variant'")
        if mode == "variant" and not len(seeds):
            raise ValueError("mode='variant' needs seed tasks to make variants of")
        self.seeds = seeds if isinstance(seeds, TaskSet) else TaskSet(seeds, name="seeds")
        self.judge = judge
        self.examples = examples
        self.mode = mode
        self.env_id = env_id
        self._context: CreatorContext | None = None
        self._request: LLMRequest | None = None

    def _prompt(self, rng: random.Random, context: CreatorContext) -> str:
        lines = []
        if context.parent is not None:
            parent = self.seeds.get(context.parent)
            lines += [
                "The solver FAILED this task. Write an easier task that teaches the same "
                "skill (a related variant, not a copy):",
                _example(parent),
            ]
        else:
            lines.append("Write a new task.")
            picks = rng.sample(range(len(self.seeds)), min(self.examples, len(self.seeds)))
            lines += ["An example of the format:\n" + _example(self.seeds[i]) for i in picks]
        if context.category:
            lines.append(f"Category: {context.category}.")
        if context.target is not None:
            lines.append(f"Aim for a task the solver solves {context.target:.0%} of the time.")
        return "\n\n".join(lines)

    async def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> TimeStep[LLMRequest]:
        options = options or {}
        rng = random.Random(seed)
        parent = options.get("parent") or options.get("task_id")
        if parent is None and self.mode == "variant":
            parent = self.seeds.id_at(rng.randrange(len(self.seeds)))
        if parent is not None:
            self.seeds.check(parent)
        context = CreatorContext(
            self.env_id, parent, options.get("category"), options.get("target"), uuid.uuid4().hex
        )
        prompt = await asyncio.to_thread(self._prompt, rng, context)
        task_id = parent or "creator"
        self._context = context
        self._request = LLMRequest(
            messages=[
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": prompt},
            ],
            metadata={"env": self.env_id, "task_id": task_id, "turn": 0, "scaffold": "creator"},
        )
        return restart(
            self._request, {"episode_id": context.episode_id, "task_id": task_id, "step": 0}
        )

    async def step(self, action: LLMResponse) -> TimeStep[LLMRequest]:
        context, request = self._context, self._request
        if context is None or request is None:
            raise EpisodeError("step() before reset() or after LAST: call reset()")
        self._context = None
        judgment = await self.judge(action.content or "", context)
        status = EpisodeStatus.PASSED if judgment.accepted else EpisodeStatus.FAILED
        end = EpisodeEnd(
            status, EndReason.SUBMITTED, judgment.reward, {"reward": judgment.reward}, verified=True
        )
        return termination(
            judgment.reward,
            request,
            {
                "episode_id": context.episode_id,
                "task_id": request.metadata["task_id"],
                "step": 1,
                "end": end,
                "judgment": judgment,
                "category": context.category,
                "shaping_reward": None,
            },
        )

    async def abandon(self) -> None:
        self._context = None
