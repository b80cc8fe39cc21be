"""Snapshot and fork latency, local and Docker.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_snapshot.py``
(as root, with bubblewrap; the Docker half needs an engine and the base image:
``sudo scripts/provision-docker.sh``, else it is left out, saying why).

For each backend (``--backends``):

1. Sandbox level, on a sandbox whose workdir holds ``--files`` files of ``--file-kb`` KiB:
   ``create()`` of a fresh sandbox to its first exec (the baseline), ``snapshot()`` (local: freeze, copy of the writable directories, thaw; Docker: ``docker
   commit``), ``restore()`` to the restored sandbox's first exec, and ``release()``, one after
   another, ``-n`` times.
2. Fork: ``restore()`` of one snapshot ``k`` times at once (``--fork``), the wall time until all
   ``k`` answered an exec.
3. Episode level: ``CodeEnv.snapshot()`` after one step of the bash scaffold on a one-file task,
   and ``CodeEnv.fork(snapshot, k)`` to the ``k`` FIRST time steps.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from headline import headline

from palaestra.env.code_env import CodeEnv
from palaestra.sandbox import SandboxBackend, SandboxSpec, make_backend
from palaestra.sandbox.docker import docker_unavailable

TASK_TOML = '[metadata]\ndifficulty = "easy"\ncategory = "testing"\n\n[agent]\ntimeout_sec = 600\n'


def report(name: str, seconds: list[float]) -> float:
    """Print the figures of ``seconds``; return their p50 in milliseconds (1 decimal)."""
    ms = sorted(s * 1000 for s in seconds)
    print(f"{name:<46} n={len(ms):<3} p50 {statistics.median(ms):8.1f} ms   max {ms[-1]:8.1f} ms")
    return round(statistics.median(ms), 1)


async def sandbox_level(
    backend: SandboxBackend, n: int, files: int, file_kb: int, forks: list[int]
) -> dict[str, float]:
    figures: dict[str, float] = {}
    spec = SandboxSpec(workdir="/app", writable_dirs=("/tmp", "/logs"))
    async with await backend.create(spec) as sandbox:
        fill = f"for i in $(seq {files}); do head -c {file_kb * 1024} /dev/urandom > f$i; done"
        await sandbox.exec(fill, cwd="/app", timeout=300)
        took: dict[str, list[float]] = {"create": [], "snapshot": [], "restore": [], "release": []}
        for _ in range(n):
            start = time.perf_counter()  # the baseline: a fresh sandbox to its first exec
            async with await backend.create(spec) as fresh:
                await fresh.exec(["true"])
                took["create"].append(time.perf_counter() - start)
            start = time.perf_counter()
            snapshot = await sandbox.snapshot()
            took["snapshot"].append(time.perf_counter() - start)
            start = time.perf_counter()
            restored = await backend.restore(snapshot)
            await restored.exec(["true"])
            took["restore"].append(time.perf_counter() - start)
            await restored.close()
            start = time.perf_counter()
            await snapshot.release()
            took["release"].append(time.perf_counter() - start)
        size = f"{files} x {file_kb} KiB"
        for what, seconds in took.items():
            figures[f"{what}_p50_ms"] = report(f"{backend.name}: {what} ({size})", seconds)
        async with await sandbox.snapshot() as snapshot:
            for k in forks:
                start = time.perf_counter()
                restored = await asyncio.gather(*(backend.restore(snapshot) for _ in range(k)))
                await asyncio.gather(*(s.exec(["true"]) for s in restored))
                wall = time.perf_counter() - start
                await asyncio.gather(*(s.close() for s in restored))
                figures[f"fork{k}_ms"] = report(f"{backend.name}: restore x{k} at once", [wall])
    return figures


def write_task(root: Path) -> Path:
    task = root / "answer"
    for sub in ("environment", "tests", "solution"):
        (task / sub).mkdir(parents=True)
    (task / "task.toml").write_text(TASK_TOML)
    (task / "instruction.md").write_text("Write 42 to /app/answer.txt.\n")
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "tests" / "test.sh").write_text(
        '#!/bin/bash\n[ "$(cat /app/answer.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt'
        " || echo 0 > /logs/verifier/reward.txt\n"
    )
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\necho 42 > /app/answer.txt\n")
    return task


async def episode_level(backend: SandboxBackend, n: int, forks: list[int]) -> dict[str, float]:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with CodeEnv(write_task(Path(tmp)), sandbox=backend) as env:
            snaps, fork_walls = [], {k: [] for k in forks}
            for _ in range(n):
                await env.reset()
                await env.step("```bash\necho 41 > answer.txt\n```")
                start = time.perf_counter()
                snapshot = await env.snapshot()
                snaps.append(time.perf_counter() - start)
                for k in forks:
                    start = time.perf_counter()
                    pairs = await env.fork(snapshot, k)
                    fork_walls[k].append(time.perf_counter() - start)
                    await asyncio.gather(*(fork.close() for fork, _ in pairs))
                await snapshot.release()
            figures["env_snapshot_p50_ms"] = report(f"{backend.name}: CodeEnv.snapshot()", snaps)
            for k, walls in fork_walls.items():
                figures[f"env_fork{k}_p50_ms"] = report(
                    f"{backend.name}: CodeEnv.fork(snapshot, {k})", walls
                )
    return figures


async def main(args: argparse.Namespace) -> None:
    summary: dict[str, float | str | None] = {}
    for name in args.backends:
        if name == "docker" and (reason := await docker_unavailable()):
            print(f"docker: left out ({reason})")
            continue
        backend = make_backend(name)
        try:
            figures = await sandbox_level(backend, args.n, args.files, args.file_kb, args.fork)
            figures |= await episode_level(backend, args.n, args.fork)
        finally:
            await backend.aclose()
        summary |= {f"{name}_{key}": value for key, value in figures.items()}
    headline("snapshot", **summary)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=5, help="snapshots per figure")
    parser.add_argument("--files", type=int, default=100, help="files in the sandbox's workdir")
    parser.add_argument("--file-kb", type=int, default=64, help="size of each file, KiB")
    parser.add_argument("--fork", type=int, nargs="+", default=[4], help="forks at once")
    parser.add_argument("--backends", nargs="+", default=["local", "docker"])
    sys.exit(asyncio.run(main(parser.parse_args())))
