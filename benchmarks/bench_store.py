"""Results-store benchmarks: write overhead per episode and run-directory size per 1,000 episodes.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_store.py [-n 1000]``.

Synthetic episodes shaped like real bash-scaffold ones: ``--turns`` turns (default 10), each with
a ~600-character response, a ~2 KB command output (also in the next request's new message,
as the scaffold sends it), and the ~2 KB system + task prompt on the first turn. Episodes are
written through :class:`ResultStore` exactly as ``evaluate`` writes them (one transaction each,
in the store's writer thread), from ``--concurrency`` asyncio tasks at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import string
import tempfile
import time
from pathlib import Path

from headline import headline

from palaestra.run.metrics import percentile
from palaestra.run.store import EpisodeRow, ResultStore, StepRecord


def _text(rng: random.Random, n: int) -> str:
    words = [
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(n // 6)
    ]
    return " ".join(words)[:n]


def synthetic_episode(rng: random.Random, i: int, turns: int) -> EpisodeRow:
    steps = []
    for t in range(turns):
        output = _text(rng, 2000)
        new = (
            [{"role": "system", "content": _text(rng, 1200)},
             {"role": "user", "content": _text(rng, 900)}]
            if t == 0
            else [{"role": "assistant", "content": _text(rng, 600)},
                  {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{output}</output>"}]
        )  # fmt: skip
        steps.append(
            StepRecord(
                turn=t,
                messages_from=0 if t == 0 else 2 * t,
                new_messages=new,
                response={
                    "content": _text(rng, 600) + "\n```bash\nls -la\n```",
                    "usage": {"prompt_tokens": 900 + 500 * t, "completion_tokens": 150},
                    "cost_usd": 0.001,
                    "finish_reason": "stop",
                },  # fmt: skip
                execution={
                    "turn": t,
                    "command": "ls -la",
                    "exit_code": 0,
                    "output": output,
                    "timed_out": False,
                    "truncated": False,
                    "duration_s": 0.01,
                },  # fmt: skip
            )
        )
    passed = rng.random() < 0.4
    values = {
        "run_id": "bench", "episode_id": f"{i:016x}", "task_id": f"task-{i % 200}",
        "family": f"family-{i % 7}", "category": f"cat-{i % 6}",
        "difficulty": ("easy", "medium", "hard")[i % 3], "attempt": i // 200, "try": 0,
        "final": 1, "seed": i, "status": "passed" if passed else "failed",
        "end_reason": "submitted", "infra_error": 0, "reward": float(passed),
        "rewards": json.dumps({"reward": float(passed), "tests_passed": 7.0}), "verified": 1,
        "verifier_output": _text(rng, 1500), "steps": turns, "sandbox_start_s": 0.05,
        "agent_s": 3.0 * rng.random(), "policy_s": 10 * rng.random(), "verifier_s": 0.6,
        "prompt_tokens": 30000, "completion_tokens": 1500, "cached_tokens": 0,
        "cost_usd": 0.001 * turns, "wall_s": 15 * rng.random(), "finished_at": time.time(),
    }  # fmt: skip
    return EpisodeRow(values, steps)


async def fill(run_dir: Path, n: int, turns: int, concurrency: int) -> tuple[list[float], float]:
    """Write ``n`` synthetic episodes; return each write's latency and the total (s)."""
    rng = random.Random(0)
    episodes = [synthetic_episode(rng, i, turns) for i in range(n)]
    store = await ResultStore.open(run_dir)
    await store.begin_run(
        "bench",
        identity={
            "env_id": "bench",
            "policy": "synthetic",
            "scaffold": "bash",
            "sandbox": "none",
            "attempts": max(1, n // 200),
            "seed": 0,
            "tasks": [f"task-{i}" for i in range(min(n, 200))],
        },  # fmt: skip
        config={},
    )
    latencies: list[float] = []
    queue = list(reversed(episodes))

    async def writer() -> None:
        while queue:
            row = queue.pop()
            started = time.perf_counter()
            await store.add_episode(row)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(concurrency)))
    total = time.perf_counter() - started
    await store.finish_run(time.time(), None)
    await store.aclose()
    return latencies, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000, help="episodes to write")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        latencies, total = asyncio.run(fill(run_dir, args.n, args.turns, args.concurrency))
        size = sum(p.stat().st_size for p in run_dir.iterdir())
        payload = sum(
            len(json.dumps(s.new_messages))
            + len(json.dumps(s.response))
            + len(json.dumps(s.execution))
            for s in synthetic_episode(random.Random(0), 0, args.turns).steps
        )
    print(f"{args.n} episodes x {args.turns} turns, {args.concurrency} concurrent writers")
    print(f"  write latency per episode: mean {1e3 * statistics.fmean(latencies):.2f} ms, "
          f"p50 {1e3 * percentile(latencies, 0.5):.2f} ms, p90 {1e3 * percentile(latencies, 0.9):.2f} ms")  # fmt: skip
    print(f"  throughput: {args.n / total:.0f} episodes/s, i.e. {1e3 * total / args.n:.2f} ms of "
          "the writer thread per episode")  # fmt: skip
    print(f"  trajectory JSON per episode: {payload / 1024:.1f} KiB")
    headline(
        "store",
        write_p50_ms=round(1e3 * percentile(latencies, 0.5), 2),
        episodes_per_s=round(args.n / total),
    )
    print(
        f"  run directory: {size / 2**20:.1f} MiB, {size / args.n * 1000 / 2**20:.1f} MiB per 1,000 episodes"
    )


if __name__ == "__main__":
    main()
