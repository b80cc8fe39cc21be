"""Run every benchmark with modest settings and print one summary table (``make bench``).

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/run_all.py [--only env
sandbox ...]``. Each script runs to the end in its own process, its output shown as it goes;
the last line it prints that starts with ``BENCH `` (see ``benchmarks/headline.py``) holds its
headline figures as JSON, which the table at the end shows, one row a benchmark, with the
script's wall time. About 10 minutes on 2 cores. A script that fails gets a row saying so, and
the runner exits non-zero.

The peers: when ``benchmarks/peers/results.json`` exists (``benchmarks/peers/run.py`` writes
it; ``--peers`` names another file), the ``vs ARES`` column of the ``env`` row shows ARES's
per-step framework overhead against palaestra's, both measured by that script on the same work
in the same run (its flat keys ``ares_step_overhead_us``, ``palaestra_step_overhead_us`` and
``ratio``), and a last line its other ratios (``docker_ratio``,
``harbor_vs_palaestra_docker``, ``harbor_vs_palaestra_local``). Without the file the column
says ``-``. ``bench_ray.py`` is not run here: it needs a Ray cluster of two nodes (docs/ray.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from headline import PREFIX

HERE = Path(__file__).resolve().parent

#: (name, script, arguments): settings that keep the whole run near 10 minutes on 2 cores.
BENCHMARKS: list[tuple[str, str, list[str]]] = [
    ("env", "bench_env.py", ["--episodes", "5", "--attempts", "1", "--concurrency", "8"]),
    ("scaffolds", "bench_scaffolds.py", ["--steps", "20", "--episodes", "2"]),
    ("sandbox", "bench_sandbox.py", ["--sandboxes", "30", "--execs", "200"]),
    ("isolation_cost", "bench_isolation_cost.py", ["--n", "50"]),
    ("docker", "bench_docker.py", ["--sandboxes", "10", "--execs", "100"]),
    ("fair_cpu", "bench_fair_cpu.py", ["--load", "15", "--reps", "3"]),
    ("snapshot", "bench_snapshot.py", ["-n", "3"]),
    ("trajectory", "bench_trajectory.py", []),
    ("stream", "bench_stream.py", ["--episodes", "64", "--concurrency", "8", "32"]),
    ("async", "bench_async.py", ["--latency", "1", "--concurrency", "1", "8", "--tasks", "16"]),
    ("store", "bench_store.py", ["-n", "500"]),
    ("report", "bench_report.py", ["-n", "2000"]),
    ("proxy", "bench_proxy.py", ["--calls", "100", "--calls-each", "10", "--clients", "httpx"]),
    ("local_policy", "bench_local_policy.py", ["--rounds", "3"]),
    ("generators", "bench_generators.py", []),
    ("verify", "bench_verify.py", ["--per-family", "1"]),
    ("creator", "bench_creator.py", ["--proposals", "8"]),
    ("node", "bench_node.py", ["--sandboxes", "10", "--env", "starter:9:12", "--attempts", "2"]),
    ("tool_env", "bench_tool_env.py", []),
]
PEERS = HERE / "peers" / "results.json"


def run(script: str, args: list[str], timeout: float) -> tuple[int | str, float, dict]:
    """Run one script, echoing its output; (exit code or why not, wall seconds, headline)."""
    started = time.perf_counter()
    figures: dict = {}
    with subprocess.Popen(
        [sys.executable, str(HERE / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    ) as proc:
        assert proc.stdout is not None
        watchdog = threading.Timer(timeout, proc.kill)
        watchdog.start()
        try:
            for line in proc.stdout:
                print(line, end="", flush=True)
                if line.startswith(PREFIX):
                    figures = json.loads(line[len(PREFIX) :])
            rc: int | str = proc.wait()
        finally:
            watchdog.cancel()
    wall = time.perf_counter() - started
    if rc != 0 and wall >= timeout:
        rc = f"killed after {timeout:.0f} s"
    return rc, wall, figures


#: The ratios of ``benchmarks/peers/results.json`` shown on the table's last line.
PEER_RATIOS = ("ratio", "docker_ratio", "harbor_vs_palaestra_docker", "harbor_vs_palaestra_local")


def ares_column(peers: dict | None) -> str:
    """ARES's per-step overhead against palaestra's, as the peers script measured both, or '-'."""
    if peers is None or "ratio" not in peers:
        return "-"
    return (
        f"{peers['ares_step_overhead_us']:.0f} vs {peers['palaestra_step_overhead_us']:.0f} us"
        f" ({peers['ratio']:.1f}x)"
    )


def table(rows: list[tuple[str, int | str, float, dict]], peers: dict | None) -> str:
    lines = [f"{'benchmark':<13} {'wall':>7}  {'vs ARES':<30} figures", "-" * 100]
    for name, rc, wall, figures in rows:
        shown = {k: v for k, v in figures.items() if k != "bench"}
        text = "  ".join(f"{k}={v}" for k, v in shown.items())
        if rc != 0:
            text = f"FAILED ({rc if isinstance(rc, str) else f'exit {rc}'}) {text}"
        ares = ares_column(peers) if name == "env" else ""
        lines.append(f"{name:<13} {wall:6.0f}s  {ares:<30} {text}".rstrip())
    if peers is not None:
        shown = "  ".join(f"{k}={peers[k]:.1f}" for k in PEER_RATIOS if k in peers)
        lines.append(f"peers (benchmarks/peers/run.py, ARES or Harbor / palaestra): {shown}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [name for name, _, _ in BENCHMARKS]
    parser.add_argument("--only", nargs="+", choices=names, help="run only these benchmarks")
    parser.add_argument("--peers", type=Path, default=PEERS, help="the peers' results file")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per benchmark")
    args = parser.parse_args()
    peers = json.loads(args.peers.read_text()) if args.peers.is_file() else None
    rows = []
    for name, script, script_args in BENCHMARKS:
        if args.only and name not in args.only:
            continue
        print(f"\n=== {name}: {script} {' '.join(script_args)}", flush=True)
        rc, wall, figures = run(script, script_args, args.timeout)
        rows.append((name, rc, wall, figures))
    print("\n" + table(rows, peers))
    print(f"total {sum(wall for _, _, wall, _ in rows) / 60:.1f} min")
    return 0 if all(rc == 0 for _, rc, _, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
