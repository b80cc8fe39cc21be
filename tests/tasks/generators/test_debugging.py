"""Debugging families, beyond the framework's sample: the workspace really is broken (its own
unit tests fail) and the reference really fixes it (they pass), in every tier; every seed
generates (each injected edit applies exactly once); the hidden test is data for the
declarative harness."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from palaestra import CodeEnv
from palaestra.run import rollout
from palaestra.sandbox.local import LocalBackend
from palaestra.scaffolds import OraclePolicy
from palaestra.tasks import generators as g
from palaestra.tasks import load_task
from palaestra.tasks.generators import write as write_generated
from tests.tasks.family_facts import python_families

DEBUGGING = [f.name for f in g.families("debugging")]
#: Those in Python, whose workspace carries unittest tests; the others' workspaces are checked by
#: tests/tasks/test_language_families.py (nop 0, the reference 1, each wrong solution 0).
PYTHON = python_families("debugging")


def _write(root: Path, files) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())


def test_five_debugging_families():
    assert len(DEBUGGING) >= 5


@pytest.mark.parametrize("family", PYTHON)
@pytest.mark.parametrize("difficulty", [0.1, 0.5, 0.9])
def test_visible_tests_fail_on_workspace_and_pass_with_reference(
    family: str, difficulty: float, tmp_path: Path
):
    task = g.generate(family, 11, difficulty)
    for variant in ("buggy", "fixed"):
        root = tmp_path / variant
        _write(root, task.workspace)
        if variant == "fixed":  # the reference solution's solve.sh, on this copy of /app
            solve = task.solution["solve.sh"].replace("cd /app\n", f"cd {root}\n", 1)
            subprocess.run(["bash", "-c", solve], check=True, timeout=60)
        scratch = tmp_path / f"{variant}-tmp"  # the tests' temporary files, not the host's /tmp
        scratch.mkdir()
        run = subprocess.run(
            [sys.executable, "-m", "unittest", "discover", "-s", "tests", "-q"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "TMPDIR": str(scratch)},
        )
        assert (run.returncode == 0) == (variant == "fixed"), f"{variant}: {run.stderr[-2000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("family", DEBUGGING)
def test_every_seed_generates(family: str):
    bug_sets = set()
    for seed in range(20):
        for difficulty in (0.0, 0.5, 1.0):
            task = g.generate(family, seed, difficulty)
            bug_sets.add(tuple(sorted(n for n in task.wrong_solutions if n.startswith("leaves-"))))
    # The Python families draw from larger bug pools than sales-report-js (5 bugs, 2 to 4 of them).
    assert len(bug_sets) > (10 if family in PYTHON else 6), (
        "bug selections should vary with the seed"
    )


@pytest.mark.parametrize("family", DEBUGGING)
def test_the_hidden_test_is_data(family: str):
    for difficulty in (0.1, 0.5, 0.9):
        tests = g.generate(family, 5, difficulty).tests
        assert {"test_hidden.py", "reference.json"}.isdisjoint(tests)
        assert "palaestra_harness.py" in tests["test.sh"]
        spec = marshal.loads(zlib.decompress(tests["harness.bin"]))
        assert spec["cases"] and all(c["want"] is not None for c in spec["cases"])


async def test_orders_pipeline_checks_its_functions_and_its_command_line(tmp_path: Path):
    """Two parts of one harness test: the parsing functions are called and the command line
    runs; a command line that fails loses the runs' checks and keeps the functions'."""
    task_dir = write_generated("orders-pipeline", 3, 0.0, tmp_path / "task")
    spec = marshal.loads(zlib.decompress((task_dir / "tests" / "harness.bin").read_bytes()))
    pkg = spec["answer"]["argv"][3]
    solve = task_dir / "solution" / "solve.sh"
    solve.write_text(solve.read_text() + f"echo 'raise SystemExit(3)' > /app/{pkg}/__main__.py\n")
    task = load_task(task_dir)
    async with CodeEnv([task], sandbox=LocalBackend()) as env:
        episode = await rollout(env, OraclePolicy.from_tasks([task]))
    output = episode.end.verifier.output if episode.end.verifier else ""
    assert episode.reward == 0.0, output
    assert "PASS parse_date (" in output and "PASS parse_cents (" in output, output
    assert "ERROR run 0" in output and "ERROR run 1" in output, output
