"""GRPO, Dr. GRPO and RLOO against numbers worked out by hand, and their per-token spreading."""

from __future__ import annotations

import math

import pytest

from palaestra.env import EpisodeEnd, EpisodeStatus
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.rl.advantages import advantages, dr_grpo, group_advantages, grpo, rloo
from palaestra.rl.trajectory import to_trajectories, to_trajectory
from palaestra.run.rollout import Episode, Turn
from palaestra.scaffolds.base import EndReason

# rewards 1, 0, 0, 1, 1: mean 0.6; squared deviations 0.16, 0.36, 0.36, 0.16, 0.16 sum 1.2;
# sample variance 1.2 / 4 = 0.3, std sqrt(0.3) = 0.5477225575...
REWARDS = [1.0, 0.0, 0.0, 1.0, 1.0]
STD = math.sqrt(0.3)


def test_grpo_by_hand():
    got = grpo(REWARDS, eps=0.0)
    assert got == pytest.approx([0.4 / STD, -0.6 / STD, -0.6 / STD, 0.4 / STD, 0.4 / STD])
    assert got[0] == pytest.approx(0.7302967433)
    # eps sits in the denominator: (r - mean) / (std + eps)
    assert grpo([2.0, 0.0], eps=0.5)[0] == pytest.approx(1.0 / (math.sqrt(2.0) + 0.5))


def test_dr_grpo_by_hand():
    assert dr_grpo(REWARDS) == pytest.approx([0.4, -0.6, -0.6, 0.4, 0.4])
    assert dr_grpo([3.0, 1.0]) == [1.0, -1.0]


def test_rloo_by_hand():
    # attempt 0: 1 - mean(0, 0, 1, 1) = 0.5; attempt 1: 0 - mean(1, 0, 1, 1) = -0.75
    assert rloo(REWARDS) == pytest.approx([0.5, -0.75, -0.75, 0.5, 0.5])
    assert rloo([3.0, 1.0]) == [2.0, -2.0]


@pytest.mark.parametrize("method", ["grpo", "dr_grpo", "rloo"])
def test_one_attempt_or_equal_rewards_give_zero_not_nan(method):
    assert advantages([0.7], method) == [0.0]
    assert advantages([1.0, 1.0, 1.0], method) == [0.0, 0.0, 0.0]
    assert advantages([0.0] * 8, method) == [0.0] * 8


def test_bad_rewards_and_methods_are_named():
    with pytest.raises(ValueError, match="at least one reward"):
        grpo([])
    with pytest.raises(ValueError, match="reward nan of attempt 1 is not finite"):
        rloo([1.0, float("nan")])
    with pytest.raises(ValueError, match="unknown advantage estimator 'ppo'"):
        advantages([1.0], "ppo")  # type: ignore[arg-type]


def _episode(reward: float, *turns: tuple[list[int], list[int]]) -> Episode:
    return Episode(
        turns=[
            Turn(
                LLMRequest(messages=[{"role": "user", "content": "x"}]),
                LLMResponse(content="y", prompt_token_ids=p, completion_token_ids=c),
            )
            for p, c in turns
        ],
        end=EpisodeEnd(EpisodeStatus.PASSED, EndReason.SUBMITTED, reward=reward),
        terminated=True,
    )


def test_group_advantages_sit_on_the_mask_and_split_episodes_count_once():
    # Attempt 0 is split at a break into two samples; it still counts as one reward.
    split = to_trajectories(_episode(1.0, ([1, 2], [3]), ([1, 9, 3, 4], [5, 6])))
    assert len(split) == 2
    plain = to_trajectory(_episode(0.0, ([1, 2], [7, 8])))
    rows = group_advantages([split, plain], "dr_grpo")
    assert rows == [
        [0.0, 0.0, 0.5],  # sample 0 of attempt 0: 1 - mean(1, 0)
        [0.0, 0.0, 0.0, 0.0, 0.5, 0.5],  # sample 1 of attempt 0
        [0.0, 0.0, -0.5, -0.5],  # attempt 1
    ]
    grpo_rows = group_advantages([split, plain], "grpo", eps=0.0)
    assert grpo_rows[2] == pytest.approx([0.0, 0.0, -0.5 / math.sqrt(0.5), -0.5 / math.sqrt(0.5)])
    assert group_advantages([plain], "rloo") == [[0.0] * 4]
