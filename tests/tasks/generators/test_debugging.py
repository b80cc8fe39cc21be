"""Debugging families, beyond the framework's sample: the workspace really is broken (its own
unit tests fail) and the reference really fixes it (they pass), in every tier; and every
seed generates (each injected edit applies exactly once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from palaestra.tasks import generators as g

DEBUGGING = [f.name for f in g.families("debugging")]
#: Those in Python, whose workspace carries unittest tests; the others' workspaces are checked by
#: tests/tasks/test_language_families.py (nop 0, the reference 1, each wrong solution 0).
PYTHON = [name for name in DEBUGGING if not g.generate(name, 0, 0.0).packages]


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
    reference = json.loads(task.tests["reference.json"])
    for variant, files in (("buggy", task.workspace), ("fixed", {**task.workspace, **reference})):
        root = tmp_path / variant
        _write(root, files)
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


@pytest.mark.parametrize("family", DEBUGGING)
def test_every_seed_generates(family: str):
    bug_sets = set()
    for seed in range(40):
        for difficulty in (0.0, 0.5, 1.0):
            task = g.generate(family, seed, difficulty)
            bug_sets.add(tuple(sorted(n for n in task.wrong_solutions if n.startswith("leaves-"))))
    # The Python families draw from larger bug pools than sales-report-js (5 bugs, 2 to 4 of them).
    assert len(bug_sets) > (10 if family in PYTHON else 6), (
        "bug selections should vary with the seed"
    )
