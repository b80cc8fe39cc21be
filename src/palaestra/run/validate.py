"""``validate_proposal``: may a proposed task enter the pool? Every step named in the record.

The steps, in order (the first that fails is the rejection's ``reason``)::

    parse          the answer is a well-formed proposal within the size limits
    forbidden      no network use, no solution reading /tests or the verifier's logs, the
                   tests write a reward (static; the sandbox has no network either)
    novel          not a near-copy of a pool task (Jaccard >= ``duplicate_at``)
    harbor         it is written and loads as a valid Harbor task
    deterministic  two oracle runs agree, two nop runs agree
    reference      the reference solution passes (reward 1)
    nop            doing nothing fails (reward 0)
    not_trivial    the generic wrong solutions fail: empty, echo, delete
    limits         the reference solution finishes within ``max_solve_s``

The sandbox runs are :func:`palaestra.run.check.run_scenario`'s (``palaestra tasks check``'s
machinery), all seven at once. A step after a failed one that needs the sandbox is not run.
"""

from __future__ import annotations

import asyncio
import enum
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palaestra.run.check import ScenarioResult, run_scenario
from palaestra.sandbox import SandboxBackend
from palaestra.tasks import Task, TaskError, load_task
from palaestra.tasks.pool import Pool
from palaestra.tasks.proposal import (
    Proposal,
    ProposalError,
    forbidden,
    parse_proposal,
    write_proposal,
)

#: The scenarios every proposal runs: two oracle runs, two nop runs, the generic wrong ones.
SCENARIOS = ("oracle", "oracle", "nop", "nop", "wrong:empty", "wrong:echo", "wrong:delete")


class Step(enum.StrEnum):
    PARSE = "parse"
    FORBIDDEN = "forbidden"
    NOVEL = "novel"
    HARBOR = "harbor"
    DETERMINISTIC = "deterministic"
    REFERENCE = "reference"
    NOP = "nop"
    NOT_TRIVIAL = "not_trivial"
    LIMITS = "limits"


@dataclass(frozen=True)
class StepResult:
    step: Step
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class Validation:
    """The record of one proposal's validation; ``task`` is the staged task when it loaded."""

    steps: tuple[StepResult, ...]
    proposal: Proposal | None
    task: Task | None
    similarity: float
    nearest: str | None
    duration_s: float

    @property
    def accepted(self) -> bool:
        return all(s.ok for s in self.steps) and len(self.steps) == len(Step)

    @property
    def reason(self) -> str | None:
        """The first failed step's name (None when accepted)."""
        return next((str(s.step) for s in self.steps if not s.ok), None)

    @property
    def detail(self) -> str:
        return next((s.detail for s in self.steps if not s.ok), "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "reason": self.reason,
            "steps": [{"step": str(s.step), "ok": s.ok, "detail": s.detail} for s in self.steps],
            "similarity": self.similarity,
            "nearest": self.nearest,
            "duration_s": self.duration_s,
        }


def _scenario_steps(runs: list[ScenarioResult], max_solve_s: float) -> list[StepResult]:
    def seen(r: ScenarioResult) -> str:
        return f"{r.scenario}: " + (
            f"reward {r.reward:g}" if r.status == "ok" else f"error {r.detail[:300]}"
        )

    oracle, nop, wrong = runs[0:2], runs[2:4], runs[4:]
    slowest = max(r.duration_s for r in oracle)
    agree = all((a.status, a.rewards) == (b.status, b.rewards) for a, b in (oracle, nop))
    return [
        StepResult(
            Step.DETERMINISTIC,
            agree,
            "" if agree else "two runs disagree: " + "; ".join(map(seen, oracle + nop)),
        ),
        StepResult(
            Step.REFERENCE,
            all(r.ok for r in oracle),
            "; ".join(seen(r) for r in oracle if not r.ok),
        ),
        StepResult(Step.NOP, all(r.ok for r in nop), "; ".join(seen(r) for r in nop if not r.ok)),
        StepResult(
            Step.NOT_TRIVIAL,
            all(r.ok for r in wrong),
            "; ".join(seen(r) + " (must be 0)" for r in wrong if not r.ok),
        ),
        StepResult(
            Step.LIMITS,
            slowest <= max_solve_s,
            ""
            if slowest <= max_solve_s
            else f"the reference took {slowest:.1f}s, over {max_solve_s:g}s",
        ),
    ]


async def validate_proposal(
    text: str,
    staging: Path,
    backend: SandboxBackend,
    *,
    pool: Pool | None = None,
    duplicate_at: float = 0.9,
    max_solve_s: float = 60.0,
) -> Validation:
    """Validate the proposal in a policy's answer ``text``; the task is written to ``staging``
    (a directory that must not exist yet) and stays there for the caller to keep or remove."""
    started = time.perf_counter()
    steps: list[StepResult] = []
    similarity, nearest = 0.0, None

    def done(proposal: Proposal | None = None, task: Task | None = None) -> Validation:
        return Validation(
            tuple(steps), proposal, task, similarity, nearest, time.perf_counter() - started
        )

    try:
        proposal = parse_proposal(text)
    except ProposalError as e:
        steps.append(StepResult(Step.PARSE, False, str(e)))
        return done()
    steps.append(StepResult(Step.PARSE, True))
    refused = forbidden(proposal)
    steps.append(StepResult(Step.FORBIDDEN, not refused, "; ".join(refused)))
    if refused:
        return done(proposal)
    if pool is not None:
        similarity, nearest = await asyncio.to_thread(pool.nearest, proposal)
    novel = similarity < duplicate_at
    steps.append(
        StepResult(
            Step.NOVEL, novel, "" if novel else f"{similarity:.2f} similar to pool task {nearest}"
        )
    )
    if not novel:
        return done(proposal)
    try:
        task = await asyncio.to_thread(lambda: load_task(write_proposal(proposal, staging)))
    except (TaskError, OSError) as e:  # OSError: paths that clash ("a" and "a/b")
        steps.append(StepResult(Step.HARBOR, False, str(e)))
        return done(proposal)
    steps.append(StepResult(Step.HARBOR, True))
    runs = await asyncio.gather(*(run_scenario(task, s, backend) for s in SCENARIOS))
    steps += _scenario_steps(list(runs), max_solve_s)
    return done(proposal, task)
