"""Verification cost of generated tasks: CPU seconds (and wall) the verifier adds to an episode.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_verify.py``
(about 3 minutes on 2 cores at its defaults; ``--families`` takes family or category names).

For each family, its first ``--per-family`` tasks (one a tier at 3) run with the oracle on the
local backend: once to warm the caches (tasks generated, sandboxes prepared), then twice, back
to back, counted: once with the task's verifier (``tests/test.sh`` through
:class:`~palaestra.verify.harbor.HarborVerifier`), once with a verifier that gives reward 0
without running anything. The difference of the two runs' CPU time (this process and every
process of its sandboxes, which are its descendants) divided by the episodes is what the
verifier costs an episode: the checker's interpreter, the agent's code it runs, the upload of
the tests and the reward read. The oracle must pass every task with the verifier (a verifier
made cheaper by checking less would show there, and in ``palaestra tasks check``).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import time
from collections import defaultdict

from headline import headline

from palaestra.env.registry import load_tasks
from palaestra.run import evaluate
from palaestra.sandbox import Sandbox
from palaestra.tasks import generators as g
from palaestra.tasks.task import Task
from palaestra.verify.harbor import HarborVerifier, VerifierResult, VerifierStatus


class NoVerifier(HarborVerifier):
    """Reward 0 at once: the episode without its verification."""

    async def verify(
        self, task: Task, sandbox: Sandbox, *, timeout: float | None = None
    ) -> VerifierResult:
        return VerifierResult(VerifierStatus.OK, reward=0.0)


def cpu_s() -> float:
    own, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def measured(env_id: str, concurrency: int, **overrides: object) -> tuple[float, float, dict]:
    cpu, start = cpu_s(), time.perf_counter()
    summary = await evaluate(env_id, "oracle", concurrency=concurrency, **overrides)
    return cpu_s() - cpu, time.perf_counter() - start, summary


def chosen(names: str | None) -> list[g.Family]:
    if names is None:
        return g.families()
    wanted = set(names.split(","))
    return [f for f in g.families() if f.name in wanted or f.category in wanted]


async def main(args: argparse.Namespace) -> None:
    families = chosen(args.families)
    if not families:
        raise SystemExit(f"--families {args.families!r}: no family or category of that name")
    rows: dict[str, list[float]] = defaultdict(list)
    per_family: list[float] = []
    failed: list[str] = []
    print(f"{'family':<26} {'verify CPU s/ep':>15} {'verify wall s/ep':>16}  oracle")
    for family in families:
        env_id = f"gen/{family.name}:0:{args.per_family}"
        n = len(load_tasks(env_id))
        # A first run generates the tasks and prepares their sandboxes (the cache's work, not
        # the verifier's): it is not counted.
        await measured(env_id, args.concurrency, verifier=NoVerifier())
        cpu_with, wall_with, summary = await measured(env_id, args.concurrency)
        cpu_without, wall_without, _ = await measured(
            env_id, args.concurrency, verifier=NoVerifier()
        )
        cost, wall = (cpu_with - cpu_without) / n, (wall_with - wall_without) / n
        passed = f"{summary['passed']}/{summary['episodes']}"
        if summary["passed"] != summary["episodes"]:
            failed.append(family.name)
        print(f"{family.name:<26} {cost:>15.3f} {wall:>16.3f}  {passed}", flush=True)
        rows[family.category].append(cost)
        per_family.append(cost)
    print()
    for category, costs in sorted(rows.items()):
        print(f"{category:<26} {statistics.fmean(costs):>15.3f}  (mean of {len(costs)} families)")
    mean, median = statistics.fmean(per_family), statistics.median(per_family)
    print(f"{'all families':<26} {mean:>15.3f}  (median {median:.3f})")
    if failed:
        print(f"the oracle failed some tasks of: {', '.join(failed)}")
    headline(
        "verify",
        verify_cpu_ms_mean=round(mean * 1000, 1),
        verify_cpu_ms_median=round(median * 1000, 1),
        oracle_failed=len(failed),
    )
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--families", help="comma-separated family or category names")
    parser.add_argument("--per-family", type=int, default=3, help="tasks a family (3: a tier each)")
    parser.add_argument("-j", "--concurrency", type=int, default=2)
    asyncio.run(main(parser.parse_args()))
