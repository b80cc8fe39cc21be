"""Generator benchmarks: generation rate, and each family's verifier strength over a sample.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_generators.py``
(1-2 minutes on 2 cores at its defaults; ``--sample 20`` tasks a family, as the tests use,
takes ~20 minutes; ``--rate-only`` skips the verifier runs).

1. Generation rate: tasks per second for ``generate`` alone (in memory) and for ``write``
   (a Harbor directory on disk), over every family and tier, one process.
2. For each family, over its sample (the tiers in turn, from a different tier for each family,
   so that even at ``--sample 1`` every tier has a third of the families; 7 easy, 7 medium,
   6 hard at ``--sample 20``): the oracle's pass rate (want 100 %), nop's (want 0 %) and the wrong
   solutions' (want 0 %), the mean oracle episode time (a fresh sandbox, the solution, the
   verifier: for the families in other languages, their build) and the mean verifier time per
   tier. ``--families`` limits both to some families: ``--families languages`` to those whose
   image installs a toolchain (C, Go, Rust, Node.js, PostgreSQL).
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

from headline import headline

from palaestra.run.check import check_tasks
from palaestra.tasks import generators as g


def chosen(names: str | None) -> list[g.Family]:
    """The families ``--families`` names (comma-separated, or ``languages``); all by default."""
    if names is None:
        return g.families()
    if names == "languages":
        return [f for f in g.families() if g.generate(f.name, 0, 0.0).packages]
    return [g.get_family(name.strip()) for name in names.split(",")]


def toolchain(fam: g.Family) -> str:
    return " ".join(g.generate(fam.name, 0, 0.0).packages) or "python3"


def rate(fams: list[g.Family], n_per: int) -> dict[str, float]:
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
    return {
        "generate_per_s": round(len(jobs) / gen_s, 1),
        "write_per_s": round(len(jobs) / write_s, 1),
    }


async def strength(fams: list[g.Family], sample: int, concurrency: int) -> dict[str, float]:
    tasks, tier_of = [], {}
    for k, fam in enumerate(fams):
        tiers = [g.TIERS[(k + i) % len(g.TIERS)] for i in range(sample)]
        for seed, tier in enumerate(sorted(tiers, key=g.TIERS.index)):
            task = g.load_generated(fam.name, seed, g.tier_difficulty(tier, seed))
            tasks.append(task)
            tier_of[task.id] = tier
    started = time.perf_counter()
    results = await check_tasks(tasks, concurrency=concurrency)
    wall = time.perf_counter() - started
    rows: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    verify: dict[str, list[float]] = defaultdict(list)
    oracle_s: dict[str, list[float]] = defaultdict(list)
    for r in results:
        family = g.parse_task_id(r.task_id)[0]
        kind = "wrong" if r.scenario.startswith("wrong:") else r.scenario
        rows[family][kind].append(r.reward == 1.0)
        rows[family]["as_expected"].append(r.ok)
        if r.scenario == "oracle":
            oracle_s[family].append(r.duration_s)
        if r.verify_s is not None:
            verify[tier_of[r.task_id]].append(r.verify_s)
    print(
        f"\n{len(tasks)} tasks, {len(results)} scenarios in {wall:.0f}s (concurrency {concurrency})"
    )
    print(
        f"{'family':32} {'category':22} {'oracle':>7} {'nop':>6} {'wrong':>7} {'n wrong':>8} "
        f"{'as expected':>12} {'oracle episode':>15}  toolchain"
    )
    for fam in fams:
        r = rows[fam.name]

        def pct(xs: list[bool]) -> str:
            return f"{100 * sum(xs) / len(xs):.0f}%" if xs else "-"

        episode = f"{statistics.mean(oracle_s[fam.name]):.2f}s" if oracle_s[fam.name] else "-"
        print(f"{fam.name:32} {fam.category:22} {pct(r['oracle']):>7} {pct(r['nop']):>6} "
              f"{pct(r['wrong']):>7} {len(r['wrong']):>8} {pct(r['as_expected']):>12} "
              f"{episode:>15}  {toolchain(fam)}")  # fmt: skip
    print("\nmean verifier time per tier:")
    for tier in g.TIERS:
        xs = verify[tier]
        if not xs:
            continue
        print(
            f"  {tier:7} {statistics.mean(xs):.2f}s  (p90 {sorted(xs)[int(0.9 * (len(xs) - 1))]:.2f}s, n={len(xs)})"
        )
    return {
        "scenarios": len(results),
        "as_expected": round(sum(r.ok for r in results) / len(results), 4),
        "verify_mean_s": round(statistics.mean(r.verify_s for r in results if r.verify_s), 3),
        "oracle_episode_mean_s": round(
            statistics.mean(x for xs in oracle_s.values() for x in xs), 3
        ),
        "strength_wall_s": round(wall),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--rate-seeds", type=int, default=5, help="seeds a family and tier for the rate"
    )
    ap.add_argument("--sample", type=int, default=1, help="tasks a family for the strength table")
    ap.add_argument("-j", "--concurrency", type=int, default=4)
    ap.add_argument("--rate-only", action="store_true")
    ap.add_argument(
        "--families", help="comma-separated family names, or 'languages' (default: all)"
    )
    args = ap.parse_args()
    try:
        fams = chosen(args.families)
    except KeyError as e:
        ap.error(e.args[0])
    with tempfile.TemporaryDirectory() as cache:
        os.environ["PALAESTRA_CACHE_DIR"] = cache
        figures = rate(fams, args.rate_seeds)
        if not args.rate_only:
            figures |= asyncio.run(strength(fams, args.sample, args.concurrency))
    headline("generators", **figures)


if __name__ == "__main__":
    main()
