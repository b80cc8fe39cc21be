"""Generated tasks ship the bytecode of their hidden tests (``base.write_bytecode``): the
checker in the sandbox imports it, and runs the script from it through the launcher, instead of
compiling the source at every verification; bytecode that does not match its source byte for
byte is never run, and the checker's ``assert`` statements survive whatever the flags of the
interpreter that compiled it."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from palaestra.env.registry import load_tasks
from palaestra.sandbox import SandboxSpec
from palaestra.sandbox.local import LocalBackend
from palaestra.tasks.generators.base import CHECK_RUNTIME

SRC = Path(__file__).resolve().parents[2] / "src"

PROBE = """\
import palaestra_check
print("probe ran")
assert __name__ != "__main__", "asserts kept"
"""

COMPILE = "import sys; from pathlib import Path; from palaestra.tasks.generators.base import write_bytecode; write_bytecode(Path(sys.argv[1]))"  # noqa: E501


def _run_in_sandbox(tests: Path) -> tuple[str, list[tuple[str, str, str]]]:
    """The sandbox's cache tag, and the launcher's (stdout, stderr with -v, exit) on ``tests``
    as it is, then with the probe's source edited after its bytecode was written."""

    async def run() -> tuple[str, list[tuple[str, str, str]]]:
        backend = LocalBackend()
        try:
            async with await backend.create(SandboxSpec()) as sandbox:
                tag = await sandbox.exec(
                    ["python3", "-c", "import sys; print(sys.implementation.cache_tag)"]
                )
                runs = []
                for edit in (False, True):
                    if edit:
                        await sandbox.exec(
                            ["sed", "-i", "s/probe ran/probe edited/", "probe.py"], cwd="/tmp/rt"
                        )
                    else:
                        await sandbox.upload(tests, "/tmp/rt")
                    launch = [
                        "python3",
                        "-v",
                        "-E",
                        "-s",
                        "-S",
                        "-B",
                        "/tmp/rt/palaestra_launch.py",
                        "/tmp/rt/probe.py",
                    ]
                    res = await sandbox.exec(launch, cwd="/tmp/rt", timeout=120)
                    runs.append((res.stdout, res.stderr, str(res.exit_code)))
                return tag.stdout.strip(), runs
        finally:
            await backend.aclose()

    return asyncio.run(run())


def test_the_sandbox_runs_the_shipped_bytecode_and_never_a_stale_one(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    for path in CHECK_RUNTIME:
        shutil.copy(path, tests / path.name)
    (tests / "probe.py").write_text(PROBE)
    # compiled by an interpreter run with -O, which would strip asserts from what it compiles
    subprocess.run(
        [sys.executable, "-O", "-c", COMPILE, str(tests)], check=True, env={"PYTHONPATH": str(SRC)}
    )
    tag = sys.implementation.cache_tag
    names = sorted(p.stem for p in tests.glob("*.py"))
    assert sorted(p.name for p in (tests / "__pycache__").iterdir()) == [
        f"{name}.{tag}.pyc" for name in names
    ]
    sandbox_tag, (first, edited) = _run_in_sandbox(tests)
    if sandbox_tag != tag:
        pytest.skip(f"the sandbox's python is {sandbox_tag}, bytecode is written for {tag}")

    stdout, stderr, code = first
    assert stdout == "probe ran\n" and "AssertionError: asserts kept" in stderr, first
    assert code == "1"
    for name in ("palaestra_fork", "palaestra_check", "probe"):  # imported, and the script
        assert f"code object from '/tmp/rt/__pycache__/{name}.{tag}.pyc'" in stderr, name

    stdout, stderr, code = edited  # its bytecode no longer matches: the source runs
    assert stdout == "probe edited\n" and "AssertionError: asserts kept" in stderr, edited
    assert f"code object from '/tmp/rt/__pycache__/probe.{tag}.pyc'" not in stderr
    assert "code object from '/tmp/rt/__pycache__/palaestra_check" in stderr  # still matches


def test_generated_tasks_ship_bytecode_for_every_test_module() -> None:
    task = load_tasks("gen/shell-warmup:0:1")[0]
    tests = Path(task.path) / "tests"
    tag = sys.implementation.cache_tag
    assert {f"{p.stem}.{tag}.pyc" for p in tests.glob("*.py")} == {
        p.name for p in (tests / "__pycache__").iterdir()
    }
