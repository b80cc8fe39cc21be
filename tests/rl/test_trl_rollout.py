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
