"""Report benchmark: generation time and page size for a run of 10,000 episodes.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_report.py [-n 10000]``.

Fills a results store with synthetic episodes shaped like real ones (see bench_store.py), then
times ``write_report`` on it with the default number of embedded trajectories and, with
``--all-trajectories``, with every trajectory embedded.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_store import fill  # noqa: E402
from headline import headline  # noqa: E402

from palaestra.run.report import MAX_TRAJECTORIES, write_report  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000, help="episodes in the run")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--all-trajectories", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        _, fill_s = asyncio.run(fill(run_dir, args.n, args.turns, concurrency=8))
        db = sum(p.stat().st_size for p in run_dir.iterdir())
        print(f"run of {args.n} episodes x {args.turns} turns: store written in {fill_s:.1f} s, "
              f"{db / 2**20:.0f} MiB")  # fmt: skip
        limits = [MAX_TRAJECTORIES] + ([-1] if args.all_trajectories else [])
        figures = {"episodes": args.n}
        for limit in limits:
            out = Path(tmp) / f"report-{limit}.html"
            started, cpu = time.perf_counter(), time.process_time()
            write_report([run_dir], out, max_trajectories=limit)
            took, cpu = time.perf_counter() - started, time.process_time() - cpu
            embedded = "all" if limit < 0 else str(min(limit, args.n))
            print(
                f"  report with {embedded} trajectories embedded: {took:.1f} s wall ({cpu:.1f} s CPU), "
                f"{out.stat().st_size / 2**20:.1f} MiB"
            )
            figures[f"report_{embedded}_s"] = round(took, 2)
            out.unlink()
    headline("report", **figures)


if __name__ == "__main__":
    main()
