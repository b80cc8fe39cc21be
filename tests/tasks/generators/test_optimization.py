"""Optimization families, beyond the framework's sample: the slow program handed to the agent
and the fast reference print the same bytes (and write the same files) on small generated
inputs, in every tier, so "byte-identical to the current program" is a fair requirement."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from palaestra.tasks import generators as g

OPTIMIZATION = [f.name for f in g.families("optimization")]
#: Those in Python (their slow program and reference run here); the others are checked by
#: tests/tasks/test_language_families.py.
PYTHON = [name for name in OPTIMIZATION if not g.generate(name, 0, 0.0).packages]


def _inputs_generator(hidden: str):
    """``make_inputs`` as the hidden test defines it (constants and generator code)."""
    scope: dict = {}
    at = hidden.index("from palaestra_check import")
    start = hidden.index("\n", at)
    if hidden[start - 1] == "(":  # a parenthesized import: its end
        start = hidden.index(")\n", at) + 1
    exec(hidden[start : hidden.index("\nPROGRAM, ARGS, OUT_DIR")], scope)
    return scope["make_inputs"], scope


def _run(source: str, files: dict[str, str], args: list[str], root: Path):
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text)
    (root / "prog.py").write_text(source)
    run = subprocess.run(
        [sys.executable, str(root / "prog.py"), *(str(root / a) for a in args)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = root / "OUT"
    written = {p.name: p.read_bytes() for p in sorted(out.iterdir())} if out.is_dir() else {}
    return run.returncode, run.stdout, written


def test_five_optimization_families():
    assert len(OPTIMIZATION) >= 5


@pytest.mark.parametrize("family", PYTHON)
@pytest.mark.parametrize("difficulty", [0.1, 0.5, 0.9])
def test_slow_program_and_reference_agree(family: str, difficulty: float, tmp_path: Path):
    task = g.generate(family, 4, difficulty)
    ((program, fast),) = json.loads(task.tests["reference.json"]).items()
    slow = task.workspace[program]
    assert slow != fast
    hidden = task.tests["test_hidden.py"]
    make_inputs, scope = _inputs_generator(hidden)
    line = next(x for x in hidden.splitlines() if x.startswith("PROGRAM, ARGS, OUT_DIR = "))
    exec(line, scope)
    args = scope["ARGS"]
    rng = random.Random(difficulty)
    for k, size in enumerate([0, 10, 90]):
        files = make_inputs(rng, size)
        want = _run(fast, files, args, tmp_path / f"fast{k}")
        got = _run(slow, files, args, tmp_path / f"slow{k}")
        assert want[0] == 0 and got == want, f"size {size}: slow and reference differ"


class _BitsOnly(random.Random):
    """A generator whose only draws are ``getrandbits``: its sequence for a seed is the same on
    every Python 3, unlike that of ``choice``, ``randrange`` or ``sample``."""

    def _refuse(self, *args, **kwargs):
        raise AssertionError("make_inputs draws with something else than getrandbits")

    random = choice = choices = randrange = randint = sample = shuffle = uniform = _refuse


#: Families whose large input the checker makes again from its seed (``_bench.DRAWS``).
BULK = ["unindexed-sqlite", "report-string-building", "log-split-io", "shipment-reconcile"]


@pytest.mark.parametrize("family", BULK)
def test_inputs_drawn_with_getrandbits_only(family: str):
    make_inputs, _ = _inputs_generator(g.generate(family, 3, 0.9).tests["test_hidden.py"])
    for size in [0, 1, 10, 300]:
        files = make_inputs(_BitsOnly(size), size)
        assert files == make_inputs(random.Random(size), size)
        assert all(isinstance(text, str) for text in files.values())
