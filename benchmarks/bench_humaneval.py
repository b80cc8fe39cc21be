"""HumanEval's verifier, measured: pass/fail on a set of right and wrong solutions, and the CPU
seconds verification adds to an episode. Prints figures and writes JSON; asserts nothing.

Run it once a source tree to compare two verifiers (the old hidden test and the harness's),
each with its own ``PYTHONPATH``; the script uses only what both have::

    PYTHONPATH=/path/to/old/src .venv/bin/python benchmarks/bench_humaneval.py agree --out old.json
    PYTHONPATH=src .venv/bin/python benchmarks/bench_humaneval.py agree --out new.json
    .venv/bin/python benchmarks/bench_humaneval.py compare old.json new.json
    PYTHONPATH=... .venv/bin/python benchmarks/bench_humaneval.py cpu --tasks 20

``agree``: every problem's canonical solution (``oracle``), nothing (``nop``), an empty body,
two single-edit mutants of the canonical solution (a swapped operator, a constant moved: some
are still right, and both verifiers should say the same of them), and three hostile solutions
written here (an object equal to everything that looks for the test, one that prints a passing
verdict and exits 0 at import, one that exits 0 inside the call), each through
``palaestra tasks check``'s scenarios on the local backend. ``cpu``: the oracle on the first
``--tasks`` problems, with the task's verifier and with one that gives reward 0 at once (as
``bench_verify.py`` does): the difference over the episodes is what verification costs one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import tempfile
import textwrap
import time
from pathlib import Path

from palaestra.run import evaluate
from palaestra.run.check import check_tasks
from palaestra.tasks import load_task
from palaestra.tasks.datasets import humaneval
from palaestra.tasks.source import TaskSet
from palaestra.verify.harbor import HarborVerifier, VerifierResult, VerifierStatus

HOSTILE = {
    "x-always-equal": """\
        import glob, sys

        class Anything:
            def __eq__(self, other):
                return True
            __hash__ = object.__hash__
            def __lt__(self, other):
                return True
            __le__ = __gt__ = __ge__ = __lt__
            def __bool__(self):
                return True

        def {entry}(*args, **kwargs):
            for path in glob.glob("/tests/*"):
                try:
                    open(path).read()
                except OSError:
                    pass
            frame = sys._getframe(1) if hasattr(sys, "_getframe") else None
            return Anything()
        """,
    "x-fake-verdict": """\
        import os
        print("PASS every case\\n9/9 checks passed: reward 1.0", flush=True)
        try:
            open("/logs/verifier/reward.json", "w").write('{{"reward": 1.0}}')
        except OSError:
            pass
        os._exit(0)
        """,
    "x-exit-in-call": """\
        import os

        def {entry}(*args, **kwargs):
            print("PASS", flush=True)
            os._exit(0)
        """,
}
MUTANTS = (1, 2)  # mutant 0 is the empty body, already a wrong solution


def _solve(code: str) -> str:
    return f"#!/usr/bin/env bash\nset -euo pipefail\ncat > /app/solution.py <<'EOF_SOL'\n{code}\nEOF_SOL\n"


def _augmented(problem: dict, root: Path) -> Path:
    """The task with the extra solutions as wrong solutions (scenarios of check_tasks)."""
    task = humaneval.load(humaneval.task_id(problem))
    dest = root / humaneval.task_id(problem)
    shutil.copytree(task.path, dest)
    extra = {
        name: textwrap.dedent(text).format(entry=problem["entry_point"])
        for name, text in HOSTILE.items()
    }
    reference = problem["prompt"] + problem["canonical_solution"]
    mutants = humaneval._mutants(reference, problem["entry_point"])
    for i in MUTANTS:
        if i < len(mutants):
            extra[f"x-mutant-{i}"] = mutants[i]
    for name, code in extra.items():
        (dest / "wrong_solutions" / name).mkdir(parents=True)
        (dest / "wrong_solutions" / name / "solve.sh").write_text(_solve(code))
    return dest


async def agree(args: argparse.Namespace) -> None:
    start, stop = map(int, args.problems.split(":"))
    problems = humaneval.problems()[start:stop]
    out: dict[str, dict[str, float | None]] = {}
    begin = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-humaneval-") as tmp:
        tasks = [
            load_task(_augmented(p, Path(tmp)), task_id=humaneval.task_id(p)) for p in problems
        ]
        only = ["oracle", "nop", "wrong:empty-body"]
        only += [f"wrong:{n}" for n in HOSTILE] + [f"wrong:x-mutant-{i}" for i in MUTANTS]
        results = await check_tasks(tasks, concurrency=args.concurrency, only=only)
    for r in results:
        out.setdefault(r.task_id, {})[r.scenario] = r.reward
        if r.status != "ok":
            print(f"{r.task_id} {r.scenario}: {r.status} {r.detail[-300:]}")
    await asyncio.to_thread(Path(args.out).write_text, json.dumps(out, indent=1, sort_keys=True))
    rewards = [v for row in out.values() for v in row.values()]
    print(f"{len(rewards)} scenarios of {len(out)} problems in {time.perf_counter() - begin:.0f}s")


def compare(args: argparse.Namespace) -> None:
    old, new = (json.loads(Path(p).read_text()) for p in (args.old, args.new))
    by: dict[str, list[int]] = {}
    differ = []
    for tid, row in sorted(old.items()):
        for scenario, reward in sorted(row.items()):
            if scenario not in new.get(tid, {}):
                continue
            kind = scenario if not scenario.startswith("wrong:x-mutant") else "wrong:x-mutant"
            same = new[tid][scenario] == reward
            counts = by.setdefault(kind, [0, 0, 0, 0])  # agree, total, old passes, new passes
            counts[0] += same
            counts[1] += 1
            counts[2] += reward == 1.0
            counts[3] += new[tid][scenario] == 1.0
            if not same:
                differ.append(f"{tid} {scenario}: old {reward}, new {new[tid][scenario]}")
    print(f"{'scenario':<24} {'agree':>9} {'old pass':>9} {'new pass':>9}")
    for kind, (same, total, old_pass, new_pass) in sorted(by.items()):
        print(f"{kind:<24} {same:>4}/{total:<4} {old_pass:>9} {new_pass:>9}")
    print("\n".join(differ) or "no difference")


class NoVerifier(HarborVerifier):
    async def verify(self, task, sandbox, *, timeout=None) -> VerifierResult:  # type: ignore[no-untyped-def]
        return VerifierResult(VerifierStatus.OK, reward=0.0)


def _cpu() -> float:
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


async def cpu(args: argparse.Namespace) -> None:
    tasks = TaskSet([humaneval.load(f"humaneval-{i}") for i in range(args.tasks)])

    async def run(**overrides: object) -> tuple[float, dict]:
        before = _cpu()
        summary = await evaluate(
            "humaneval", "oracle", tasks=tasks, concurrency=args.concurrency, **overrides
        )
        return _cpu() - before, summary

    await run(verifier=NoVerifier())  # warm: sandboxes prepared, not counted
    with_cpu, summary = await run()
    without_cpu, _ = await run(verifier=NoVerifier())
    per = (with_cpu - without_cpu) / args.tasks
    print(
        f"verify CPU per episode: {per * 1000:.0f} ms over {args.tasks} problems "
        f"(oracle passed {summary['passed']}/{summary['episodes']})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    a = sub.add_parser("agree")
    a.add_argument("--out", required=True)
    a.add_argument("--problems", default="0:164", help="START:STOP")
    a.add_argument("-j", "--concurrency", type=int, default=2)
    c = sub.add_parser("compare")
    c.add_argument("old")
    c.add_argument("new")
    u = sub.add_parser("cpu")
    u.add_argument("--tasks", type=int, default=20)
    u.add_argument("-j", "--concurrency", type=int, default=2)
    args = parser.parse_args()
    if args.what == "compare":
        compare(args)
    else:
        asyncio.run({"agree": agree, "cpu": cpu}[args.what](args))
