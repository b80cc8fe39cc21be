"""Real coding-agent CLIs against the ``tools`` scaffold: oracle and nop episodes on the starter
pack, in the same run, on the local sandbox, each scaffold started cold and prepared ahead.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_harness.py`` (the
harnesses must be installed: ``palaestra harness install``). Per scaffold and mode: oracle and
nop pass rates, wall time per oracle episode (reset to LAST: sandbox, harness, verifier; the
policy answers at once), its ratio to ``tools`` started cold and to ``tools`` prepared ahead,
the run's wall time per oracle episode (a batch's wall time over its episodes: what ``-j``
episodes at a time sustain, start-up CPU and all) and its ratio to cold ``tools``', requests per
oracle episode, and whether every turn carried token ids (a wrapper adds ids to the oracle's
answers, as a vLLM policy would). ``--tasks N`` takes the first N tasks only.

Modes: ``cold``, one environment per episode, its reset making the sandbox and starting the
scaffold; ``ahead``, ``-j`` environments each playing its share of the tasks in turn, each
episode prepared while the one before it runs (``rollout(prepare_next=)``,
:mod:`palaestra.env.ahead`): the first episode of each environment is cold and counted.

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


async def _episodes(
    name: str, tasks, policy_of, concurrency: int, ahead: bool
) -> tuple[list, float]:
    scaffold = make_scaffold(name)
    shares = [list(range(len(tasks)))[k::concurrency] for k in range(concurrency)]

    async def share(indices: list[int]) -> list:
        played = []
        async with CodeEnv(tasks, scaffold=scaffold) as env:
            for k, i in enumerate(indices):
                later = indices[k + 1 :] if ahead else []
                following = {"options": {"task_index": later[0]}} if later else None
                episode = await rollout(
                    env,
                    policy_of(env.tasks),
                    options={"task_index": i},
                    prepare_next=following,
                )
                played.append((episode, episode.wall_s))
        return played

    start = time.perf_counter()
    done = await asyncio.gather(*(share(indices) for indices in shares if indices))
    wall = time.perf_counter() - start
    aclose = getattr(scaffold, "aclose", None)
    if aclose is not None:
        await aclose()
    return [played for one in done for played in one], wall


async def main(args: argparse.Namespace) -> None:
    tasks = load_tasks(args.env)
    if args.tasks:
        tasks = tasks[: args.tasks]
    names = ["tools", *(n for n in args.harnesses if n in HARNESSES)]
    for name in names[1:]:
        require_installed(HARNESSES[name])
    modes = [("cold", False), ("ahead", True)]
    rows: dict[tuple[str, str], dict[str, list]] = {
        (n, m): {"oracle": [], "nop": [], "wall": [], "batch": []} for n in names for m, _ in modes
    }
    for _ in range(args.rounds):
        for name in names:
            for mode, ahead in modes:
                oracle, batch = await _episodes(
                    name,
                    tasks,
                    lambda t: WithIds(OraclePolicy.from_tasks(t)),
                    args.concurrency,
                    ahead,
                )
                nop, _ = await _episodes(
                    name, tasks, lambda t: NopPolicy(), args.concurrency, ahead
                )
                row = rows[(name, mode)]
                row["oracle"] += [e for e, _ in oracle]
                row["nop"] += [e for e, _ in nop]
                row["wall"] += [s for _, s in oracle]
                row["batch"].append(batch)
    base = statistics.median(rows[("tools", "cold")]["wall"])
    base_ahead = statistics.median(rows[("tools", "ahead")]["wall"])
    base_run = sum(rows[("tools", "cold")]["batch"]) / len(rows[("tools", "cold")]["oracle"])
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{args.env}: {len(tasks)} tasks x {args.rounds} round(s), -j {args.concurrency}, "
        f"{os.cpu_count()} CPUs, load average {load} (1, 5, 15 min) at the end"
    )
    print(
        f"{'scaffold':<14}{'mode':<7}{'oracle':>7}{'nop':>6}{'s/episode':>11}{'x tools':>9}"
        f"{'x ahead':>9}{'run s/ep':>10}{'x tools':>9}{'requests':>10}  token ids  errors"
    )
    for name in names:
        for mode, _ in modes:
            row = rows[(name, mode)]
            oracle, nop, wall = row["oracle"], row["nop"], row["wall"]
            passed = sum(e.reward == 1.0 for e in oracle) / len(oracle)
            nop_passed = sum(e.reward == 1.0 for e in nop) / len(nop)
            median = statistics.median(wall)
            run = sum(row["batch"]) / len(oracle)  # the batch's wall over its episodes
            requests = statistics.mean(len(e.turns) for e in oracle)
            ids = all(t.action.prompt_token_ids is not None for e in oracle for t in e.turns)
            errors = [e.end.error.splitlines()[0] for e in oracle + nop if e.status == "error"]
            print(
                f"{name:<14}{mode:<7}{passed:>7.0%}{nop_passed:>6.0%}{median:>11.2f}"
                f"{median / base:>9.2f}{median / base_ahead:>9.2f}{run:>10.2f}"
                f"{run / base_run:>9.2f}{requests:>10.1f}  {'yes' if ids else 'no':<9}  "
                f"{len(errors)}"
            )
            for error in errors[:2]:
                print(f"    {error[:160]}")
            headline(
                f"harness/{name}/{mode}",
                oracle=passed,
                nop=nop_passed,
                s_per_episode=round(median, 3),
                x_tools=round(median / base, 2),
                x_tools_ahead=round(median / base_ahead, 2),
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
