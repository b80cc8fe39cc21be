"""Environment benchmarks: per-step framework overhead and oracle episodes per second.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_env.py``.

1. Per-step overhead. An instant policy answers every observation with ``true``; the scaffold
   runs it, the env hands back the next observation. Measured two ways in one run:
   * on a null sandbox whose ``exec`` returns at once: everything palaestra does per step
     (mediated client, scaffold parsing and templating, time steps), nothing else;
   * on the real local sandbox, minus the mean ``exec("true")`` round trip measured alongside.
2. Episodes per second for ``oracle`` on the starter pack at concurrency 1, 8 and 32.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

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
    async def kill_all(self) -> None: ...

    async def close(self) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed


class NullBackend(SandboxBackend):
    name = "null"

    async def create(self, spec: SandboxSpec) -> Sandbox:
        return NullSandbox(spec)


async def per_step(backend: SandboxBackend, env_id: str, steps: int, episodes: int) -> list[float]:
    """Seconds per env.step (policy time excluded), over ``episodes`` episodes."""
    tasks = load_tasks(f"{env_id}:0")
    samples: list[float] = []
    async with CodeEnv(
        tasks, sandbox=backend, scaffold=BashScaffold(step_limit=steps), verify_on_truncation=False
    ) as env:
        for _ in range(episodes):
            ts = await env.reset()
            while not ts.last():
                t = time.perf_counter()
                ts = await env.step(TRUE)
                if ts.mid():  # the LAST step also closes the sandbox: not a per-step cost
                    samples.append(time.perf_counter() - t)
    return samples


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
            f"wall {summary['wall_s']:.1f} s"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="starter", help="env id (a preset or a task directory)")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--attempts", type=int, default=2)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    asyncio.run(main(parser.parse_args()))
