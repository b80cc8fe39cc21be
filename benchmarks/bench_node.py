"""Per-node capacity figures for docs/scale.md, local and Docker backends in the same run.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_node.py`` (the Docker
half needs ``sudo scripts/provision-docker.sh``; it is skipped, with the reason, without).

1. Start rate: N sandboxes created at once, each to its first exec: sandboxes started per
   second (what a node's engine sustains when a wave of episodes begins).
2. Memory per idle sandbox: ``MemAvailable`` drop with N sandboxes open (base image; the local
   backend on its exported root filesystem), divided by N. Includes the helper, bubblewrap or
   the container's shim and cgroup: what a node pays per sandbox before the agent runs anything.
   Other work on the machine moves ``MemAvailable`` too: there the figure is noisy (it can even
   come out negative); run it on a quiet node.
3. Oracle episodes on a task set (default: the starter pack) at one concurrency: episodes/s, and CPU seconds per
   episode of this process and the sandboxes it waits for (local backend only: Docker's
   processes are the engine's children, not ours).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
from pathlib import Path

from headline import headline

from palaestra.env.registry import load_tasks
from palaestra.run import evaluate
from palaestra.sandbox import Sandbox, SandboxBackend, SandboxSpec
from palaestra.sandbox.docker import DEFAULT_IMAGE, DockerBackend, docker_unavailable
from palaestra.sandbox.images import export_rootfs
from palaestra.sandbox.local import LocalBackend


def mem_available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


async def started(backend: SandboxBackend, spec: SandboxSpec) -> Sandbox:
    sandbox = await backend.create(spec)
    await sandbox.exec("true")
    return sandbox


async def per_sandbox(backend: SandboxBackend, spec: SandboxSpec, n: int) -> tuple[float, float]:
    """Sandboxes started per second with ``n`` started at once, and MiB per idle sandbox."""
    await (await backend.create(spec)).close()  # warm up
    await asyncio.sleep(1)
    before, start = mem_available_mib(), time.perf_counter()
    sandboxes = await asyncio.gather(*(started(backend, spec) for _ in range(n)))
    rate = n / (time.perf_counter() - start)
    await asyncio.sleep(1)
    after = mem_available_mib()
    await asyncio.gather(*(s.close() for s in sandboxes))
    return rate, (before - after) / n


def print_per_sandbox(name: str, n: int, figures: tuple[float, float]) -> None:
    print(
        f"{name}, {n} sandboxes at once: {figures[0]:.1f} started/s, {figures[1]:.1f} MiB each idle"
    )


def cpu_s() -> float:
    own, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def episodes(env: str, sandbox: str, concurrency: int, attempts: int) -> float:
    n = len(load_tasks(env)) * attempts
    cpu, start = cpu_s(), time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        summary = await evaluate(
            env, "oracle", attempts=attempts, concurrency=concurrency, sandbox=sandbox, out_dir=out
        )
    wall, cpu = time.perf_counter() - start, cpu_s() - cpu
    cpu_note = f", {cpu / n:.2f} CPU s/episode" if sandbox == "local" else ""
    print(
        f"oracle, {sandbox}, {n} episodes at concurrency {concurrency}: "
        f"{n / wall:.2f} episodes/s, pass rate {summary['pass_rate']:.0%}{cpu_note}"
    )
    return n / wall


async def main(args: argparse.Namespace) -> None:
    docker_reason = await docker_unavailable()
    rootfs = None if docker_reason else await export_rootfs(DEFAULT_IMAGE)
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as state_dir:
        local = LocalBackend(run_id="bench-node", state_dir=Path(state_dir))
        spec = SandboxSpec(rootfs=rootfs.path) if rootfs else SandboxSpec()
        rate, mib = await per_sandbox(local, spec, args.sandboxes)
        print_per_sandbox("local", args.sandboxes, (rate, mib))
        figures |= {"local_starts_per_s": round(rate, 1), "local_mib": round(mib, 1)}
        await local.aclose()
    if docker_reason:
        print(f"docker: skipped: {docker_reason}")
    else:
        docker = DockerBackend(run_id="bench-node")
        rate, mib = await per_sandbox(docker, SandboxSpec(), args.sandboxes)
        print_per_sandbox("docker", args.sandboxes, (rate, mib))
        figures |= {"docker_starts_per_s": round(rate, 1), "docker_mib": round(mib, 1)}
        await docker.aclose()
    for sandbox in ("local",) if docker_reason else ("local", "docker"):
        rate = await episodes(args.env, sandbox, args.concurrency, args.attempts)
        figures[f"{sandbox}_episodes_per_s"] = round(rate, 2)
    headline("node", **figures)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="starter", help="env id (a preset or a task directory)")
    parser.add_argument("--sandboxes", type=int, default=20, help="sandboxes open at once")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--attempts", type=int, default=1)
    asyncio.run(main(parser.parse_args()))
