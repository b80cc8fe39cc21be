"""Tool-env throughput: episodes per second and step latency of ToolEnv, with scripted policies.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_tool_env.py``.

* **Rollouts per family**: ``--episodes`` oracle episodes of each family (tiers mixed), one
  environment, one episode after another: what the environment itself costs per episode
  (building the scenario, checking and running the calls, scoring the final state).
* **Step latency**: a scripted policy making one read call per step (``search_contacts`` on
  ``crm``) for ``--steps`` steps, with 0 and 8 distractor tools declared: p50/p90 of
  ``env.step`` in microseconds (the observation grows each step: the whole conversation).
* **evaluate**: ``palaestra eval``'s path (results store included) over the whole ``tools``
  (450 tasks) and ``games`` (300) presets with the oracle, ``--concurrency`` at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from palaestra.env.registry import load_tasks, make, make_policy
from palaestra.env.tools import pack
from palaestra.llm import LLMResponse, ScriptedPolicy
from palaestra.llm.types import ToolCall
from palaestra.run.evaluate import evaluate
from palaestra.run.metrics import percentile
from palaestra.run.rollout import rollout

sys.path.insert(0, str(Path(__file__).resolve().parent))
from headline import headline  # noqa: E402


async def per_family(episodes: int) -> dict[str, float]:
    rates = {}
    for family, f in pack.FAMILIES.items():
        preset = f"{f.category}/{family}"
        tasks = load_tasks(preset).select(f":0:{episodes}")  # tiers mixed (@ would be too)
        oracle = make_policy("oracle", tasks)
        async with make(preset, tasks=tasks) as env:
            started = time.perf_counter()
            rewards = [
                (await rollout(env, oracle, options={"task_id": t.id})).reward for t in tasks
            ]
            wall = time.perf_counter() - started
        rates[family] = len(tasks) / wall
        print(f"rollouts  {family:>16}: {len(tasks)} episodes in {wall:6.3f}s = "
              f"{rates[family]:8.0f} episodes/s (mean reward {statistics.fmean(rewards):.2f})")  # fmt: skip
    return rates


def lookup(request) -> LLMResponse:
    call = ToolCall(id=f"c{request.metadata['turn']}", name="search_contacts",
                    arguments=json.dumps({"query": "a"}))  # fmt: skip
    return LLMResponse(tool_calls=[call], finish_reason="tool_calls")


async def step_latency(steps: int, distractors: int) -> tuple[float, float]:
    env = make("tools/crm", step_limit=steps, distractors=distractors)
    policy = ScriptedPolicy(lookup)
    times = []
    ts = await env.reset(options={"task_id": "crm-hard-0"})
    while not ts.last():
        action = await policy.complete(ts.observation)
        started = time.perf_counter()
        ts = await env.step(action)
        times.append((time.perf_counter() - started) * 1e6)
    p50, p90 = percentile(times, 0.5), percentile(times, 0.9)
    print(f"step      {distractors} distractors: {len(times)} steps, p50 {p50:7.1f} us, "
          f"p90 {p90:7.1f} us")  # fmt: skip
    return p50, p90


async def through_evaluate(preset: str, concurrency: int) -> float:
    summary = await evaluate(preset, "oracle", concurrency=concurrency)
    print(f"evaluate  {preset:>6}: {summary['episodes']} episodes, pass rate "
          f"{summary['pass_rate']:.0%}, {summary['episodes_per_s']:7.0f} episodes/s "
          f"(concurrency {concurrency})")  # fmt: skip
    return summary["episodes_per_s"]


async def main(args: argparse.Namespace) -> None:
    rates = await per_family(args.episodes)
    p50, _ = await step_latency(args.steps, 0)
    p50_d, _ = await step_latency(args.steps, 8)
    tools = await through_evaluate("tools", args.concurrency)
    games = await through_evaluate("games", args.concurrency)
    headline("tool_env", rollout_eps_min=round(min(rates.values())),
             step_p50_us=round(p50, 1), step_p50_us_8_distractors=round(p50_d, 1),
             eval_eps_tools=round(tools), eval_eps_games=round(games))  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=150, help="oracle episodes a family")
    parser.add_argument("--steps", type=int, default=30, help="steps of the latency episode")
    parser.add_argument("--concurrency", type=int, default=8)
    asyncio.run(main(parser.parse_args()))
