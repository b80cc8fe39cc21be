#!/usr/bin/env python3
"""Generate tasks of generator families across tiers and check each: oracle 1, nop 0, wrongs 0.

.venv/bin/python scripts/check-family.py meeting-rooms --seeds 3
.venv/bin/python scripts/check-family.py --category debugging --seeds 2 -j 2
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from palaestra.run.check import check_tasks
from palaestra.tasks import generators as g


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("families", nargs="*", help="family names (default: all, or --category)")
    ap.add_argument("--category")
    ap.add_argument("--seeds", type=int, default=2, help="seeds per tier")
    ap.add_argument("--tiers", default="easy,medium,hard")
    ap.add_argument("-j", "--concurrency", type=int, default=2)
    args = ap.parse_args()
    fams = [g.get_family(n) for n in args.families] or g.families(args.category)
    tasks = []
    started = time.perf_counter()
    for fam in fams:
        for tier in args.tiers.split(","):
            for seed in range(args.seeds):
                tasks.append(g.load_generated(fam.name, seed, g.tier_difficulty(tier, seed)))
    print(f"generated {len(tasks)} tasks in {time.perf_counter() - started:.2f}s")
    results = await check_tasks(tasks, concurrency=args.concurrency)
    bad = [r for r in results if not r.ok]
    for r in results:
        mark = "ok " if r.ok else "BAD"
        print(f"{mark} {r.task_id:40} {r.scenario:28} reward={r.reward} {r.duration_s:6.2f}s")
    for r in bad:
        print(f"\n--- {r.task_id} {r.scenario}: expected {r.expected}, got {r.reward} ({r.status})")
        print(r.detail[-3000:])
    print(f"\n{len(results) - len(bad)}/{len(results)} scenarios as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
