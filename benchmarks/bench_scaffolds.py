"""Scaffold benchmarks: what one step and one reset cost per scaffold on the local sandbox.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_scaffolds.py``.

An instant policy answers every observation with a trivial action; we time ``env.step`` (the
policy's time is nil) and ``env.reset`` (sandbox start, plus for ``terminus`` the tmux session
and its first prompt):

* ``bash``: a ```` ```bash true``` ```` block;
* ``tools/bash``: a ``bash`` tool call running ``true``; ``tools/view``: ``view`` of a 400-line
  file; ``tools/edit``: an exact-string ``edit`` of it;
* ``terminus``: keystrokes ``true\\n`` with duration 0 (send-keys, then the history capture and
  diff; the waits a policy asks for come on top).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from headline import headline

from palaestra import CodeEnv
from palaestra.llm import LLMResponse
from palaestra.llm.types import ToolCall
from palaestra.scaffolds import BashScaffold, TerminusScaffold, ToolsScaffold
from palaestra.tasks.source import TaskSet


def _call(name: str, **args: object) -> LLMResponse:
    return LLMResponse(tool_calls=[ToolCall(id="c", name=name, arguments=json.dumps(args))])


def _edit(i: int) -> LLMResponse:
    return _call("edit", path="data.txt", old_str=f"line {i}\n", new_str=f"LINE {i}\n")


CASES = {
    "bash": (BashScaffold, lambda i: LLMResponse(content="```bash\ntrue\n```")),
    "tools/bash": (ToolsScaffold, lambda i: _call("bash", command="true")),
    "tools/view": (ToolsScaffold, lambda i: _call("view", path="data.txt")),
    "tools/edit": (ToolsScaffold, _edit),
    "terminus": (
        TerminusScaffold,
        lambda i: LLMResponse(
            content=json.dumps(
                {"analysis": "", "plan": "", "commands": [{"keystrokes": "true\n", "duration": 0}]}
            )
        ),
    ),
}


def _task(root: Path) -> Path:
    task = root / "bench-task"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "task.toml").write_text('version = "1.0"\n')
    (task / "instruction.md").write_text("Benchmark task.\n")
    (task / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY data.txt /app/data.txt\n"
    )
    (task / "environment" / "data.txt").write_text("".join(f"line {i}\n" for i in range(400)))
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n")
    return task


async def measure(task_dir: Path, case: str, steps: int, episodes: int) -> tuple[list, list]:
    scaffold_cls, action = CASES[case]
    step_s: list[float] = []
    reset_s: list[float] = []
    async with CodeEnv(
        TaskSet.from_dir(task_dir.parent),
        scaffold=scaffold_cls(step_limit=steps),
        verify_on_truncation=False,
    ) as env:
        for _ in range(episodes):
            t = time.perf_counter()
            ts = await env.reset()
            reset_s.append(time.perf_counter() - t)
            i = 0
            while not ts.last():
                t = time.perf_counter()
                ts = await env.step(action(i))
                if ts.mid():  # the LAST step also closes the sandbox: not a per-step cost
                    step_s.append(time.perf_counter() - t)
                i += 1
    return step_s, reset_s


def _ms(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return 1000 * ordered[min(int(q * len(ordered)), len(ordered) - 1)]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="steps per episode")
    parser.add_argument("--episodes", type=int, default=5, help="episodes per scaffold")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        task = _task(Path(tmp))
        print(f"{'scaffold':<12} {'step p50':>9} {'step p99':>9} {'reset p50':>10}  (ms)")
        figures = {}
        for case in CASES:
            steps, resets = await measure(task, case, args.steps, args.episodes)
            figures[f"{case.replace('/', '_')}_step_p50_ms"] = round(_ms(steps, 0.5), 2)
            print(
                f"{case:<12} {_ms(steps, 0.5):9.2f} {_ms(steps, 0.99):9.2f} "
                f"{statistics.median(resets) * 1000:10.1f}"
            )
    headline("scaffolds", **figures)


if __name__ == "__main__":
    asyncio.run(main())
