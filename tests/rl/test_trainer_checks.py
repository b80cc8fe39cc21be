"""The trainer's hygiene on a real tiny model: the sampling parameters a response was drawn
with reach the trajectory and the trainer refuses other ones; the first update checks the
ratio of tokens the current weights sampled; dropout is off; the clip fraction counts only the
clipped side (TRL's count); entropy and a KL estimate to the initial weights are logged;
updates are counted apart from steps; ``palaestra.rl.grpo`` stays the advantage function."""

from __future__ import annotations

import math
from typing import Any

import pytest

from palaestra.llm.local_hf import HFLocalPolicy, write_tiny_model
from palaestra.llm.types import LLMRequest, SamplingParams
from palaestra.rl.behaviour import RatioCheckFailed, SamplingMismatch, check_sampling
from palaestra.rl.loss import surrogate_backward
from palaestra.rl.trainer import GRPOConfig, GRPOTrainer, train
from palaestra.rl.trajectory import Trajectory, to_trajectory
from palaestra.run.rollout import rollout
from tests.rl.test_trainer import PROMPT, EvenFirstToken


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("checks") / "tiny")


def sampled_at(**sampling: Any) -> type[EvenFirstToken]:
    class Env(EvenFirstToken):
        def _request(self) -> LLMRequest:
            params = SamplingParams(max_tokens=3, **sampling)
            return LLMRequest(messages=PROMPT, sampling=params, metadata={"task_id": "even"})

    return Env


async def test_sampling_parameters_travel_from_the_response_into_the_trajectory(tiny):
    async with HFLocalPolicy(tiny, seed=0) as policy:
        episode = await rollout(sampled_at(temperature=0.3, top_k=5)(), policy)
    sampling = episode.turns[0].action.sampling
    assert sampling == SamplingParams(temperature=0.3, top_p=1.0, top_k=5, max_tokens=3)
    sample = to_trajectory(episode)
    assert sample.samplings == [sampling] and sample.spans[0].sampling == sampling
    with pytest.raises(
        SamplingMismatch,
        match=r"^turn 0 of .* top_k=5; the trainer recomputes the whole distribution",
    ):
        check_sampling([sample], 0.3)


@pytest.mark.parametrize(
    ("sampling", "message"),
    [
        (
            {"temperature": 0.3},
            r"at temperature 0.3 but .* at 1: set GRPOConfig\(temperature=0.3\)",
        ),
        ({"top_p": 0.9}, r"top_p=0.9; the trainer recomputes the whole distribution"),
        ({"temperature": 0.0}, r"decoded greedily \(temperature 0\)"),
    ],
)
async def test_the_trainer_refuses_samples_drawn_otherwise_and_moves_nothing(
    tiny, sampling, message
):
    async with HFLocalPolicy(tiny, seed=1, max_batch_size=16) as policy:
        trainer = GRPOTrainer(policy, GRPOConfig(lr=1e-2))  # temperature 1.0
        await trainer.load()
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        with pytest.raises(SamplingMismatch, match=message) as caught:
            await train(trainer, sampled_at(**sampling), steps=2, group_size=8, mode="sync")
        assert "\n" not in str(caught.value)
        after = trainer.model.state_dict()
        assert all(before[k].equal(after[k]) for k in before) and policy.policy_version == 0


async def test_the_first_update_checks_the_ratio_of_tokens_the_weights_sampled(tiny):
    """The policy serves other weights than the trainer loaded, under the same version: the
    ratio of tokens 'the current weights' sampled is far from 1, and nothing moves."""
    from transformers import AutoModelForCausalLM

    state = AutoModelForCausalLM.from_pretrained(tiny).state_dict()
    state = {k: v * 3 if k == "lm_head.weight" else v for k, v in state.items()}
    async with HFLocalPolicy(tiny, seed=2, max_batch_size=16) as policy:
        await policy.load_weights(state, version=0)
        trainer = GRPOTrainer(policy, GRPOConfig(lr=1e-2))
        await trainer.load()
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        with pytest.raises(
            RatioCheckFailed, match=r"differ from the policy's by .* nats per token"
        ):
            await train(trainer, EvenFirstToken, steps=4, group_size=8, mode="sync")
        after = trainer.model.state_dict()
        assert all(before[k].equal(after[k]) for k in before) and trainer.updates == 0


async def test_steps_log_entropy_kl_ratio_and_count_updates_apart(tiny):
    async with HFLocalPolicy(tiny, seed=3, max_batch_size=16) as policy:
        trainer = GRPOTrainer(policy, GRPOConfig(lr=3e-2))
        history = await train(
            trainer, EvenFirstToken, steps=5, group_size=8, groups_per_step=2, mode="sync"
        )
    assert trainer.model.training is False  # dropout off in the loss's forward pass
    updated = [s for s in history if s.updated]
    assert updated and [s.updates for s in updated] == list(range(1, len(updated) + 1))
    assert trainer.updates == len(updated) and trainer.steps == len(history)
    first = updated[0]
    assert first.lag0_log_ratio is not None and first.lag0_log_ratio < 1e-3
    assert first.kl is not None and abs(first.kl) < 1e-5  # the initial weights themselves
    assert updated[-1].kl > 1e-6  # moved away from them
    vocab = trainer.model.config.vocab_size
    assert all(0 < s.entropy <= math.log(vocab) + 1e-4 for s in updated)


def test_clip_fraction_counts_only_the_clipped_side(tiny):
    """Ratios 1.5 and 0.5 on alternate tokens: with A > 0 only the 1.5s are clipped, with
    A < 0 only the 0.5s (TRL and verl count so; |r - 1| > eps would count every token)."""
    from transformers import AutoModelForCausalLM

    from palaestra.rl.loss import sample_logprobs
    from palaestra.rl.trajectory import TurnSpan

    model = AutoModelForCausalLM.from_pretrained(tiny).eval()
    ids = list(range(5, 17))
    mask = [0] * 4 + [1] * 8
    now = sample_logprobs(model, Trajectory(ids, mask, None, [], 1.0), 1.0)
    shift = [0.0] * 4 + [-math.log(1.5), -math.log(0.5)] * 4  # old = now + shift: r = exp(-shift)
    old = [n + s if m else 0.0 for n, s, m in zip(now, shift, mask, strict=True)]
    span = TurnSpan(0, 0, 4, 12, version=0)
    chunk = [(Trajectory(ids, mask, old, [span], 1.0), [a * m for m in mask]) for a in (1.0, -1.0)]
    parts = surrogate_backward(model, chunk, temperature=1.0, clip=0.2, total_tokens=16, version=0)
    assert parts.clipped == 8  # 4 tokens at 1.5 with A = 1, 4 at 0.5 with A = -1
    assert parts.lag0_tokens == 16 and parts.lag0_abs_log_ratio == pytest.approx(
        8 * (math.log(1.5) + math.log(2)), rel=1e-4
    )


def test_the_grpo_name_is_the_advantage_function_whatever_was_imported():
    import palaestra.rl.trainer  # noqa: F401  (the trainer module once shadowed the function)
    from palaestra.rl import grpo
    from palaestra.rl.advantages import grpo as advantage

    assert grpo is advantage and grpo([1.0, 0.0]) == advantage([1.0, 0.0])


def test_the_loss_forward_runs_without_dropout_and_restores_the_mode(tiny):
    """A model with dropout, left in train mode: the loss's forward pass still recomputes the
    distribution the policy sampled from (ratio 1 on its own tokens), and the model is back in
    train mode after it."""
    import torch
    from transformers import AutoModelForCausalLM

    from palaestra.rl.loss import sample_logprobs
    from palaestra.rl.trajectory import TurnSpan

    model = AutoModelForCausalLM.from_pretrained(tiny, attention_dropout=0.5)
    ids = list(range(5, 29))
    mask = [0] * 4 + [1] * 20
    now = sample_logprobs(model, Trajectory(ids, mask, None, [], 1.0), 1.0)
    model.train()
    with torch.no_grad():  # dropout is live in train mode: the check below could fail
        noisy = model(input_ids=torch.tensor([ids])).logits
        clean = model.eval()(input_ids=torch.tensor([ids])).logits
    assert not torch.allclose(noisy, clean, atol=1e-3)
    model.train()
    sample = Trajectory(ids, mask, now, [TurnSpan(0, 0, 4, 24, version=0)], 1.0)
    parts = surrogate_backward(
        model,
        [(sample, [float(m) for m in mask])],
        temperature=1.0,
        clip=0.2,
        total_tokens=20,
        version=0,
    )
    assert parts.lag0_tokens == 20 and parts.lag0_abs_log_ratio / 20 < 1e-5
    assert parts.clipped == 0 and model.training is True
