"""Self-play's validation throughput, and the rejection shares of the demo mix.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_creator.py``.

* **Validation throughput**: ``--proposals`` distinct valid proposals (the example's
  ``sum-numbers`` task with other numbers), each through every step of
  :func:`palaestra.run.validate.validate_proposal` (parse, static checks, Harbor load, seven
  sandbox runs: two oracle, two nop, three generic wrong solutions), ``--concurrency`` proposals
  at once on the local sandbox; proposals per second of wall time.
* **The demo mix** (examples/self_play.py: 8 proposals, a scripted creator and the demo
  solver, 4 attempts a task): the whole loop's wall time and the share of proposals rejected
  at each validation step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from palaestra.llm import ScriptedPolicy
from palaestra.run.validate import validate_proposal
from palaestra.sandbox import make_backend

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import self_play as demo  # noqa: E402  (the example's demo mix and proposals)
from headline import headline  # noqa: E402


def variant(base: dict, i: int) -> str:
    numbers = [i, 2 * i + 1, 7]
    test = base["tests"]["test.sh"].replace('"17"', f'"{sum(numbers)}"')
    proposal = {**base, "id": f"sum-{i}", "tests": {"test.sh": test},
                "files": {"numbers.txt": "".join(f"{n}\n" for n in numbers)}}  # fmt: skip
    return "```json\n" + json.dumps(proposal) + "\n```"


async def throughput(base: dict, proposals: int, concurrency: int, root: Path) -> float:
    backend = make_backend("local")
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> bool:
        async with gate:
            v = await validate_proposal(variant(base, i), root / f"c{concurrency}-{i}", backend)
            return v.accepted

    try:
        await one(-1)  # warm: the first sandbox of a process pays the replay cache
        started = time.perf_counter()
        accepted = await asyncio.gather(*(one(i) for i in range(proposals)))
        wall = time.perf_counter() - started
    finally:
        await backend.aclose()
    print(f"validation  concurrency {concurrency:>2}: {proposals} proposals in {wall:5.2f}s = "
          f"{proposals / wall:5.2f} proposals/s ({sum(accepted)} accepted)")  # fmt: skip
    return proposals / wall


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proposals", type=int, default=16)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    rates = {}
    with tempfile.TemporaryDirectory() as tmp:
        for c in args.concurrency:
            rates[c] = await throughput(demo.VALID_SUM, args.proposals, c, Path(tmp))
        started = time.perf_counter()
        results = await demo.run(Path(tmp) / "pool", ScriptedPolicy(demo.demo_answers()))
        wall = time.perf_counter() - started
    shares = Counter(r["reason"] or "accepted" for r in results)
    print(f"demo mix: {len(results)} proposals in {wall:.2f}s (with calibration, 4 attempts)")
    for reason, n in shares.most_common():
        print(f"  {reason:<12} {n}/{len(results)} = {n / len(results):.1%}")
    best = max(rates, key=rates.__getitem__)
    headline("creator", proposals_per_s=round(rates[best], 2), at_concurrency=best,
             accepted_share=round(shares["accepted"] / len(results), 3))  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
