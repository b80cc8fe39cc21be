"""Trajectory bookkeeping on episodes whose turns carry hand-written token ids: the rules
(concatenation, masks, logprobs, spans, versions, breaks, errors, collation) one at a time.
The same rules on real SmolLM2 tokens and real sandboxes: ``test_trajectory_tokens.py``."""

from __future__ import annotations

import pytest

from palaestra.env import EpisodeEnd, EpisodeStatus
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.rl.trajectory import (
    Break,
    TrajectoryError,
    collate,
    to_trajectories,
    to_trajectory,
)
from palaestra.run.rollout import Episode, Turn
from palaestra.scaffolds.base import EndReason


def turn(prompt, completion, logprobs=None, version=None, episode="ep1") -> Turn:
    return Turn(
        LLMRequest(messages=[{"role": "user", "content": "x"}], metadata={"episode_id": episode}),
        LLMResponse(
            content="y",
            prompt_token_ids=prompt,
            completion_token_ids=completion,
            logprobs=logprobs,
            policy_version=version,
        ),
    )


def episode(*turns: Turn, reward: float = 1.0) -> Episode:
    return Episode(
        turns=list(turns),
        end=EpisodeEnd(
            EpisodeStatus.PASSED, EndReason.SUBMITTED, reward=reward, rewards={"reward": reward}
        ),
        terminated=True,
        task_id="t1",
    )


# Three turns; each prompt extends the previous prompt + completion with new tokens.
P0, C0 = [1, 2, 3], [10, 11]
P1, C1 = [*P0, *C0, 4, 5], [12]
P2, C2 = [*P1, *C1, 6], [13, 14, 15]
L0, L1, L2 = [-0.5, -0.25], [-1.0], [-0.1, -0.2, -0.3]


def test_turns_concatenate_into_one_masked_sequence():
    ep = episode(turn(P0, C0, L0, 3), turn(P1, C1, L1, 3), turn(P2, C2, L2, 4), reward=0.5)
    traj = to_trajectory(ep)
    assert traj.token_ids == [*P2, *C2] == [1, 2, 3, 10, 11, 4, 5, 12, 6, 13, 14, 15]
    assert traj.loss_mask == [0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1]
    assert traj.logprobs == [0.0, 0.0, 0.0, -0.5, -0.25, 0.0, 0.0, -1.0, 0.0, -0.1, -0.2, -0.3]
    assert [(s.turn, s.prompt_start, s.completion_start, s.completion_end) for s in traj.spans] == [
        (0, 0, 3, 5),
        (1, 5, 7, 8),
        (2, 8, 9, 12),
    ]
    assert traj.versions == [3, 3, 4]
    assert traj.token_versions() == [-1, -1, -1, 3, 3, -1, -1, 3, -1, 4, 4, 4]
    assert traj.prompt_length == 3 and traj.completion_tokens == 6 == sum(traj.loss_mask)
    assert (traj.reward, traj.rewards, traj.task_id, traj.status) == (
        0.5,
        {"reward": 0.5},
        "t1",
        "passed",
    )
    assert traj.episode_id == "ep1" and traj.sample == 0


def test_no_logprobs_anywhere_gives_none_and_unknown_versions():
    traj = to_trajectory(episode(turn(P0, C0), turn(P1, C1)))
    assert traj.logprobs is None and traj.versions == [None, None]
    assert traj.token_versions(unknown=-7) == [-7] * len(traj.token_ids)


def test_a_prompt_equal_to_the_sequence_so_far_adds_no_prompt_tokens():
    traj = to_trajectory(episode(turn(P0, C0), turn([*P0, *C0], [20])))
    assert traj.spans[1].prompt_start == traj.spans[1].completion_start == 5
    assert traj.loss_mask == [0, 0, 0, 1, 1, 1]


def test_missing_ids_name_the_turn_and_the_option():
    with pytest.raises(
        TrajectoryError,
        match=r"turn 1 of episode ep1 has no completion_token_ids.*return_token_ids=True",
    ):
        to_trajectories(episode(turn(P0, C0), turn(P1, None)))
    with pytest.raises(TrajectoryError, match="turn 0 .* no prompt_token_ids and no completion"):
        to_trajectories(episode(turn(None, None)))


def test_logprobs_must_cover_every_turn_and_token():
    with pytest.raises(TrajectoryError, match=r"turn 1 .* no logprobs .*logprobs=True"):
        to_trajectories(episode(turn(P0, C0, L0), turn(P1, C1)))
    with pytest.raises(TrajectoryError, match="turn 0 .* 1 logprobs for 2 completion tokens"):
        to_trajectories(episode(turn(P0, C0, [-1.0])))


# Turn 1's prompt re-renders turn 0's completion (11 became 99): a break at position 4.
B1 = [1, 2, 3, 10, 99, 4, 5]
B2 = [*B1, 12, 6]


def test_a_break_splits_into_self_consistent_samples_and_is_counted():
    ep = episode(turn(P0, C0, L0, 1), turn(B1, C1, L1, 1), turn(B2, C2, L2, 2), reward=0.25)
    result = to_trajectories(ep, on_break="split")
    assert result.breaks == [Break(turn=1, position=4, expected=11, found=99)]
    first, second = result.samples
    assert (first.token_ids, first.loss_mask, first.sample) == ([*P0, *C0], [0, 0, 0, 1, 1], 0)
    # The new sample starts from turn 1's whole prompt, and turn 2 extends it.
    assert second.token_ids == [*B2, *C2] and second.sample == 1
    assert second.loss_mask == [0] * 7 + [1] + [0] + [1, 1, 1]
    assert second.logprobs == [0.0] * 7 + [-1.0, 0.0, -0.1, -0.2, -0.3]
    assert [s.turn for s in second.spans] == [1, 2] and second.spans[0].prompt_start == 0
    assert second.versions == [1, 2]
    assert all(s.reward == 0.25 and s.episode_id == "ep1" for s in result) and len(result) == 2


def test_error_mode_names_the_turn_and_position():
    ep = episode(turn(P0, C0), turn(B1, C1))
    with pytest.raises(
        TrajectoryError, match=r"turn 1 of episode ep1: .*position 4 \(expected token 11, got 99\)"
    ):
        to_trajectories(ep, on_break="error")
    with pytest.raises(TrajectoryError, match="position 4"):
        to_trajectory(ep)


def test_a_prompt_shorter_than_the_sequence_is_a_break():
    result = to_trajectories(episode(turn(P0, C0), turn([1, 2, 3, 10], [7])))
    assert result.breaks == [Break(turn=1, position=4, expected=11, found=None)]
    assert [s.token_ids for s in result] == [[1, 2, 3, 10, 11], [1, 2, 3, 10, 7]]


def test_bad_mode_and_empty_episode():
    with pytest.raises(ValueError, match="on_break='drop' must be 'split' or 'error'"):
        to_trajectories(episode(turn(P0, C0)), on_break="drop")  # type: ignore[arg-type]
    empty = to_trajectories(episode(reward=0.0))
    assert (empty.samples, empty.breaks, empty.reward) == ([], [], 0.0)
    with pytest.raises(TrajectoryError, match="no turns"):
        to_trajectory(episode())


def test_collate_right_pads_with_masks():
    a = to_trajectory(episode(turn(P0, C0, L0)))
    b = to_trajectory(episode(turn(P0, C0, L0), turn(P1, C1, L1)))
    batch = collate([a, b], pad_id=0, advantages=[[0.0, 0.0, 0.0, 2.0, 2.0], [1.0] * 8])
    assert batch.lengths == [5, 8]
    assert batch.input_ids == [[1, 2, 3, 10, 11, 0, 0, 0], b.token_ids]
    assert batch.attention_mask == [[1] * 5 + [0] * 3, [1] * 8]
    assert batch.loss_mask == [[0, 0, 0, 1, 1, 0, 0, 0], b.loss_mask]
    assert batch.logprobs == [[0.0, 0.0, 0.0, -0.5, -0.25, 0.0, 0.0, 0.0], b.logprobs]
    assert batch.advantages == [[0.0, 0.0, 0.0, 2.0, 2.0, 0.0, 0.0, 0.0], [1.0] * 8]
    wide = collate([a], pad_id=-1, pad_to_multiple_of=4)
    assert wide.input_ids == [[1, 2, 3, 10, 11, -1, -1, -1]] and wide.advantages is None
    no_logprobs = to_trajectory(episode(turn(P0, C0)))
    assert collate([a, no_logprobs], pad_id=0).logprobs is None


def test_collate_rejects_bad_input():
    a = to_trajectory(episode(turn(P0, C0)))
    with pytest.raises(ValueError, match="at least one"):
        collate([], pad_id=0)
    with pytest.raises(ValueError, match="1 advantage rows for 2 trajectories"):
        collate([a, a], pad_id=0, advantages=[[0.0] * 5])
    with pytest.raises(ValueError, match="row 0 has 4 values for 5 tokens"):
        collate([a], pad_id=0, advantages=[[0.0] * 4])
    with pytest.raises(ValueError, match="pad_to_multiple_of=0"):
        collate([a], pad_id=0, pad_to_multiple_of=0)
