"""The RL loop in ten lines: a policy answers observations until the episode ends.

Run: .venv/bin/python examples/rl_loop.py
"""

import asyncio

import palaestra
from palaestra.scaffolds import OraclePolicy


async def main() -> None:
    async with palaestra.make("starter:0:6") as env:  # 6 tasks, bash scaffold, local sandbox
        policy = OraclePolicy.from_tasks(env.tasks)  # or palaestra.make_policy("openai:<model>")
        for seed in range(3):
            ts = await env.reset(seed=seed)  # FIRST: ts.observation is an LLMRequest
            while not ts.last():
                action = await policy.complete(ts.observation)  # an LLMResponse
                ts = await env.step(action)  # MID: reward 0.0; LAST: the verifier's reward
            kind = "terminated" if ts.terminated else "truncated"
            print(f"{ts.info['task_id']}: reward {ts.reward} ({kind}, {ts.end.status})")


if __name__ == "__main__":
    asyncio.run(main())
