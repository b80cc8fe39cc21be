"""Real coding-agent CLIs against the ``tools`` scaffold: oracle and nop episodes on the starter
pack, in the same run, on the local sandbox.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_harness.py`` (the
harnesses must be installed: ``palaestra harness install``). Per scaffold: oracle and nop pass
rates, wall time per oracle episode (sandbox, harness, verifier; the policy answers at once),
its ratio to ``tools``', the run's wall time per oracle episode (a batch's wall time over its
episodes: what ``-j`` episodes at a time sustain, start-up CPU and all) and its ratio, requests
per oracle episode, and whether every turn carried token ids (a wrapper adds ids to the
oracle's answers, as a vLLM policy would). ``--tasks N`` takes the first N tasks only.

Scaffolds run one after the other, each over the same tasks at the same concurrency, so the
machine's load is shared alike; ``--rounds`` alternates them to even out drift.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from headline import headline

from palaestra import CodeEnv
from palaestra.env.registry import load_tasks
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.run import rollout
from palaestra.scaffolds import NopPolicy, OraclePolicy, make_scaffold
from palaestra.scaffolds.harness import HARNESSES, require_installed


class WithIds:
    """The oracle's answers with made-up token ids (the prompt's length in ids)."""

    def __init__(self, inner: OraclePolicy) -> None:
        self.inner = inner

    async def complete(self, request: LLMRequest) -> LLMResponse:
        response = await self.inner.complete(request)
        n = sum(len(str(m.get("content") or "")) for m in request.messages)
        return response.model_copy(
            update={"prompt_token_ids": list(range(n)), "completion_token_ids": [1, 2, 3]}
        )


async def _episodes(name: str, tasks, policy_of, concurrency: int) -> tuple[list, float]:
    scaffold = make_scaffold(name)
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int):
        async with gate, CodeEnv(tasks, scaffold=scaffold) as env:
            start = time.perf_counter()
            episode = await rollout(env, policy_of(env.tasks), options={"task_index": i})
            return episode, time.perf_counter() - start

    start = time.perf_counter()
    done = await asyncio.gather(*(one(i) for i in range(len(tasks))))
    return done, time.perf_counter() - start


async def main(args: argparse.Namespace) -> None:
    tasks = load_tasks(args.env)
    if args.tasks:
        tasks = tasks[: args.tasks]
    names = ["tools", *(n for n in args.harnesses if n in HARNESSES)]
    for name in names[1:]:
        require_installed(HARNESSES[name])
    rows: dict[str, dict[str, list]] = {
        n: {"oracle": [], "nop": [], "wall": [], "batch": []} for n in names
    }
    for _ in range(args.rounds):
        for name in names:
            oracle, batch = await _episodes(
                name, tasks, lambda t: WithIds(OraclePolicy.from_tasks(t)), args.concurrency
            )
            nop, _ = await _episodes(name, tasks, lambda t: NopPolicy(), args.concurrency)
            rows[name]["oracle"] += [e for e, _ in oracle]
            rows[name]["nop"] += [e for e, _ in nop]
            rows[name]["wall"] += [s for _, s in oracle]
            rows[name]["batch"].append(batch)
    base = statistics.median(rows["tools"]["wall"])
    base_run = sum(rows["tools"]["batch"]) / len(rows["tools"]["oracle"])
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{args.env}: {len(tasks)} tasks x {args.rounds} round(s), -j {args.concurrency}, "
        f"{os.cpu_count()} CPUs, load average {load} (1, 5, 15 min) at the end"
    )
    print(
        f"{'scaffold':<14}{'oracle':>8}{'nop':>8}{'s/episode':>11}{'x tools':>9}"
        f"{'run s/ep':>10}{'x tools':>9}{'requests':>10}  token ids  errors"
    )
    for name in names:
        oracle, nop, wall = rows[name]["oracle"], rows[name]["nop"], rows[name]["wall"]
        passed = sum(e.reward == 1.0 for e in oracle) / len(oracle)
        nop_passed = sum(e.reward == 1.0 for e in nop) / len(nop)
        median = statistics.median(wall)
        run = sum(rows[name]["batch"]) / len(oracle)  # the batch's wall over its episodes
        requests = statistics.mean(len(e.turns) for e in oracle)
        ids = all(t.action.prompt_token_ids is not None for e in oracle for t in e.turns)
        errors = [e.end.error.splitlines()[0] for e in oracle + nop if e.status == "error"]
        print(
            f"{name:<14}{passed:>8.0%}{nop_passed:>8.0%}{median:>11.2f}{median / base:>9.2f}"
            f"{run:>10.2f}{run / base_run:>9.2f}{requests:>10.1f}  {'yes' if ids else 'no':<9}  {len(errors)}"
        )
        for error in errors[:2]:
            print(f"    {error[:160]}")
        headline(
            f"harness/{name}",
            oracle=passed,
            nop=nop_passed,
            s_per_episode=round(median, 3),
            x_tools=round(median / base, 2),
            run_s_per_episode=round(run, 3),
            run_x_tools=round(run / base_run, 2),
            requests=round(requests, 2),
            token_ids=ids,
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="starter", help="tasks (default: the starter pack)")
    parser.add_argument("--harnesses", nargs="*", default=list(HARNESSES))
    parser.add_argument("-j", "--concurrency", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=0, help="the first N tasks only (0: all)")
    asyncio.run(main(parser.parse_args()))
