"""Docker backend benchmarks, side by side with the local backend in the same run.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_docker.py``
(needs a Docker engine and the base image: ``sudo scripts/provision-docker.sh``).

1. Create to first exec: ``create()`` plus one ``exec(["true"])``, one sandbox after another,
   for the docker backend (base image; and with a disk quota, ``storage_mb=256``, which the
   storage driver enforces on a provisioned engine) and the local backend (host root, and the
   base image's exported root filesystem), then ``close()``.
2. Exec round trip: ``exec(["true"])`` through the in-container helper (and, for reference,
   through the local backend's helper), against a plain
   ``docker exec <container> true`` (the docker CLI, as most harnesses do it) and the engine's
   exec API through aiodocker (create + start + inspect), in the same container; and one
   ``run`` of a persistent shell session.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiodocker
from headline import headline

from palaestra.sandbox import SandboxBackend, SandboxSpec
from palaestra.sandbox.docker import DEFAULT_IMAGE, DockerBackend, docker_socket, docker_unavailable
from palaestra.sandbox.images import export_rootfs
from palaestra.sandbox.local import LocalBackend


def report(name: str, seconds: list[float]) -> float:
    """Print the figures of ``seconds``; return their p50 in milliseconds (1 decimal)."""
    ms = sorted(s * 1000 for s in seconds)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    print(
        f"{name:<50} n={len(ms):<4} p50 {statistics.median(ms):8.2f} ms   p99 {p99:8.2f} ms"
        f"   mean {statistics.fmean(ms):8.2f} ms"
    )
    return round(statistics.median(ms), 1)


#: A disk quota, which the storage driver must enforce (``--storage-opt size=``).
QUOTA = SandboxSpec(storage_mb=256)


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def starts(backend: SandboxBackend, spec: SandboxSpec, n: int) -> tuple[list, list]:
    await (await backend.create(spec)).close()  # warm up (and reclaim once)
    created, closed = [], []
    for _ in range(n):
        start = time.perf_counter()
        sandbox = await backend.create(spec)
        await sandbox.exec(["true"])
        created.append(time.perf_counter() - start)
        closed.append(await timed(sandbox.close))
    return created, closed


async def docker_cli_exec(container_id: str) -> None:
    proc = await asyncio.create_subprocess_exec("docker", "exec", container_id, "true")
    if await proc.wait() != 0:
        raise RuntimeError("docker exec failed")


async def api_exec(docker: aiodocker.Docker, container_id: str) -> None:
    container = docker.containers.container(container_id)
    execution = await container.exec(["true"], stdout=True, stderr=True)
    async with execution.start(detach=False) as stream:
        while await stream.read_out() is not None:
            pass
    await execution.inspect()


async def main(sandboxes: int, execs: int) -> None:
    if reason := await docker_unavailable():
        print(f"bench_docker: skipped: {reason}")
        headline("docker", skipped=reason)
        return
    rootfs = await export_rootfs(DEFAULT_IMAGE)
    docker_backend = DockerBackend(run_id="bench-docker")
    with tempfile.TemporaryDirectory() as state_dir:
        local = LocalBackend(run_id="bench-local", state_dir=Path(state_dir))
        print(f"create -> first exec, then close; {sandboxes} sandboxes one after another")
        figures = {}
        for key, name, backend, spec in (
            ("docker", "docker (base image)", docker_backend, SandboxSpec()),
            ("docker_quota", "docker (base image, storage_mb=256)", docker_backend, QUOTA),
            ("local", "local (host root)", local, SandboxSpec()),
            ("local_rootfs", "local (base image rootfs)", local, SandboxSpec(rootfs=rootfs.path)),
        ):
            created, closed = await starts(backend, spec, sandboxes)
            figures[f"{key}_create_p50_ms"] = report(f"{name}: create -> first exec", created)
            figures[f"{key}_close_p50_ms"] = report(f"{name}: close", closed)
        async with await local.create(SandboxSpec()) as sandbox:
            local_execs = [await timed(lambda: sandbox.exec(["true"])) for _ in range(execs)]
        await local.aclose()

    print(f"\nexec round trip of `true` in one container, {execs} one after another")
    async with await docker_backend.create(SandboxSpec()) as sandbox:
        assert sandbox.container_id is not None
        cid = sandbox.container_id
        helper = [await timed(lambda: sandbox.exec(["true"])) for _ in range(execs)]
        report("local: exec through the helper (reference)", local_execs)
        figures["docker_exec_p50_ms"] = report("docker: exec through the helper", helper)
        shell = [await timed(lambda: sandbox.exec("true")) for _ in range(execs)]
        report("docker: exec('true') via bash -c (helper)", shell)
        async with sandbox.shell() as sh:
            runs = [await timed(lambda: sh.run("true")) for _ in range(execs)]
        figures["docker_shell_p50_ms"] = report("docker: shell session run('true')", runs)
        cli = [await timed(lambda: docker_cli_exec(cid)) for _ in range(max(execs // 5, 10))]
        report("docker: plain `docker exec` (CLI)", cli)
        async with aiodocker.Docker(url=f"unix://{docker_socket()}") as docker:
            api = [await timed(lambda: api_exec(docker, cid)) for _ in range(max(execs // 5, 10))]
        report("docker: engine exec API (aiodocker)", api)
    await docker_backend.aclose()
    headline("docker", **figures)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sandboxes", type=int, default=30)
    parser.add_argument("--execs", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(main(args.sandboxes, args.execs))
    sys.exit(0)
