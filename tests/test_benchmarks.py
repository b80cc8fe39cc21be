"""The benchmark scripts still run against the code: ``make bench`` is not part of the test
suite (figures come from it, not from tests), so an API change that breaks a script would
only show there. Each script must start (``--help``), and the test doubles ``bench_env.py``
builds its per-step figure on must still be complete sandboxes."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from palaestra.sandbox import SandboxSpec

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("bench_*.py"))


def load(name: str) -> ModuleType:
    """A script of benchmarks/ as a module (its siblings, e.g. ``headline``, importable)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def test_run_all_names_existing_scripts() -> None:
    run_all = load("run_all")
    named = {script for _, script, _ in run_all.BENCHMARKS}
    assert named and named <= {p.name for p in SCRIPTS}


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_each_benchmark_starts(script: Path) -> None:
    res = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]


async def test_bench_env_null_sandbox_is_a_complete_sandbox() -> None:
    bench_env = load("bench_env")
    sandbox = await bench_env.NullBackend().create(SandboxSpec())  # abstract methods: TypeError
    assert (await sandbox.exec(["true"])).exit_code == 0
    assert await sandbox.changed_paths(("/usr",)) == []
    await sandbox.close()


def test_bench_learning_refuses_evaluation_tasks_that_occur_in_training() -> None:
    overlapping = ["--eval-first-seed", "0", "--train-tasks", "10", "--eval-tasks", "5"]
    res = subprocess.run(
        [sys.executable, "bench_learning.py", *overlapping],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 2 and res.stdout == ""
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: ") and "evaluation instructions occur among the training" in line


def test_learning_report_intervals_and_rates() -> None:
    report = load("learning_report")
    iv = report.interval([0.2, 0.3, 0.4])
    assert iv["mean"] == 0.3 and iv["low"] == iv["mean"] - 4.303 * 0.1 / 3**0.5
    diff = report.difference([0.5, 0.6, 0.7], [0.2, 0.3, 0.4])
    assert round(diff["mean"], 9) == 0.3 and diff["low"] < 0.3 < diff["high"]
    kinds = {"t1": "f: Copy `…`.", "t2": "f: Move `…`."}
    records = [{"task_id": "t1", "status": s} for s in ("passed", "failed")]
    records += [{"task_id": "t2", "status": s} for s in ("failed", "failed")]
    got = report.rates(records, kinds)
    assert got["pass_rate"] == 0.25 and got["per_kind"] == {"f: Copy `…`.": 0.5, "f: Move `…`.": 0}
    assert got["pass_at_k"] == {1: 0.25, 2: 0.5}
    assert (
        report.kind_of("f", "# T\n\nWrite `7` to `/app/x` 3 times.\n")
        == "f: Write `…` to `…` N times."
    )
    assert report.kind_of("f", "Do it.", ["shell", "kind:delete"]) == "f: delete"
