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


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_each_benchmark_starts(script: Path) -> None:
    res = subprocess.run([sys.executable, str(script), "--help"], cwd=BENCHMARKS,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]


async def test_bench_env_null_sandbox_is_a_complete_sandbox() -> None:
    bench_env = load("bench_env")
    sandbox = await bench_env.NullBackend().create(SandboxSpec())  # abstract methods: TypeError
    assert (await sandbox.exec(["true"])).exit_code == 0
    assert await sandbox.changed_paths(("/usr",)) == []
    await sandbox.close()
