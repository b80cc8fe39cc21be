"""Generator benchmarks: generation rate, and each family's verifier strength over a sample.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_generators.py``
(``--sample 20`` tasks a family, as the tests use; ``--rate-only`` skips the verifier runs).

1. Generation rate: tasks per second for ``generate`` alone (in memory) and for ``write``
   (a Harbor directory on disk), over every family and tier, one process.
2. For each family, over its sample (7 easy, 7 medium, 6 hard seeds at --sample 20): the
   oracle's pass rate (want 100 %), nop's (want 0 %) and the wrong solutions' (want 0 %), and the
   mean verifier time per tier.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from palaestra.run.check import check_tasks
from palaestra.tasks import generators as g


def rate(n_per: int) -> None:
    fams = g.families()
    jobs = [
        (f.name, s, g.tier_difficulty(t, s)) for f in fams for t in g.TIERS for s in range(n_per)
    ]
    started = time.perf_counter()
    for name, seed, d in jobs:
        g.generate(name, seed, d)
    gen_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        for i, (name, seed, d) in enumerate(jobs):
            g.write(name, seed, d, Path(tmp) / str(i))
        write_s = time.perf_counter() - started
    print(f"{len(fams)} families, {len(jobs)} tasks")
    print(f"generate (in memory): {len(jobs) / gen_s:8.1f} tasks/s")
    print(f"write (Harbor dir):   {len(jobs) / write_s:8.1f} tasks/s")


async def strength(sample: int, concurrency: int) -> None:
    per_tier = {"easy": -(-sample // 3), "medium": -(-sample // 3)}
    per_tier["hard"] = sample - per_tier["easy"] - per_tier["medium"]
    tasks, tier_of = [], {}
    for fam in g.families():
        seed = 0
        for tier, n in per_tier.items():
            for _ in range(n):
                task = g.load_generated(fam.name, seed, g.tier_difficulty(tier, seed))
                tasks.append(task)
                tier_of[task.id] = tier
                seed += 1
    started = time.perf_counter()
    results = await check_tasks(tasks, concurrency=concurrency)
    wall = time.perf_counter() - started
    rows: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    verify: dict[str, list[float]] = defaultdict(list)
    for r in results:
        family = g.parse_task_id(r.task_id)[0]
        kind = "wrong" if r.scenario.startswith("wrong:") else r.scenario
        rows[family][kind].append(r.reward == 1.0)
        rows[family]["as_expected"].append(r.ok)
        if r.verify_s is not None:
            verify[tier_of[r.task_id]].append(r.verify_s)
    print(
        f"\n{len(tasks)} tasks, {len(results)} scenarios in {wall:.0f}s (concurrency {concurrency})"
    )
    print(
        f"{'family':32} {'category':22} {'oracle':>7} {'nop':>6} {'wrong':>7} {'n wrong':>8} {'as expected':>12}"
    )
    for fam in g.families():
        r = rows[fam.name]

        def pct(xs: list[bool]) -> str:
            return f"{100 * sum(xs) / len(xs):.0f}%" if xs else "-"

        print(f"{fam.name:32} {fam.category:22} {pct(r['oracle']):>7} {pct(r['nop']):>6} "
              f"{pct(r['wrong']):>7} {len(r['wrong']):>8} {pct(r['as_expected']):>12}")  # fmt: skip
    print("\nmean verifier time per tier:")
    for tier in g.TIERS:
        xs = verify[tier]
        print(
            f"  {tier:7} {statistics.mean(xs):.2f}s  (p90 {sorted(xs)[int(0.9 * (len(xs) - 1))]:.2f}s, n={len(xs)})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--rate-seeds", type=int, default=20, help="seeds a family and tier for the rate"
    )
    ap.add_argument("--sample", type=int, default=20, help="tasks a family for the strength table")
    ap.add_argument("-j", "--concurrency", type=int, default=4)
    ap.add_argument("--rate-only", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["PALAESTRA_CACHE_DIR"] = cache
        rate(args.rate_seeds)
        if not args.rate_only:
            asyncio.run(strength(args.sample, args.concurrency))


if __name__ == "__main__":
    main()
