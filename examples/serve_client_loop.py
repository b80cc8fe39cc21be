"""Evaluate a policy against an environment served by another process (`palaestra serve`).

The trainer's side of `palaestra serve`: each episode is a session (its own sandbox on the
server), driven by the protocol's own client; the observation is an LLMRequest, the action an
LLMResponse. Start the server, then this client (any machine that reaches the port):

    palaestra serve starter:0:4 --protocol openenv --port 8000
    .venv/bin/python examples/serve_client_loop.py http://127.0.0.1:8000 --env starter:0:4

`--policy oracle` and `nop` need the tasks here too (the oracle knows their solutions); an
`openai:<model>` policy needs only the URL.
"""

import argparse
import asyncio

from palaestra import make_policy
from palaestra.env.registry import load_tasks
from palaestra.llm.types import LLMRequest, LLMResponse


def action(response: LLMResponse) -> dict:
    return response.model_dump(mode="json", exclude_none=True, exclude={"activations"})


async def openenv_episode(url: str, policy, task_id: str) -> float:
    from openenv.core.generic_client import GenericEnvClient

    async with GenericEnvClient(base_url=url, message_timeout_s=600) as env:
        result = await env.reset(task_id=task_id)  # data: seed, task_id
        while not result.done:
            request = LLMRequest.model_validate(result.observation["request"])
            result = await env.step(action(await policy.complete(request)))
        return result.reward


async def ors_episode(url: str, name: str, policy, task_id: str) -> float:
    from ors.client import AsyncORS

    client = AsyncORS(url)
    env = client.environment(name)
    task = next(t for t in await env.list_tasks("train") if t.task_spec["task_id"] == task_id)
    async with env.session(task=task) as session:
        request = (await session.get_prompt())[0].detail["observation"]
        while True:
            response = await policy.complete(LLMRequest.model_validate(request))
            output = await session.call_tool("respond", action(response))
            if output.finished:
                return output.reward
            request = output.metadata["observation"]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url", help="the server's address, as `palaestra serve` printed it")
    parser.add_argument("--protocol", choices=["openenv", "ors"], default="openenv")
    parser.add_argument("--env", default="starter:0:4", help="the env id the server serves")
    parser.add_argument("--policy", default="oracle", help="oracle, nop, openai:<model>, ...")
    parser.add_argument("-j", "--concurrency", type=int, default=4)
    args = parser.parse_args()
    task_ids = list(load_tasks(args.env).ids)
    policy = make_policy(args.policy, load_tasks(args.env))
    name = "".join(c if c.isalnum() or c in "_.-" else "-" for c in args.env.lower())
    gate = asyncio.Semaphore(args.concurrency)

    async def one(task_id: str) -> float:
        async with gate:
            if args.protocol == "openenv":
                reward = await openenv_episode(args.url, policy, task_id)
            else:
                reward = await ors_episode(args.url, name, policy, task_id)
            print(f"{task_id}: reward {reward}")
            return reward

    rewards = await asyncio.gather(*(one(t) for t in task_ids))
    print(f"{len(rewards)} episodes, mean reward {sum(rewards) / len(rewards):.2f}")


if __name__ == "__main__":
    asyncio.run(main())
