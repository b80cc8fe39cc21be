"""The GRPO trainer on a real tiny model: it learns, bumps versions, stays token-exact, keeps
async mode within its staleness bound and never trains off-policy in sync mode.

The environment is a one-turn stand-in (below the trainer's layer): the reward is 1 when the
first token the policy wrote is even. The test measures the model's exact probability of an
even first token before and after training, not a sampled pass rate.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from palaestra.env.end import EpisodeEnd
from palaestra.env.types import Environment, EpisodeStatus, TimeStep, restart, termination
from palaestra.llm.local_hf import HFLocalPolicy, write_tiny_model
from palaestra.llm.types import LLMRequest, LLMResponse, SamplingParams
from palaestra.rl.trainer import GRPOConfig, GRPOTrainer, train
from palaestra.scaffolds import NopPolicy
from palaestra.scaffolds.base import EndReason

PROMPT = [{"role": "user", "content": "ls -la && cat README.md"}]


class EvenFirstToken(Environment[LLMRequest, LLMResponse]):
    """One turn; reward 1.0 when the completion's first token id is even."""

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        return restart(self._request(), {"task_id": "even"})

    def _request(self) -> LLMRequest:
        return LLMRequest(
            messages=PROMPT, sampling=SamplingParams(max_tokens=3), metadata={"task_id": "even"}
        )

    async def step(self, action: LLMResponse) -> TimeStep[LLMRequest]:
        reward = float(action.completion_token_ids[0] % 2 == 0)
        status = EpisodeStatus.PASSED if reward else EpisodeStatus.FAILED
        end = EpisodeEnd(status, EndReason.SUBMITTED, reward=reward, verified=True)
        return termination(reward, self._request(), {"task_id": "even", "end": end})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("grpo") / "tiny")


def p_even(model: Any, tokenizer: Any) -> float:
    import torch

    ids = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if not isinstance(ids, list) else ids
    with torch.no_grad():
        probs = torch.softmax(model(torch.tensor([ids])).logits[0, -1].float(), -1)
    return float(probs[0::2].sum())


async def test_training_makes_the_rewarded_behaviour_likelier(tiny):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    async with HFLocalPolicy(tiny, seed=0, max_batch_size=16) as policy:
        trainer = GRPOTrainer(policy, GRPOConfig(lr=3e-2))
        await trainer.load()
        before = p_even(trainer.model, tokenizer)
        initial = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        history = await train(
            trainer, EvenFirstToken, steps=8, group_size=8, groups_per_step=2, mode="sync"
        )
        after = p_even(trainer.model, tokenizer)
        assert after > before + 0.15, (before, after)
        updated = [s for s in history if s.updated]
        assert updated and policy.policy_version == len(updated)
        assert [s.version for s in updated] == list(range(1, len(updated) + 1))
        # sync: every token trained on was sampled by the version being trained
        assert {s.lag for s in history} == {0}
        assert all(s.tokens > s.completion_tokens > 0 and s.train_s > 0 for s in updated)
        # the policy serves the trainer's weights
        served = policy._model.state_dict()
        trained = trainer.model.state_dict()
        assert all(served[k].equal(trained[k]) for k in trained)
        assert any(not initial[k].equal(trained[k]) for k in trained)


class SlowEven(EvenFirstToken):
    """Takes 0 to 0.35 s to score an action (like a verifier), so episodes finish staggered."""

    finished = 0

    async def step(self, action: LLMResponse) -> TimeStep[LLMRequest]:
        SlowEven.finished += 1
        await asyncio.sleep(0.05 * (SlowEven.finished % 8))
        return await super().step(action)


async def test_async_mode_holds_back_groups_that_would_train_stale(tiny):
    async with HFLocalPolicy(tiny, seed=1, max_batch_size=16) as policy:
        trainer = GRPOTrainer(policy, GRPOConfig(lr=1e-3))
        history = await train(
            trainer,
            SlowEven,
            steps=4,
            group_size=4,
            groups_per_step=1,
            mode="async",
            max_staleness=0,
            concurrency=16,  # room for four groups while one trains: admission holds them
        )
    final = history[-1].stream
    assert final is not None and final.admission_waits > 0
    assert {s.lag for s in history} == {0}  # staggered finishes, and still on-policy
    assert len(history) == 4 and policy.policy_version == sum(s.updated for s in history) >= 1


async def test_no_signal_no_update(tiny):
    async with HFLocalPolicy(tiny, seed=2) as policy:
        trainer = GRPOTrainer(policy)

        class AlwaysZero(EvenFirstToken):
            async def step(self, action):
                end = EpisodeEnd(EpisodeStatus.FAILED, EndReason.SUBMITTED, verified=True)
                return termination(0.0, self._request(), {"task_id": "even", "end": end})

        history = await train(trainer, AlwaysZero, steps=1, group_size=2, mode="sync")
        assert not history[0].updated and history[0].samples == 0
        assert policy.policy_version == 0


def test_bad_options_are_named(tiny):
    with pytest.raises(ValueError, match="temperature must be > 0"):
        GRPOTrainer(HFLocalPolicy(tiny), GRPOConfig(temperature=0))
    with pytest.raises(TypeError, match="not NopPolicy: pass an HFLocalPolicy"):
        GRPOTrainer(NopPolicy())  # type: ignore[arg-type]


async def test_lora_trains_the_adapter_and_serves_merged_weights(tiny):
    pytest.importorskip("peft", reason="peft (the dev extra) not installed")
    async with HFLocalPolicy(tiny, seed=3, max_batch_size=16) as policy:
        trainer = GRPOTrainer(policy, GRPOConfig(lr=1e-2, lora_rank=4))
        await trainer.load()
        base = {k: v.clone() for k, v in trainer.policy_state().items()}
        history = await train(
            trainer, EvenFirstToken, steps=2, group_size=8, groups_per_step=2, mode="sync"
        )
        assert any(s.updated for s in history)
        served = policy._model.state_dict()
        merged = trainer.policy_state()
        assert set(merged) == set(served)  # the plain model's keys, no adapter keys
        assert all(served[k].equal(merged[k]) for k in merged)
        changed = [k for k in merged if not merged[k].equal(base[k])]
        assert changed and all("proj" in k for k in changed)  # only the adapted linears moved
        trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
        assert trainable and all("lora_" in n for n in trainable)
