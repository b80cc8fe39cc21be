"""Self-play: a creator policy writes tasks, a solver policy calibrates them, a pool keeps them.

Each proposal is validated (parse, forbidden content, near-duplicates, Harbor format, two
oracle and two nop runs, generic wrong solutions, limits); an accepted task enters the pool and
the solver attempts it ``--attempts`` times; the creator's reward is the learnability of the
measured solve rate p, 1 - 2|p - 0.5|, minus a repetition penalty. See docs/self-play.md.

With no policy named, a demo runs: the creator is a scripted policy proposing a fixed mix
(two valid tasks, a broken one, two trivial ones, a forbidden one, a malformed answer and a
copy), and the solver solves 3 of 4 attempts of the first task it meets, 2 of 4 of the next...

Run:  .venv/bin/python examples/self_play.py --pool runs/pool
      .venv/bin/python examples/self_play.py --creator openai:gpt-4o-mini --proposals 20
      .venv/bin/python examples/self_play.py --creator openai:M --solver hf:SmolLM2-dir
      .venv/bin/python examples/self_play.py --solver hf:smollm2-135m --solver-step-limit 3 \
          --solver-max-tokens 128   # the demo mix, a real solver on CPU
      .venv/bin/python examples/self_play.py --creator openai:M --from-failures runs/eval-1
Then: palaestra tasks pool stats runs/pool
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from palaestra.env.registry import load_tasks, make_policy
from palaestra.llm import LLMClient, LLMRequest, LLMResponse, SamplingParams, ScriptedPolicy
from palaestra.rl.self_play import SelfPlay, failed_tasks
from palaestra.run.store import read_run
from palaestra.scaffolds import NopPolicy, OraclePolicy, Scaffold, make_scaffold
from palaestra.tasks.pool import Pool
from palaestra.tasks.source import TaskSet

SUM_TEST = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/sum.txt 2>/dev/null)" = "17" ]; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""
VALID_SUM = {
    "id": "sum-numbers",
    "instruction": "/app/numbers.txt holds one integer per line. Write their sum to /app/sum.txt.",
    "files": {"numbers.txt": "3\n4\n10\n"}, "tests": {"test.sh": SUM_TEST},
    "solution": "#!/bin/bash\nawk '{s+=$1} END {print s}' /app/numbers.txt > /app/sum.txt\n",
    "outputs": ["sum.txt"], "metadata": {"category": "file-operations", "difficulty": "easy"},
}  # fmt: skip
VALID_REVERSE = {
    "id": "reverse-words",
    "instruction": "Reverse the order of the words on the single line of /app/phrase.txt, in "
    "place: 'to be or not' becomes 'not or be to'. Keep single spaces between words.",
    "files": {"phrase.txt": "alpha beta gamma delta\n"},
    "tests": {"test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n"
              "got=$(tr -s ' \\n' ' ' < /app/phrase.txt | sed 's/ $//')\n"
              "[ \"$got\" = 'delta gamma beta alpha' ] && echo 1 > /logs/verifier/reward.txt "
              "|| echo 0 > /logs/verifier/reward.txt\n"},
    "solution": "#!/bin/bash\nawk '{for (i = NF; i > 0; i--) printf \"%s%s\", $i, "
                "(i > 1 ? \" \" : \"\\n\")}' /app/phrase.txt > /tmp/p && mv /tmp/p /app/phrase.txt\n",
    "metadata": {"category": "file-operations", "difficulty": "easy"},
}  # fmt: skip
#: The demo mix: (what it is, the creator's answer, the validation step it must fail or None).
DEMO: list[tuple[str, Any, str | None]] = [
    ("valid", VALID_SUM, None),
    ("broken: the reference solution is wrong", {
        "id": "largest-number", "instruction": "Write the largest integer of /app/values.txt "
        "(one a line, some negative) to /app/largest.txt.", "files": {"values.txt": "-5\n12\n7\n"},
        "tests": {"test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n"
                  "test \"$(cat /app/largest.txt)\" = 12 && echo 1 > /logs/verifier/reward.txt "
                  "|| echo 0 > /logs/verifier/reward.txt\n"},
        "solution": "#!/bin/bash\nsort /app/values.txt | tail -n 1 > /app/largest.txt\n",
        "outputs": ["largest.txt"]}, "reference"),
    ("trivial: any file passes", {**VALID_SUM, "id": "sum-exists", "tests": {
        "test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n"
                   "[ -e /app/sum.txt ] && echo 1 > /logs/verifier/reward.txt "
                   "|| echo 0 > /logs/verifier/reward.txt\n"}}, "not_trivial"),
    ("trivial: the tests always pass", {**VALID_SUM, "id": "sum-always", "tests": {
        "test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n"}},
     "nop"),
    ("forbidden: the solution downloads", {**VALID_SUM, "id": "sum-curl",
     "solution": "#!/bin/bash\ncurl -s http://example.com/sum > /app/sum.txt\n"}, "forbidden"),
    ("malformed: no JSON", "I would write a task about sums, but here is prose instead.",
     "parse"),
    ("duplicate of the first", VALID_SUM, "novel"),
    ("valid", VALID_REVERSE, None),
]  # fmt: skip


def demo_answers() -> list[str]:
    return [a if isinstance(a, str) else "```json\n" + json.dumps(a) + "\n```" for _, a, _ in DEMO]


class DemoSolver:
    """Solves the k-th task it meets on the first ``attempts - 1 - k % 2`` of its attempts (the
    pool's reference solution), does nothing on the others: p = 3/4, 2/4, 3/4, ..."""

    name = "demo-solver"

    def __init__(self, pool: Pool, attempts: int) -> None:
        self.pool, self.attempts = pool, attempts
        self._tasks: list[str] = []
        self._attempt: Counter[str] = Counter()
        self._solves: dict[str, bool] = {}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        task_id, episode = request.metadata["task_id"], request.metadata["episode_id"]
        if episode not in self._solves:
            if task_id not in self._tasks:
                self._tasks.append(task_id)
            k, j = self._tasks.index(task_id), self._attempt[task_id]
            self._attempt[task_id] += 1
            self._solves[episode] = j < self.attempts - 1 - k % 2
        if not self._solves[episode]:
            return await NopPolicy().complete(request)
        oracle = OraclePolicy({task_id: self.pool.root / task_id / "solution"})
        return await oracle.complete(request)


async def run(
    pool_dir: Path,
    creator: LLMClient,
    solver: LLMClient | None = None,
    *,
    seeds: str = "starter:0:3",
    proposals: int = len(DEMO),
    attempts: int = 4,
    concurrency: int = 1,
    from_failures: Path | None = None,
    solver_scaffold: str | Scaffold = "bash",
) -> list[dict[str, Any]]:
    """Run ``proposals`` creator episodes; one result per proposal, in the order they end."""
    pool = Pool(pool_dir)
    play = SelfPlay(pool, solver or DemoSolver(pool, attempts), attempts=attempts,
                    scaffold=solver_scaffold)  # fmt: skip
    mode, source = "new", load_tasks(seeds)
    if from_failures is not None:
        failed = failed_tasks(from_failures)
        if not failed:
            raise SystemExit(f"{from_failures}: the run failed no task; nothing to vary")
        mode = "variant"
        evaluated = load_tasks(read_run(from_failures)["env_id"])
        source = TaskSet([evaluated.get(t) for t in failed], name="failed")
    results = []
    async for episode in play.stream(creator, source, draws=proposals, mode=mode,
                                     concurrency=concurrency):  # fmt: skip
        judgment = episode.info.get("judgment")
        if judgment is None:  # the creator's policy or the judge failed: an error episode
            results.append({"accepted": False, "reason": f"error: {episode.end.error}",
                            "reward": 0.0})  # fmt: skip
            continue
        validation = judgment.info.get("validation") or {}
        results.append({"accepted": judgment.accepted, "reward": episode.reward,
                        "reason": validation.get("reason", judgment.info.get("reason")),
                        "task_id": judgment.info.get("task_id"),
                        "solve_rate": judgment.info.get("solve_rate"),
                        "similarity": judgment.info.get("similarity")})  # fmt: skip
    return results


def solver_scaffold(args: argparse.Namespace) -> str | Scaffold:
    """The solver's bash scaffold, with the limits given (a small model on CPU needs them)."""
    limits: dict[str, Any] = {}
    if args.solver_step_limit is not None:
        limits["step_limit"] = args.solver_step_limit
    if args.solver_max_tokens is not None:
        limits["sampling"] = SamplingParams(max_tokens=args.solver_max_tokens)
    return make_scaffold("bash", **limits) if limits else "bash"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--creator", help="openai:<model>, hf:<dir> (default: the demo mix)")
    parser.add_argument("--solver", help="openai:<model>, hf:<dir> (default: the creator, "
                        "or the demo solver with the demo mix)")  # fmt: skip
    parser.add_argument("--pool", type=Path, help="the pool directory (default: a temp dir)")
    parser.add_argument("--seeds", default="starter:0:3", help="env id of the example tasks")
    parser.add_argument("--proposals", type=int, help="creator episodes (default: demo's 8)")
    parser.add_argument("--attempts", type=int, default=4, help="solver attempts a task")
    parser.add_argument("--concurrency", type=int, default=1, help="proposals at once")
    parser.add_argument("--from-failures", type=Path, help="a run dir: vary its failed tasks")
    parser.add_argument("--solver-step-limit", type=int, help="the solver's turns per attempt")
    parser.add_argument("--solver-max-tokens", type=int, help="the solver's tokens per turn")
    args = parser.parse_args()
    if args.creator is None and args.from_failures:
        parser.error("--from-failures needs --creator (the demo mix is fixed)")
    creator = make_policy(args.creator) if args.creator else ScriptedPolicy(demo_answers())
    solver = make_policy(args.solver) if args.solver else None
    if args.creator and solver is None:
        solver = creator
    with tempfile.TemporaryDirectory() as tmp:
        pool_dir = args.pool or Path(tmp) / "pool"
        results = asyncio.run(run(pool_dir, creator, solver, seeds=args.seeds,
                                  proposals=args.proposals or len(DEMO), attempts=args.attempts,
                                  concurrency=args.concurrency,
                                  from_failures=args.from_failures,
                                  solver_scaffold=solver_scaffold(args)))  # fmt: skip
        for r in results:
            verdict = (f"accepted {r['task_id']} solve rate {r['solve_rate']}"
                       if r["accepted"] else f"rejected at {r['reason']}")  # fmt: skip
            print(f"{verdict}: creator reward {r['reward']:.2f}")
        by_reason: defaultdict[str, int] = defaultdict(int)
        for r in results:
            by_reason[r["reason"] or "accepted"] += 1
        print("shares: " + ", ".join(f"{k} {v / len(results):.0%}" for k, v in by_reason.items()))


if __name__ == "__main__":
    main()
