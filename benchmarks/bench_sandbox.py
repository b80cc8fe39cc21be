"""Local sandbox benchmarks: start, exec round trip, close, rootfs reset, idle sandboxes held.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_sandbox.py``
(as root, with bubblewrap). ``--idle 1000`` holds that many sandboxes at once and reports the
memory each costs.

0. Baselines, interleaved: a bare ``bwrap ... true`` (namespaces alone: the floor of a sandbox
   whose pid 1 is the C helper) and ``bwrap ... python3 -I -S -B -c pass`` with the helper's
   own runtime (the bundle of :mod:`palaestra.sandbox.helper_runtime`, started through its own
   loader: the floor with the Python helper), on this machine under its current load.
1. Create to first exec: ``create()`` plus one ``exec(["true"])``, one sandbox after another,
   with the default spec (cgroup with the default pids limit), the C helper and the Python
   helper alternating (``$PALAESTRA_HELPER``: before and after in one run); then with memory,
   cpu and storage limits (the default helper). Then the same from a warm pool (``LocalBackend(warm=N)``, ``--warm``) used as RL
   uses it: each sandbox is held for an "episode" of ``--hold-ms`` before it is closed, which
   gives the pool time to refill; the line says how many creates the pool served.
2. Exec round trip in one sandbox: ``exec(["true"])`` (the helper spawns ``true`` directly) and
   ``exec("true")`` (through ``bash -c``), one after another; then 10 at a time; and one
   ``run`` of a persistent shell session.
3. Close: ``close()``, which returns once every process in it is gone and its cgroups removed.
4. Reset on a root filesystem: ``close()`` of a sandbox on a rootfs directory, then
   ``create()`` of a fresh one (new writable overlay) and its first exec.
5. ``--idle N``: N sandboxes created 50 at a time and held open, then one exec in each; the
   memory they cost is the sum of the proportional set size (PSS, from
   ``/proc/<pid>/smaps_rollup``) of their bwrap and helper processes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from headline import headline

from palaestra.sandbox import SandboxSpec
from palaestra.sandbox.helper_runtime import (
    HELPER_DIR_IN_SANDBOX,
    helper_kind,
    helper_python,
    helper_runtime,
)
from palaestra.sandbox.local import LocalBackend, LocalSandbox

ROOT = Path(__file__).resolve().parents[1]


def percentiles(seconds: list[float]) -> tuple[float, float]:
    """(p50, p99) in milliseconds."""
    ms = sorted(s * 1000 for s in seconds)
    return statistics.median(ms), ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]


def report(name: str, seconds: list[float]) -> float:
    """Print the figures of ``seconds``; return their p50 in milliseconds (2 decimals)."""
    p50, p99 = percentiles(seconds)
    print(
        f"{name:<44} n={len(seconds):<5} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms"
        f"   mean {statistics.fmean(seconds) * 1000:7.2f} ms"
    )
    return round(p50, 2)


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


def bare_bwrap_argv(interpreter: tuple[str, ...] = ("/usr/bin/python3",)) -> list[str]:
    argv = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--die-with-parent"]
    argv += ["--ro-bind", str(helper_runtime()), HELPER_DIR_IN_SANDBOX]
    for path in ("/usr", "/etc"):
        argv += ["--ro-bind", path, path]
    for path in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    return [*argv, "--proc", "/proc", "--dev", "/dev", "--", *interpreter, "-I", "-S", "-B"]


async def bare_bwrap(n: int) -> tuple[list[float], list[float]]:
    """Start times of bwrap with ``true`` and with the helper's Python runtime, interleaved."""
    python = bare_bwrap_argv(tuple(helper_python()))
    argvs = ([*python[: python.index("--") + 1], "true"], [*python, "-c", "pass"])
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(n):
        for argv, found in zip(argvs, times, strict=True):
            start = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(*argv)
            await proc.wait()
            found.append(time.perf_counter() - start)
    return times


async def by_helper(
    backend: LocalBackend, spec: SandboxSpec, n: int
) -> dict[str, tuple[list[float], list[float]]]:
    """Start and close times of ``n`` sandboxes with each helper, alternating."""
    times: dict[str, tuple[list[float], list[float]]] = {"c": ([], []), "python": ([], [])}
    saved = os.environ.get("PALAESTRA_HELPER")
    try:
        for _ in range(n):
            for kind, (starts, closes) in times.items():
                os.environ["PALAESTRA_HELPER"] = kind
                more_starts, more_closes = await create_to_first_exec(backend, spec, 1)
                starts += more_starts
                closes += more_closes
    finally:
        if saved is None:
            os.environ.pop("PALAESTRA_HELPER", None)
        else:
            os.environ["PALAESTRA_HELPER"] = saved
    return times


async def create_to_first_exec(
    backend: LocalBackend, spec: SandboxSpec, n: int
) -> tuple[list[float], list[float]]:
    """Start times and close times of ``n`` sandboxes, one after another."""
    starts, closes = [], []
    for _ in range(n):
        start = time.perf_counter()
        sandbox = await backend.create(spec)
        await sandbox.exec(["true"])
        starts.append(time.perf_counter() - start)
        closes.append(await timed(sandbox.close))
    return starts, closes


async def warm_create_to_first_exec(
    backend: LocalBackend, spec: SandboxSpec, n: int, hold_s: float
) -> tuple[list[float], list[float]]:
    """Start times of ``n`` sandboxes from ``backend``'s warm pool, one after another, each
    held for ``hold_s`` (an episode) and closed; and the times of ``create()`` alone."""
    await (await backend.create(spec)).close()  # a miss: the pool of this kind starts filling
    await backend.pool_ready()
    starts, creates = [], []
    for _ in range(n):
        start = time.perf_counter()
        sandbox = await backend.create(spec)
        creates.append(time.perf_counter() - start)
        await sandbox.exec(["true"])
        starts.append(time.perf_counter() - start)
        await asyncio.sleep(hold_s)
        await sandbox.close()
    return starts, creates


async def local_create_p50(n: int = 50) -> float:
    """Create-to-first-exec p50 (ms) of default local sandboxes; for side-by-side figures
    (benchmarks/bench_docker.py prints it next to the docker backend's)."""
    with tempfile.TemporaryDirectory() as state_dir:
        backend = LocalBackend(run_id="bench", state_dir=Path(state_dir))
        await (await backend.create(SandboxSpec())).close()  # warm caches, reclaim once
        starts, _ = await create_to_first_exec(backend, SandboxSpec(), n)
        await backend.aclose()
    return percentiles(starts)[0]


def pss_kib(pid: int) -> int:
    """Proportional set size of ``pid`` in KiB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def helper_pid(sandbox: LocalSandbox) -> int | None:
    try:
        children = Path(f"/proc/{sandbox.bwrap_pid}/task/{sandbox.bwrap_pid}/children")
        return int(children.read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return None


async def idle(backend: LocalBackend, n: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, 8 * n + 256))  # pipes and pidfds: about 5 per sandbox
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    sandboxes: list[LocalSandbox] = []
    failures = 0
    start = time.perf_counter()
    try:
        for i in range(0, n, 50):
            made = await asyncio.gather(
                *(backend.create(SandboxSpec()) for _ in range(min(50, n - i))),
                return_exceptions=True,
            )
            for item in made:
                if isinstance(item, BaseException):
                    failures += 1
                else:
                    sandboxes.append(item)
        elapsed = time.perf_counter() - start
        results = await asyncio.gather(
            *(s.exec(["true"]) for s in sandboxes), return_exceptions=True
        )
        exec_failures = sum(1 for r in results if isinstance(r, BaseException) or not r.ok)
        pids = [s.bwrap_pid for s in sandboxes] + [
            p for s in sandboxes if (p := helper_pid(s)) is not None
        ]
        total_kib = await asyncio.to_thread(lambda: sum(pss_kib(p) for p in pids))
        print(
            f"idle: {len(sandboxes)} of {n} sandboxes held at once ({failures} create failures, "
            f"{exec_failures} exec failures), created in {elapsed:.1f} s"
        )
        if sandboxes:
            print(
                f"idle: memory (PSS of bwrap + helper) {total_kib / 1024:.0f} MiB in all, "
                f"{total_kib / len(sandboxes) / 1024:.2f} MiB per sandbox"
            )
    finally:
        start = time.perf_counter()
        await asyncio.gather(*(s.close() for s in sandboxes))
        print(f"idle: closed {len(sandboxes)} in {time.perf_counter() - start:.1f} s")


async def main(
    sandboxes: int, execs: int, idle_n: int, rootfs: Path | None, warm: int, hold_ms: float
) -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as state_dir:
        backend = LocalBackend(run_id="bench", state_dir=Path(state_dir))
        spec = SandboxSpec()
        await (await backend.create(spec)).close()  # warm caches, reclaim once

        figures = {}
        bare, runtime = await bare_bwrap(sandboxes)
        figures["bwrap_p50_ms"] = report("baseline: bare bwrap + true", bare)
        figures["bwrap_python_p50_ms"] = report("baseline: bwrap + the bundle's python3", runtime)
        times = await by_helper(backend, spec, sandboxes)
        default = helper_kind()
        for kind, (starts, closes) in times.items():
            key = "" if kind == default else f"_{kind}_helper"
            label = f"{kind} helper{', the default' if kind == default else ''}"
            figures[f"create{key}_p50_ms"] = report(f"create -> first exec ({label})", starts)
            figures[f"close{key}_p50_ms"] = report(f"close ({label})", closes)
        limited = SandboxSpec(memory_mb=512, cpus=1, storage_mb=256)
        starts, closes = await create_to_first_exec(backend, limited, sandboxes)
        figures["create_limits_p50_ms"] = report(
            "create -> first exec (memory, cpu, storage)", starts
        )
        report("close (memory, cpu, storage)", closes)
        if warm:
            pooled = LocalBackend(run_id="bench-warm", state_dir=Path(state_dir), warm=warm)
            starts, creates = await warm_create_to_first_exec(
                pooled, spec, sandboxes, hold_ms / 1000
            )
            hits = pooled.pool_hits
            await pooled.aclose()
            report(f"create -> first exec (warm pool, N={warm})", starts)
            report("  of which create() alone", creates)
            print(f"{'':<44} {hits} of {sandboxes} from the pool, each held {hold_ms:g} ms")

        async with await backend.create(spec) as sandbox:
            direct = [await timed(lambda: sandbox.exec(["true"])) for _ in range(execs)]
            figures["exec_p50_ms"] = report("exec(['true']) round trip", direct)
            shell = [await timed(lambda: sandbox.exec("true")) for _ in range(execs)]
            report("exec('true') via bash -c", shell)
            async with sandbox.shell() as sh:
                runs = [await timed(lambda: sh.run("true")) for _ in range(execs // 5)]
            figures["shell_p50_ms"] = report("shell session run('true')", runs)
            start = time.perf_counter()
            for _ in range(execs // 10):
                await asyncio.gather(*(sandbox.exec(["true"]) for _ in range(10)))
            elapsed = time.perf_counter() - start
            print(f"{'exec([true]) 10 concurrent':<44} {execs / elapsed:8.0f} execs/s")

        if rootfs is None:
            sys.path.insert(0, str(ROOT))
            from tests.sandbox.conftest import build_test_rootfs

            rootfs = build_test_rootfs(Path(state_dir) / "rootfs")
        on_rootfs = SandboxSpec(rootfs=rootfs)
        sandbox = await backend.create(on_rootfs)
        resets = []
        for _ in range(sandboxes):
            start = time.perf_counter()
            await sandbox.close()
            sandbox = await backend.create(on_rootfs)
            await sandbox.exec(["true"])
            resets.append(time.perf_counter() - start)
        await sandbox.close()
        report(f"reset on rootfs {rootfs.name}: close+create+exec", resets)

        if idle_n:
            await idle(backend, idle_n)
        await backend.aclose()
    headline("sandbox", **figures)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandboxes", type=int, default=50)
    parser.add_argument("--execs", type=int, default=500)
    parser.add_argument("--idle", type=int, default=0, help="hold this many sandboxes at once")
    parser.add_argument("--warm", type=int, default=2, help="warm pool size (0: skip that line)")
    parser.add_argument(
        "--hold-ms", type=float, default=100.0,
        help="how long each warm-pool sandbox is held (an episode) before it is closed",
    )  # fmt: skip
    parser.add_argument(
        "--rootfs", type=Path, default=None,
        help="a root filesystem directory (default: a small one of hard links to the host's)",
    )  # fmt: skip
    args = parser.parse_args()
    asyncio.run(main(args.sandboxes, args.execs, args.idle, args.rootfs, args.warm, args.hold_ms))
