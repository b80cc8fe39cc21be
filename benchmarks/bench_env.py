"""Environment benchmarks: per-step framework overhead and oracle episodes per second.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_env.py``.

1. Per-step overhead. An instant policy answers every observation with ``true``; the scaffold
   runs it, the env hands back the next observation. Measured three ways in one run:
   * on a null sandbox whose ``exec`` returns at once: everything palaestra does per step
     (mediated client, scaffold parsing and templating, time steps), nothing else;
   * on the real local sandbox, minus the mean ``exec("true")`` round trip measured alongside;
   * by episode length, on the null sandbox: the p50 of the steps around turn 10, 100 and 1,000
     of ``--long-episodes`` episodes of 1,001 steps, and the ratio turn 1,000 / turn 10 (1.0
     when a step's cost does not grow with the conversation).
2. Episodes per second for ``oracle`` on the starter pack at concurrency 1, 8 and 32.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from headline import headline

from palaestra import CodeEnv
from palaestra.env.registry import load_tasks
from palaestra.llm import LLMResponse
from palaestra.run import evaluate
from palaestra.sandbox import (
    Command,
    ExecResult,
    Sandbox,
    SandboxBackend,
    SandboxSpec,
    default_backend,
)
from palaestra.scaffolds import BashScaffold

TRUE = LLMResponse(content="```bash\ntrue\n```")


class NullSandbox(Sandbox):
    """Does nothing, instantly: isolates palaestra's own per-step cost."""

    def __init__(self, spec: SandboxSpec) -> None:
        self.id, self.spec, self._closed = "null", spec, False

    async def _run(self, command: Command) -> ExecResult:
        return ExecResult("", "", 0)

    async def upload(self, src, dst) -> None: ...
    async def download(self, src, dst) -> None: ...
    async def kill_all(self, *, restart_service: bool = True) -> None: ...

    async def changed_paths(self, under: tuple[str, ...]) -> list[str]:
        return []

    async def close(self) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed


class NullBackend(SandboxBackend):
    name = "null"

    async def create(self, spec: SandboxSpec) -> Sandbox:
        return NullSandbox(spec)


async def per_turn(
    backend: SandboxBackend, env_id: str, steps: int, episodes: int
) -> list[list[float]]:
    """Seconds of each env.step (policy time excluded), one list per episode, indexed by turn."""
    tasks = load_tasks(f"{env_id}:0")
    runs: list[list[float]] = []
    async with CodeEnv(
        tasks, sandbox=backend, scaffold=BashScaffold(step_limit=steps), verify_on_truncation=False
    ) as env:
        for _ in range(episodes):
            samples: list[float] = []
            ts = await env.reset()
            while not ts.last():
                t = time.perf_counter()
                ts = await env.step(TRUE)
                if ts.mid():  # the LAST step also closes the sandbox: not a per-step cost
                    samples.append(time.perf_counter() - t)
            runs.append(samples)
    return runs


async def per_step(backend: SandboxBackend, env_id: str, steps: int, episodes: int) -> list[float]:
    """Seconds per env.step (policy time excluded), over ``episodes`` episodes."""
    return [s for run in await per_turn(backend, env_id, steps, episodes) for s in run]


def around(runs: list[list[float]], turn: int, width: int = 10) -> list[float]:
    """The steps of every run within ``width // 2`` turns of ``turn``."""
    lo = max(0, turn - width // 2)
    return [s for run in runs for s in run[lo : lo + width]]


async def exec_round_trip(backend: SandboxBackend, n: int) -> list[float]:
    async with await backend.create(SandboxSpec()) as sandbox:
        await sandbox.exec("true")
        samples = []
        for _ in range(n):
            t = time.perf_counter()
            await sandbox.exec("true")
            samples.append(time.perf_counter() - t)
    return samples


def pct(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q) - 1] if len(samples) > 1 else samples[0]


def ms(x: float) -> str:
    return f"{1000 * x:.3f} ms"


async def main(args: argparse.Namespace) -> None:
    null = await per_step(NullBackend(), args.env, steps=args.steps, episodes=args.episodes)
    print(
        f"per-step overhead, null sandbox ({len(null)} steps): "
        f"p50 {ms(pct(null, 50))}  p99 {ms(pct(null, 99))}  mean {ms(statistics.fmean(null))}"
    )
    long = await per_turn(NullBackend(), args.env, steps=1001, episodes=args.long_episodes)
    by_turn = {turn: statistics.median(around(long, turn)) for turn in (10, 100, 1000)}
    ratio = by_turn[1000] / by_turn[10]
    print(
        "per-step overhead by episode length, null sandbox: "
        + "  ".join(f"turn {turn:,} p50 {ms(p50)}" for turn, p50 in by_turn.items())
        + f"  ratio 1,000/10 {ratio:.2f}"
    )
    real = await per_step(
        default_backend("local"), args.env, steps=args.steps, episodes=args.episodes
    )
    rtt = await exec_round_trip(default_backend("local"), len(real))
    print(
        f"step on local sandbox: p50 {ms(pct(real, 50))}  p99 {ms(pct(real, 99))}; "
        f"exec('true') alone: p50 {ms(pct(rtt, 50))}  p99 {ms(pct(rtt, 99))}; "
        f"difference of p50s {ms(pct(real, 50) - pct(rtt, 50))}"
    )
    n_tasks = len(load_tasks(args.env))
    rates = {}
    for concurrency in args.concurrency:
        with tempfile.TemporaryDirectory() as out:
            summary = await evaluate(
                args.env,
                "oracle",
                attempts=args.attempts,
                concurrency=concurrency,
                out_dir=Path(out),
            )
        print(
            f"oracle on {args.env} ({n_tasks} tasks x {args.attempts}), concurrency {concurrency}: "
            f"{summary['episodes_per_s']:.2f} episodes/s, pass rate {summary['pass_rate']:.0%}, "
            f"wall {summary['run_wall_s']:.1f} s"
        )
        rates[f"oracle_eps_c{concurrency}"] = round(summary["episodes_per_s"], 2)
    headline(
        "env",
        step_p50_us=round(1e6 * pct(null, 50), 1),
        **{f"turn{turn}_p50_us": round(1e6 * p50, 1) for turn, p50 in by_turn.items()},
        turn1000_over_turn10=round(ratio, 2),
        **rates,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="starter", help="env id (a preset or a task directory)")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--long-episodes", type=int, default=3, help="episodes of 1,001 steps")
    parser.add_argument("--attempts", type=int, default=2)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    asyncio.run(main(parser.parse_args()))
