"""Staleness bounded at the update: a stream drops what would be trained too many versions
after its first turn (judged when it is handed over, not only when it finishes), holds back
draws that would be (admission control), and counts both; the trainer's loop keeps
``lag <= max_staleness`` on every step with a slow trainer and a fast stream.

The environment is a one-turn stand-in below the stream's layer; the versioned policy is
palaestra's own ``VersionedPolicy`` around an instant answer."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from palaestra.env.end import EpisodeEnd
from palaestra.env.types import Environment, EpisodeStatus, TimeStep, restart, termination
from palaestra.llm import LLMRequest, LLMResponse
from palaestra.llm.local_hf import HFLocalPolicy, write_tiny_model
from palaestra.llm.versions import VersionedPolicy
from palaestra.rl.admission import StalenessGate, lag
from palaestra.rl.stream import RolloutStream
from palaestra.rl.trainer import GRPOConfig, GRPOTrainer, train
from palaestra.scaffolds.base import EndReason
from tests.rl.test_stream import until
from tests.rl.test_trainer import EvenFirstToken

REQUEST = LLMRequest(messages=[{"role": "user", "content": "go"}], metadata={"task_id": "t"})


class OneTurn(Environment[LLMRequest, LLMResponse]):
    """Reset, one action, reward 1 (after ``delay`` seconds)."""

    delay = 0.0

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        return restart(REQUEST, {"task_id": "t"})

    async def step(self, action: LLMResponse) -> TimeStep[LLMRequest]:
        await asyncio.sleep(self.delay)
        end = EpisodeEnd(EpisodeStatus.PASSED, EndReason.SUBMITTED, reward=1.0, verified=True)
        return termination(1.0, REQUEST, {"task_id": "t", "end": end})


class Instant:
    async def complete(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(content="ok")


def test_the_gate_counts_the_updates_before_a_draw_is_taken():
    gate = StalenessGate(max_staleness=1, update_every=2)
    # 2 taken (a batch), the consumer training on it: its update is pending
    assert gate.updates_before_taken(2, 0, consumer_waiting=False) == 1
    assert gate.updates_before_taken(2, 0, consumer_waiting=True) == 0
    assert gate.updates_before_taken(3, 1, consumer_waiting=False) == 1  # lands in batch 2
    assert gate.admits(taken=2, outstanding=1, consumer_waiting=False)  # batch 1 + pending
    assert not gate.admits(taken=2, outstanding=2, consumer_waiting=False)  # batch 2: lag 2
    assert StalenessGate(max_staleness=1).admits(taken=2, outstanding=99, consumer_waiting=False)
    assert gate.stale_count([3, 4, None], current=5) == 1 and lag([3, 4, None], 5) == 2
    assert lag([None], 5) is None and gate.stale_count([0], current=None) == 0
    with pytest.raises(ValueError, match="update_every=0 must be >= 1"):
        StalenessGate(update_every=0)


@pytest.mark.parametrize("stale", ["drop", "keep"])
async def test_items_that_went_stale_in_the_buffer_are_judged_when_handed_over(stale):
    """Four episodes finish at version 0 and wait in the buffer; the consumer takes one, then
    the policy moves two versions. Judged when they finished they were fresh; handed over now
    they would train weights two versions newer than their first turn."""
    policy = VersionedPolicy(Instant())
    stream = RolloutStream(OneTurn, policy, concurrency=4, buffer=4, max_staleness=1, stale=stale)
    taken: list[tuple[int, Any]] = []
    async with stream:
        async for episode in stream.episodes(draws=4):
            taken.append((policy.policy_version, episode))
            if len(taken) == 1:
                await until(lambda: stream.stats.buffered == 3)  # finished at version 0
                assert stream.stats.stale == 0
                policy.bump()
                policy.bump()
    lags = [version - e.turns[0].action.policy_version for version, e in taken]
    if stale == "drop":
        assert lags == [0] and stream.stats.dropped_stale == 3 and stream.stats.stale == 3
    else:
        assert lags == [0, 2, 2, 2] and stream.stats.dropped_stale == 0
        assert stream.stats.stale == 3


async def test_admission_holds_back_draws_so_nothing_is_dropped():
    """max_staleness 0, one update per item taken: each draw waits until the consumer's
    update is done, so every item is trained by the weights that sampled it."""
    policy = VersionedPolicy(Instant())
    stream = RolloutStream(
        OneTurn, policy, concurrency=8, max_staleness=0, update_every=1, buffer=8
    )
    lags = []
    async with stream:
        async for episode in stream.episodes(draws=6):
            lags.append(policy.policy_version - episode.turns[0].action.policy_version)
            await asyncio.sleep(0.02)  # the update takes a while; nothing starts meanwhile
            policy.bump()
    assert lags == [0] * 6
    assert stream.stats.dropped_stale == 0 and stream.stats.admission_waits >= 5
    assert stream.stats.max_in_flight == 1


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("staleness") / "tiny")


class SlowTrainer(GRPOTrainer):
    """The real trainer, 0.3 s slower per step: the stream outruns it."""

    def step(self, groups):
        time.sleep(0.3)
        return super().step(groups)


@pytest.mark.slow
@pytest.mark.parametrize("max_staleness", [0, 1])
async def test_a_slow_trainer_never_trains_beyond_max_staleness(tiny, max_staleness):
    async with HFLocalPolicy(tiny, seed=4, max_batch_size=32) as policy:
        trainer = SlowTrainer(policy, GRPOConfig(lr=1e-2))
        history = await train(
            trainer,
            EvenFirstToken,
            steps=6,
            group_size=4,
            groups_per_step=1,
            mode="async",
            max_staleness=max_staleness,
            concurrency=32,  # eight groups could run while one trains
        )
    updates = [s for s in history if s.updated]
    assert len(updates) >= 3, [s.samples for s in history]
    assert all(s.lag <= max_staleness for s in history), [s.lag for s in history]
    final = history[-1].stream
    assert final is not None and final.admission_waits > 0  # the bound held draws back
