"""`palaestra serve` throughput: episodes per second through the server against in process, at
concurrency 32, and the latency a step gains on the way (p50/p99), per protocol.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_serve.py``.

A fast environment (``tools/crm`` with the oracle: two steps an episode, no sandbox), so what
is measured is the server, not the task. ``--concurrency`` workers each play episodes in turn
until ``--episodes`` are done: in process, each with its own environment; through the server,
each with its own session (OpenEnv: one WebSocket for all its episodes; ORS: one session per
episode, created and deleted, as ORS defines a session). A step's latency is ``env.step``'s
wall time in process, the client's step call (request to reply, loopback) through the server;
the added latency is the difference of the two distributions' p50 and p99. The oracle's own
answer is outside both. Server and clients share this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from palaestra.env.registry import load_tasks, make, make_policy
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.run.metrics import percentile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from headline import headline  # noqa: E402

Episode = Callable[[str, list[float]], Awaitable[float]]


def action(response: LLMResponse) -> dict:
    return response.model_dump(mode="json", exclude_none=True, exclude={"activations"})


async def timed(step: Awaitable, steps: list[float]):
    started = time.perf_counter()
    result = await step
    steps.append(time.perf_counter() - started)
    return result


async def run(workers: list[Episode], task_ids: list[str], episodes: int) -> tuple[float, list]:
    """Episodes/s over ``episodes`` episodes, each worker playing them in turn; step times."""
    steps: list[float] = []
    queue = [task_ids[i % len(task_ids)] for i in range(episodes)]
    rewards: list[float] = []

    async def worker(play: Episode) -> None:
        while queue:
            rewards.append(await play(queue.pop(), steps))

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in workers))
    wall = time.perf_counter() - started
    assert len(rewards) == episodes and min(rewards) == 1.0, "the oracle failed an episode"
    return episodes / wall, steps


def in_process(env_id: str, tasks, oracle) -> Episode:
    env = make(env_id, tasks=tasks)

    async def play(task_id: str, steps: list[float]) -> float:
        ts = await env.reset(options={"task_id": task_id})
        while not ts.last():
            ts = await timed(env.step(await oracle.complete(ts.observation)), steps)
        return ts.reward

    return play


async def openenv_worker(url: str, oracle) -> tuple[Episode, Callable[[], Awaitable[None]]]:
    from openenv.core.generic_client import GenericEnvClient

    client = GenericEnvClient(base_url=url, message_timeout_s=600)
    await client.connect()

    async def play(task_id: str, steps: list[float]) -> float:
        result = await client.reset(task_id=task_id)
        while not result.done:
            request = LLMRequest.model_validate(result.observation["request"])
            result = await timed(client.step(action(await oracle.complete(request))), steps)
        return result.reward

    return play, client.close


async def ors_worker(url: str, name: str, oracle) -> tuple[Episode, Callable[[], Awaitable[None]]]:
    from ors.client import AsyncORS

    client = AsyncORS(url)
    env = client.environment(name)
    tasks = {t.task_spec["task_id"]: t for t in await env.list_tasks("train")}

    async def play(task_id: str, steps: list[float]) -> float:
        async with env.session(task=tasks[task_id]) as session:
            request = (await session.get_prompt())[0].detail["observation"]
            while True:
                response = await oracle.complete(LLMRequest.model_validate(request))
                output = await timed(session.call_tool("respond", action(response)), steps)
                if output.finished:
                    return output.reward
                request = output.metadata["observation"]

    async def close() -> None:
        for session in client.environments._clients.values():
            await session.close()

    return play, close


def start_server(env_id: str, protocol: str, concurrency: int) -> tuple[subprocess.Popen, str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "palaestra.cli", "serve", env_id, "--protocol", protocol]
        + ["--port", "0", "--max-sessions", str(4 * concurrency)],
        stdout=subprocess.PIPE,
        text=True,
        env={"COLUMNS": "300", **os.environ},
    )
    url = re.search(r" on (http://\S+)", proc.stdout.readline()).group(1)
    name = re.search(r"environment\('([^']+)'\)", proc.stdout.readline())
    return proc, url, name.group(1) if name else env_id


def report(label: str, rate: float, steps: list[float]) -> tuple[float, float]:
    p50, p99 = percentile(steps, 0.5) * 1e3, percentile(steps, 0.99) * 1e3
    print(
        f"{label:>10}: {rate:8.1f} episodes/s, step p50 {p50:7.2f} ms, p99 {p99:7.2f} ms "
        f"({len(steps)} steps)"
    )
    return p50, p99


async def main(args: argparse.Namespace) -> None:
    tasks = load_tasks(args.env)
    oracle = make_policy("oracle", tasks)
    ids = list(tasks.ids)
    print(f"{args.env}, oracle, {args.episodes} episodes, concurrency {args.concurrency}")
    workers = [in_process(args.env, tasks, oracle) for _ in range(args.concurrency)]
    await run(workers, ids, args.concurrency)  # warm-up
    base_rate, base_steps = await run(workers, ids, args.episodes)
    base_p50, base_p99 = report("in process", base_rate, base_steps)
    figures: dict[str, float] = {"in_process_eps": round(base_rate, 1)}
    for protocol in args.protocols:
        proc, url, name = start_server(args.env, protocol, args.concurrency)
        try:
            made = [
                await (
                    openenv_worker(url, oracle)
                    if protocol == "openenv"
                    else ors_worker(url, name, oracle)
                )
                for _ in range(args.concurrency)
            ]
            plays = [play for play, _ in made]
            await run(plays, ids, args.concurrency)  # warm-up
            rate, steps = await run(plays, ids, args.episodes)
            p50, p99 = report(protocol, rate, steps)
            print(
                f"{'':>10}  {rate / base_rate:.2f}x in process's rate; a step gains "
                f"{p50 - base_p50:.2f} ms at p50, {p99 - base_p99:.2f} ms at p99"
            )
            figures |= {
                f"{protocol}_eps": round(rate, 1),
                f"{protocol}_ratio": round(rate / base_rate, 3),
                f"{protocol}_added_p50_ms": round(p50 - base_p50, 2),
                f"{protocol}_added_p99_ms": round(p99 - base_p99, 2),
            }
            for _, close in made:
                await close()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    headline("serve", **figures)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="tools/crm", help="a fast env id (default tools/crm)")
    parser.add_argument("--episodes", type=int, default=640)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--protocols", nargs="+", default=["openenv", "ors"])
    asyncio.run(main(parser.parse_args()))
