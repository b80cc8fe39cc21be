"""Codex as a harness on the starter pack, against the built-in ``tools`` scaffold in the same run.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_codex.py`` (installs
``@openai/codex`` 0.171.0 with npm on first use).

Per scaffold and policy (``oracle``, ``nop``): the pass rate, the median and mean wall time
of one episode (sandbox start, the harness, the verifier: episodes run one at a time), and the
LLM requests per episode. The policies are wrapped so that every response carries token ids
(a toy template's bytes of the request's messages and of the answer), and each episode's
turns go through ``to_trajectories(on_break="error")``: "ids" says whether every turn's ids
were captured and make one token-exact sequence.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import palaestra
from palaestra.llm import LLMRequest, LLMResponse
from palaestra.rl.trajectory import TrajectoryError, to_trajectories
from palaestra.run import rollout
from palaestra.scaffolds import NopPolicy, OraclePolicy, make_scaffold
from palaestra.scaffolds.codex import install_codex


def _render(message: dict) -> str:
    calls = "".join(
        f"<{c['id']} {c['function']['name']}>{c['function']['arguments']}"
        for c in message.get("tool_calls") or ()
    )
    content = json.dumps(message.get("content"))
    return f"<{message['role']}>{message.get('reasoning_content') or ''}|{content}{calls}</>"


class WithIds:
    """``policy``'s answers with token ids: the toy template's bytes."""

    def __init__(self, policy) -> None:
        self.policy = policy

    async def complete(self, request: LLMRequest) -> LLMResponse:
        response = await self.policy.complete(request)
        prompt = "".join(_render(m) for m in request.messages).encode()
        completion = _render(response.to_message()).encode()
        ids = {"prompt_token_ids": list(prompt), "completion_token_ids": list(completion)}
        return response.model_copy(update=ids)


async def _run(scaffold: str, selector: str) -> dict[str, dict[str, float | str]]:
    rows: dict[str, dict[str, float | str]] = {}
    async with palaestra.make(f"starter{selector}", scaffold=make_scaffold(scaffold)) as env:
        policies = {"oracle": OraclePolicy.from_tasks(env.tasks), "nop": NopPolicy()}
        for name, policy in policies.items():
            walls, requests, rewards, exact = [], [], [], True
            for i in range(len(env.tasks)):
                start = time.perf_counter()
                episode = await rollout(env, WithIds(policy), options={"task_index": i})
                walls.append(time.perf_counter() - start)
                requests.append(len(episode.turns))
                rewards.append(episode.reward or 0.0)
                try:
                    exact &= not to_trajectories(episode, on_break="error").breaks
                except TrajectoryError:
                    exact = False
            rows[name] = {
                "pass": sum(r == 1.0 for r in rewards) / len(rewards),
                "median_s": statistics.median(walls),
                "mean_s": statistics.fmean(walls),
                "requests": statistics.fmean(requests),
                "ids": "exact" if exact else "broken",
            }
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="", help="a starter selector, e.g. ':0:6' (all)")
    args = parser.parse_args()
    await asyncio.to_thread(install_codex)
    header = ("scaffold", "policy", "pass", "median s", "mean s", "requests")
    print("{:<8} {:<7} {:>6} {:>9} {:>7} {:>8}  ids".format(*header))
    results = {s: await _run(s, args.tasks) for s in ("tools", "codex")}
    for scaffold, rows in results.items():
        for policy, r in rows.items():
            print(
                f"{scaffold:<8} {policy:<7} {r['pass']:>6.1%} {r['median_s']:>9.2f} "
                f"{r['mean_s']:>7.2f} {r['requests']:>8.1f}  {r['ids']}"
            )
    ratio = results["codex"]["oracle"]["median_s"] / results["tools"]["oracle"]["median_s"]
    print(f"codex / tools, oracle median wall time per episode: {ratio:.1f}x")


if __name__ == "__main__":
    asyncio.run(main())
