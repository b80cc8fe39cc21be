"""The benchmark scripts still run against the code: ``make bench`` is not part of the test
suite (figures come from it, not from tests), so an API change that breaks a script would
only show there. Each script must start (``--help``), and the test doubles ``bench_env.py``
builds its per-step figure on must still be complete sandboxes."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from palaestra.sandbox import SandboxSpec

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("bench_*.py"))


def test_run_all_names_existing_scripts() -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("run_all", BENCHMARKS / "run_all.py")
        assert spec is not None and spec.loader is not None
        run_all = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(run_all)
    finally:
        sys.path.remove(str(BENCHMARKS))
    named = {script for _, script, _ in run_all.BENCHMARKS}
    assert named and named <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_each_benchmark_starts(script: Path) -> None:
    res = subprocess.run([sys.executable, str(script), "--help"], cwd=BENCHMARKS,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]


async def test_bench_env_null_sandbox_is_a_complete_sandbox() -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("bench_env", BENCHMARKS / "bench_env.py")
        assert spec is not None and spec.loader is not None
        bench_env = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench_env)
    finally:
        sys.path.remove(str(BENCHMARKS))
    sandbox = await bench_env.NullBackend().create(SandboxSpec())  # abstract methods: TypeError
    assert (await sandbox.exec(["true"])).exit_code == 0
    assert await sandbox.changed_paths(("/usr",)) == []
    await sandbox.close()
