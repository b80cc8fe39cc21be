"""Online RL's data path: GRPO groups stream in as they finish, with their advantages.

The policy here flips a coin per episode between the reference solution and doing nothing, so
groups have rewards to compare; put your model's client in its place. A curriculum
(palaestra.rl.curricula) would go in ``sampler=``.

Run: .venv/bin/python examples/stream_groups.py
"""

import asyncio
import hashlib

from palaestra.env.registry import load_tasks
from palaestra.llm import LLMRequest, LLMResponse
from palaestra.rl import RolloutStream, grpo, has_reward_variance
from palaestra.scaffolds import NopPolicy, OraclePolicy

ENV = "gen/edit-distance:0:4"


class CoinFlip:
    """Solves an episode or not, by a hash of its id: a stand-in for a model that is learning."""

    name = "coin-flip"

    def __init__(self) -> None:
        self.oracle, self.nop = OraclePolicy.from_tasks(load_tasks(ENV)), NopPolicy()

    async def complete(self, request: LLMRequest) -> LLMResponse:
        digest = hashlib.sha256(str(request.metadata["episode_id"]).encode()).digest()
        return await (self.oracle if digest[0] % 2 else self.nop).complete(request)


async def main() -> None:
    async with RolloutStream(
        ENV, CoinFlip(), concurrency=8, group_filter=has_reward_variance
    ) as stream:
        async for group in stream.groups(4, draws=4):  # 4 tasks x 4 attempts, started together
            advantages = [round(a, 2) for a in grpo(group.rewards)]
            print(f"{group.draw.task_id}: rewards {group.rewards} advantages {advantages}")
        stats = stream.stats
        print(f"{stats.completed_groups} groups, {stats.filtered} without variance filtered out")


if __name__ == "__main__":
    asyncio.run(main())
