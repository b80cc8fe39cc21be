"""A curriculum driven by the stream itself: RolloutStream draws from AdaRFT, runs each group
on real sandboxes and feeds the outcome back, and the target follows the policy's skill."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from palaestra.llm import LLMRequest, LLMResponse
from palaestra.rl import AdaRFT, GroupOutcome, RolloutStream
from palaestra.scaffolds import NopPolicy, OraclePolicy
from palaestra.tasks import generators

FAMILY = "meeting-rooms"
SKILL = 0.45


class SolvesBelow:
    """Solves a generated task (its reference solution) when its difficulty is below ``skill``,
    submits nothing otherwise: a policy whose success depends on difficulty."""

    name = "solves-below"

    def __init__(self, skill: float) -> None:
        self.skill, self.nop, self.oracles = skill, NopPolicy(), {}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        task_id = request.metadata["task_id"]
        family, seed, difficulty = generators.parse_task_id(task_id)
        if difficulty >= self.skill:
            return await self.nop.complete(request)
        if task_id not in self.oracles:
            task = await asyncio.to_thread(generators.load_generated, family, seed, difficulty)
            self.oracles[task_id] = OraclePolicy.from_tasks([task])
        return await self.oracles[task_id].complete(request)


class Recorded(AdaRFT):
    """AdaRFT that notes each outcome the stream feeds it, with the target it moved to."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[tuple[float | None, tuple[float, ...], float]] = []

    def update(self, outcome: GroupOutcome) -> None:
        super().update(outcome)
        self.seen.append((outcome.draw.difficulty, outcome.rewards, self.target))


async def test_adarft_fed_by_the_stream_follows_the_policy(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PALAESTRA_CACHE_DIR", str(tmp_path / "cache"))
    sampler = Recorded([FAMILY], target=0.35, eta=0.1)
    # One group in flight at a time (concurrency == group size): each draw sees the update of
    # the group before it, as in the paper's sequential batches.
    async with RolloutStream(
        f"gen/{FAMILY}", SolvesBelow(SKILL), concurrency=2, sampler=sampler
    ) as stream:
        groups = [group async for group in stream.groups(2, draws=3)]
    seen = sampler.seen
    step = 0.1 * math.tanh(1.0)  # tanh(alpha * (mean reward - beta)) with alpha 2, beta 0.5
    assert [s[:2] for s in seen] == [(0.35, (1.0, 1.0)), (0.43, (1.0, 1.0)), (0.5, (0.0, 0.0))]
    assert [s[2] for s in seen] == pytest.approx([0.35 + step, 0.35 + 2 * step, 0.35 + step])
    assert len(groups) == 3 and stream.stats.errors == 0
