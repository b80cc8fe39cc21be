"""The async figure: episodes/s against concurrency with a fixed-latency policy, and the bound
the sandbox's throughput sets.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_async.py``.

The policy answers every request after exactly ``--latency`` seconds (``asyncio.sleep``: a
remote inference server with room for every request, the best case for concurrency) with the
``nop`` action, so an episode is a sandbox start, one policy call, the verifier and the
teardown. At concurrency ``c`` a :class:`~palaestra.rl.stream.RolloutStream` runs
``max(--min-episodes, --rounds * c)`` episodes of ``gen/<family>`` and the rate is episodes over
wall time. Two references, measured in the same run:

* **ideal**: ``c x`` the rate at concurrency 1 (nothing shared: each episode in flight costs
  only its own latency);
* **sandbox ceiling**: the rate of the instant ``nop`` policy at the highest concurrency: what
  the machine's sandbox starts, verifiers and teardowns allow with no policy latency at all.

The expected rate is ``min(ideal, ceiling)``: with a slow policy, concurrency hides the
latency until the sandboxes' CPU saturates; from then on more concurrency buys nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

from bench_stream import InOrder
from headline import headline

from palaestra.env.registry import load_tasks
from palaestra.llm import LLMRequest, LLMResponse
from palaestra.rl.stream import RolloutStream
from palaestra.scaffolds.oracle import NopPolicy


class FixedLatency:
    """The ``nop`` action after exactly ``latency`` seconds."""

    name = "fixed-latency"

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.nop = NopPolicy()

    async def complete(self, request: LLMRequest) -> LLMResponse:
        await asyncio.sleep(self.latency)
        return await self.nop.complete(request)


async def rate(env: str, ids: list[str], policy: object, concurrency: int, n: int) -> float:
    """Episodes per second of ``n`` episodes at ``concurrency``."""
    stream = RolloutStream(
        env, policy, concurrency=concurrency, buffer=concurrency, sampler=InOrder(ids)
    )
    started = time.perf_counter()
    async with stream:
        done = len([e async for e in stream.episodes(draws=n)])
    if stream.stats.errors:
        raise RuntimeError(f"{stream.stats.errors} episodes failed: {stream.stats.error_classes}")
    return done / (time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per policy call")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--family", default="shell-warmup")
    parser.add_argument("--tasks", type=int, default=64, help="distinct tasks, cycled")
    parser.add_argument("--rounds", type=int, default=2, help="episodes per slot")
    parser.add_argument("--min-episodes", type=int, default=8)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    env = f"gen/{args.family}:0:{args.tasks}"
    tasks = load_tasks(env)
    await asyncio.gather(*(asyncio.to_thread(tasks.get, task_id) for task_id in tasks.ids))
    ids = list(tasks.ids)
    top = max(args.concurrency)
    print(
        f"settings: gen/{args.family} ({args.tasks} tasks), bash scaffold, local sandbox; "
        f"policy latency {args.latency:g} s; {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f} at start",
        flush=True,
    )
    ceiling = await rate(env, ids, NopPolicy(), top, max(args.min_episodes, args.rounds * top))
    print(f"sandbox ceiling (instant nop policy, concurrency {top}): {ceiling:.2f} episodes/s")
    print(f"{'concurrency':>11} {'episodes/s':>10} {'speed-up':>8} {'ideal':>7} {'bound':>7}")
    rows = []
    for c in sorted(args.concurrency):
        n = max(args.min_episodes, args.rounds * c)
        r = await rate(env, ids, FixedLatency(args.latency), c, n)
        base = rows[0]["episodes_per_s"] if rows else r
        ideal = base * c
        rows.append(
            {
                "concurrency": c,
                "episodes": n,
                "episodes_per_s": round(r, 3),
                "speedup": round(r / base, 2),
                "ideal": round(ideal, 3),
                "bound": round(min(ideal, ceiling), 3),
            }
        )
        print(
            f"{c:>11} {r:>10.2f} {r / base:>7.1f}x {ideal:>7.2f} {min(ideal, ceiling):>7.2f}",
            flush=True,
        )
    figures = {
        "latency_s": args.latency,
        "ceiling_eps": round(ceiling, 2),
        "speedup_max": rows[-1]["speedup"],
        "eps_max": rows[-1]["episodes_per_s"],
    }
    if args.json:
        args.json.write_text(
            json.dumps(
                {"args": vars(args) | {"json": str(args.json)}, "ceiling": ceiling, "rows": rows},
                indent=2,
            )
        )
    headline("async", **figures)


if __name__ == "__main__":
    asyncio.run(main())
