"""TRL's GRPOTrainer trains on palaestra episodes through PalaestraRollout (its rollout_func).

A tiny random model and a one-turn stand-in environment (the reward is 1 when the completion's
first token is even) keep it to a few seconds on a CPU; the episodes go through palaestra's
``rollout`` and token-exact trajectories as any other.
"""

from __future__ import annotations

import pytest

from palaestra.llm.local_hf import HFLocalPolicy, write_tiny_model
from palaestra.rl.trl_rollout import PalaestraRollout, episode_reward
from tests.rl.test_trainer import EvenFirstToken

trl = pytest.importorskip("trl", reason="trl (the dev extra) not installed")


@pytest.mark.slow
def test_grpo_trainer_takes_optimisation_steps_on_palaestra_episodes(tmp_path):
    from datasets import Dataset

    model_dir = write_tiny_model(tmp_path / "tiny")
    calls: list[tuple[int, int]] = []

    class Recording(PalaestraRollout):
        def __call__(self, prompts, trainer):
            out = super().__call__(prompts, trainer)
            calls.append((len(prompts), self.policy.policy_version))
            return out

    rollout_func = Recording(EvenFirstToken, HFLocalPolicy(model_dir, seed=0), concurrency=4)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        per_device_train_batch_size=8,
        num_generations=8,
        max_steps=2,
        learning_rate=1e-2,
        max_completion_length=8,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=0,
    )
    trainer = trl.GRPOTrainer(
        model=str(model_dir),
        reward_funcs=episode_reward,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["even"] * 16}),
        rollout_func=rollout_func,
    )
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    try:
        trainer.train()
    finally:
        rollout_func.close()
    assert trainer.state.global_step == 2
    after = trainer.model.state_dict()
    assert any(not before[k].equal(after[k]) for k in before)
    # each call ran one episode per prompt; the second ran on the weights of step 1
    assert [n for n, _ in calls] == [8, 8] and calls[1][1] == 1
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    assert rewards and all(0.0 <= r <= 1.0 for r in rewards)


def _trl_trainer(tmp_path, model, rollout_func, **args):
    from datasets import Dataset

    config = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=1,
        learning_rate=1e-2,
        max_completion_length=8,
        save_strategy="no",
        report_to="none",
        seed=0,
        **args,
    )
    return trl.GRPOTrainer(
        model=model,
        reward_funcs=episode_reward,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": ["even"] * 8}),
        rollout_func=rollout_func,
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", ["temperature", "other weights", "dropout"])
def test_the_trl_adapter_refuses_what_trl_would_not_recompute(tmp_path, case):
    """TRL recomputes the completions' logprobs at its own temperature, with its own weights,
    in train mode: samples drawn at another temperature, by other weights, or a model whose
    dropout is on in TRL's forward pass fail the first call in one line, before any step."""
    from transformers import AutoModelForCausalLM

    from palaestra.rl.behaviour import RatioCheckFailed, SamplingMismatch

    model_dir = write_tiny_model(tmp_path / "tiny")
    policy = HFLocalPolicy(model_dir, seed=0)
    # the tiny model is near uniform: dropout moves its logprobs by ~0.02 nats per token
    rollout_func = PalaestraRollout(EvenFirstToken, policy, concurrency=4, ratio_tolerance=1e-3)
    model: object = str(model_dir)
    args: dict = {}
    if case == "temperature":
        args["temperature"] = 0.7  # the policy samples at 1.0
        expected = SamplingMismatch, r"at temperature 1 but .* set trl\.GRPOConfig\(temperature=1\)"
    elif case == "other weights":
        state = AutoModelForCausalLM.from_pretrained(model_dir).state_dict()
        state = {k: v * 3 if k == "lm_head.weight" else v for k, v in state.items()}
        rollout_func._run(rollout_func.policy.load_weights(state, version=0))
        expected = RatioCheckFailed, r"^the trainer's log-probabilities differ .* nats per token"
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir, attention_dropout=0.5)
        args["disable_dropout"] = True  # nn.Dropout modules only: Llama's attention keeps it
        expected = RatioCheckFailed, r"in train mode \(.* in eval mode\): its dropout is on"
    try:
        trainer = _trl_trainer(tmp_path, model, rollout_func, **args)
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        with pytest.raises(expected[0], match=expected[1]) as caught:
            trainer.train()
    finally:
        rollout_func.close()
    assert "\n" not in str(caught.value) and trainer.state.global_step == 0
    after = trainer.model.state_dict()
    assert all(before[k].equal(after[k]) for k in before)
