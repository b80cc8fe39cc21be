"""Fair CPU under load: how long a server takes to start in a sandbox while the machine is busy.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_fair_cpu.py``
(root, bubblewrap; Docker rows need an engine and the base image: ``sudo
scripts/provision-docker.sh``; without one they are left out).

The task is what a Harbor third-party task does before its test: start a small HTTP server
(``python3 -m http.server``) and wait until it answers, within a deadline (Harbor gives it
6 s). The figure is measured inside the sandbox, from the server's launch to its first answer.

It runs at the same moment on the local backend and on Docker, one sandbox each (made before
the load), ``--reps`` times each, under each load in turn, ``--load`` CPU spinners
(``while :; do :; done``) at a time:

- ``local``: one spinning local sandbox each (agents' rollouts on the local backend);
- ``docker``: one spinning container each;
- ``host``: host processes outside any sandbox, in one session (a training process and its
  workers).

Before/after a change to the sandbox's cgroups: run it with ``PYTHONPATH`` pointing at each
tree's ``src``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

from headline import headline

from palaestra.sandbox import Sandbox, SandboxBackend, SandboxSpec
from palaestra.sandbox.local import LocalBackend

#: Harbor's third-party tasks give their server this long to answer.
DEADLINE_S = 6.0
SPIN = "while :; do :; done"
#: Starts the server and prints the seconds until it answers (or "timeout" after 30 s).
SERVER_START = r"""
import socket, subprocess, sys, time
start = time.monotonic()
server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "8765"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    while time.monotonic() - start < 30:
        try:
            with socket.create_connection(("127.0.0.1", 8765), timeout=1) as s:
                s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                if s.recv(12).startswith(b"HTTP/1.0 200"):
                    print(f"{time.monotonic() - start:.3f}")
                    break
        except OSError:
            time.sleep(0.02)
    else:
        print("timeout")
finally:
    server.kill()
    server.wait()
"""


async def server_start(sandbox: Sandbox) -> float:
    """Seconds from the server's launch to its first answer, in ``sandbox`` (inf: none in 30 s)."""
    res = await sandbox.exec(["python3", "-c", SERVER_START], timeout=60)
    out = res.stdout.strip()
    return float(out) if res.ok and out != "timeout" else float("inf")


async def spinning(backend: SandboxBackend, n: int, stack: AsyncExitStack) -> list[asyncio.Task]:
    """``n`` sandboxes of ``backend``, each running one spinner until cancelled."""
    sandboxes = [
        await stack.enter_async_context(await backend.create(SandboxSpec())) for _ in range(n)
    ]
    return [asyncio.ensure_future(s.exec(["sh", "-c", SPIN], timeout=3600)) for s in sandboxes]


def host_spinners(n: int) -> list[subprocess.Popen]:
    """``n`` spinning host processes in one new session (one training job's workers)."""
    leader = subprocess.Popen(
        ["sh", "-c", " & ".join([SPIN.join("()")] * n) + " & wait"], start_new_session=True
    )
    return [leader]


def runnable() -> str:
    """How many tasks of the machine are runnable now (/proc/loadavg)."""
    return Path("/proc/loadavg").read_text().split()[3].split("/")[0]


def stop_host(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        os.killpg(proc.pid, 9)
        proc.wait()


def report(name: str, seconds: list[float]) -> float:
    """Print the figures of ``seconds``; return their p50 in seconds (2 decimals)."""
    p50 = statistics.median(seconds)
    passed = sum(s <= DEADLINE_S for s in seconds)
    shown = " ".join("none" if s == float("inf") else f"{s:.2f}" for s in seconds)
    print(
        f"  {name:<26} p50 {p50:6.2f} s  max {max(seconds):6.2f} s  "
        f"within {DEADLINE_S:g} s: {passed}/{len(seconds)}   [{shown}]"
    )
    return round(p50, 2) if p50 != float("inf") else -1.0


async def main(load: int, reps: int, loads: list[str], docker: bool) -> None:
    figures: dict[str, float | str] = {}
    docker_backend: SandboxBackend | None = None
    if docker:
        from palaestra.sandbox.docker import DockerBackend, docker_unavailable

        if reason := await docker_unavailable():
            print(f"docker rows left out: {reason}")
            loads = [k for k in loads if k != "docker"]
        else:
            docker_backend = DockerBackend(run_id="bench-fair-docker")
    if docker_backend is None:
        loads = [k for k in loads if k != "docker"]
    with tempfile.TemporaryDirectory() as state_dir:
        local = LocalBackend(run_id="bench-fair", state_dir=Path(state_dir))
        async with AsyncExitStack() as stack:
            probes = {"local": await stack.enter_async_context(await local.create(SandboxSpec()))}
            if docker_backend is not None:
                probes["docker"] = await stack.enter_async_context(
                    await docker_backend.create(SandboxSpec())
                )
            print(f"server start, {reps} times per backend, {os.cpu_count()} CPUs")
            print("idle:")
            for name, probe in probes.items():
                times = [await server_start(probe) for _ in range(reps)]
                figures[f"idle_{name}_p50_s"] = report(f"{name} server", times)
            for kind in loads:
                async with AsyncExitStack() as load_stack:
                    spinners: list[asyncio.Task] = []
                    host: list[subprocess.Popen] = []
                    if kind == "host":
                        host = await asyncio.to_thread(host_spinners, load)
                    else:
                        backend = local if kind == "local" else docker_backend
                        assert backend is not None
                        spinners = await spinning(backend, load, load_stack)
                    await asyncio.sleep(3)  # every spinner started and spinning
                    try:
                        print(f"load: {load} {kind} spinners ({runnable()} runnable):")
                        times: dict[str, list[float]] = {name: [] for name in probes}
                        for _ in range(reps):  # alternately: the same moment for both
                            for name, probe in probes.items():
                                times[name].append(await server_start(probe))
                        for name, seconds in times.items():
                            figures[f"{kind}_load_{name}_p50_s"] = report(f"{name} server", seconds)
                    finally:
                        for task in spinners:
                            task.cancel()
                        await asyncio.gather(*spinners, return_exceptions=True)
                        await asyncio.to_thread(stop_host, host)
        await local.aclose()
    if docker_backend is not None:
        await docker_backend.aclose()
    headline("fair_cpu", load=load, **figures)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=int, default=15, help="CPU spinners at a time")
    parser.add_argument("--reps", type=int, default=5, help="server starts per backend and load")
    parser.add_argument(
        "--loads",
        nargs="+",
        choices=["local", "docker", "host"],
        default=["local", "docker", "host"],
    )
    parser.add_argument("--no-docker", action="store_true", help="the local backend only")
    args = parser.parse_args()
    started = time.perf_counter()
    asyncio.run(main(args.load, args.reps, args.loads, not args.no_docker))
    print(f"{time.perf_counter() - started:.0f} s")
    sys.exit(0)
