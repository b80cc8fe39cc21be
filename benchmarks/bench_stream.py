"""RolloutStream throughput against ``evaluate`` on the same work, in the same run.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_stream.py``.

The work: ``--episodes`` generated tasks of one family (``gen/<family>:0:N``), each run once by
the instant ``nop`` policy (it submits at once: every episode is a sandbox start, one turn, the
verifier and the teardown, so the figure is the framework's and the sandbox's cost, not a
model's). At each concurrency:

* ``evaluate``: ``evaluate(env, "nop", concurrency=c)`` over the N tasks (its SQLite store in a
  temporary directory, as always);
* ``stream``: ``RolloutStream(env, nop, concurrency=c).episodes(draws=N)`` with a sampler that
  draws the same N tasks in order with the same seeds (no store: what a trainer runs);
* ``stream+store`` (with ``--store``): the same, every episode also written to ``results.db``;
* ``groups of 8``: ``groups(8, draws=N // 8)``: N episodes as GRPO groups (8 attempts at N/8
  tasks: the same number of episodes, not the same tasks).

Tasks are generated (cached) before anything is timed. Ratios are stream / evaluate.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from collections.abc import Awaitable, Callable

from headline import headline

from palaestra.env.registry import load_tasks
from palaestra.rl.sampler import GroupOutcome, TaskDraw
from palaestra.rl.stream import RolloutStream
from palaestra.run import evaluate
from palaestra.scaffolds.oracle import NopPolicy


class InOrder:
    """Draws the given tasks in order, as ``evaluate`` plans them."""

    def __init__(self, ids: list[str]) -> None:
        self.ids, self.n = ids, 0

    def draw(self, rng: random.Random) -> TaskDraw:
        self.n += 1
        return TaskDraw(self.ids[(self.n - 1) % len(self.ids)])

    def update(self, outcome: GroupOutcome) -> None:
        pass


async def timed(run: Callable[[], Awaitable[int]]) -> tuple[float, int]:
    started = time.perf_counter()
    episodes = await run()
    return time.perf_counter() - started, episodes


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--family", default="edit-distance")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--store", action="store_true", help="also time the stream + results.db")
    args = parser.parse_args()
    n = args.episodes
    env = f"gen/{args.family}:0:{n}"
    tasks = load_tasks(env)
    await asyncio.gather(*(asyncio.to_thread(tasks.get, task_id) for task_id in tasks.ids))
    ids = list(tasks.ids)
    print(
        f"settings: {n} episodes of {env} (nop policy, bash scaffold, local sandbox) at "
        f"concurrency {args.concurrency}; {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f} at start"
    )
    nop = NopPolicy()

    async def run_eval(c: int) -> int:
        summary = await evaluate(env, nop, concurrency=c, tasks=tasks)
        return summary["episodes"]

    async def run_stream(c: int, store: bool) -> int:
        with tempfile.TemporaryDirectory() as out:
            stream = RolloutStream(env, nop, concurrency=c, sampler=InOrder(ids),
                                   out_dir=out if store else None)  # fmt: skip
            async with stream:
                return len([e async for e in stream.episodes(draws=n)])

    async def run_groups(c: int) -> int:
        stream = RolloutStream(env, nop, concurrency=c)
        async with stream:
            return sum([len(g.episodes) async for g in stream.groups(8, draws=n // 8)])

    header = f"{'concurrency':>11} {'evaluate':>9} {'stream':>9} {'ratio':>6} {'groups/8':>9} {'ratio':>6}"
    print(header + (f" {'+store':>9} {'ratio':>6}" if args.store else "") + "   (episodes/s)")
    figures = {}
    for c in args.concurrency:
        rates = []
        runs = [
            lambda c=c: run_eval(c),
            lambda c=c: run_stream(c, False),
            lambda c=c: run_groups(c),
        ]
        if args.store:
            runs.append(lambda c=c: run_stream(c, True))
        for run in runs:
            seconds, episodes = await timed(run)
            rates.append(episodes / seconds)
        line = f"{c:>11} {rates[0]:>9.2f}"
        for rate in rates[1:]:
            line += f" {rate:>9.2f} {rate / rates[0]:>6.2f}"
        print(line, flush=True)
        figures[f"evaluate_eps_c{c}"] = round(rates[0], 2)
        figures[f"stream_ratio_c{c}"] = round(rates[1] / rates[0], 2)
    headline("stream", **figures)


if __name__ == "__main__":
    asyncio.run(main())
