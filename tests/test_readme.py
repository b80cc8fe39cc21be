"""The newcomer test (scripts/newcomer.py): the README's commands, in order, on a fresh clone.

The full run clones the repository, runs `make demo` there for real (a fresh venv: about a
minute of installing, then the two starter evals) and the README's demo commands; for the
commands that need the full set-up it reuses the venv running this test (torch and the dev
extra take many minutes to install), with PYTHONPATH at the clone's src/. Commands marked
`skip` (a model server, the test suite itself) are reported, not run."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "newcomer.py"

_spec = importlib.util.spec_from_file_location("newcomer", SCRIPT)
assert _spec and _spec.loader
newcomer = importlib.util.module_from_spec(_spec)
sys.modules["newcomer"] = newcomer
_spec.loader.exec_module(newcomer)


def test_every_command_block_of_the_readme_is_marked() -> None:
    commands = newcomer.parse_readme((ROOT / "README.md").read_text())
    modes = {command.mode for command in commands}
    assert modes == {"demo", "setup", "skip"}
    assert commands[0].text == "make demo" and commands[0].prints == ["100.0%", "0.0%"]
    assert all(command.reason for command in commands if command.mode == "skip")


def test_an_unmarked_block_is_refused_with_its_line() -> None:
    text = "# x\n\n<!-- newcomer: demo -->\n```bash\ntrue\n```\n\ntext\n\n```bash\nls\n```\n"
    with pytest.raises(newcomer.ReadmeError, match=r"README.md:10: a ```bash block without"):
        newcomer.parse_readme(text)


def test_commands_carry_their_expectations() -> None:
    text = (
        "<!-- newcomer: setup -->\n```bash\n. .venv/bin/activate\n"
        'palaestra eval x \\\n  --json  # a "#" inside; exits 2: prints "one", then "two"\n'
        "# a comment line\n```\n\n<!-- newcomer: skip: needs a GPU -->\n```python\nprint(1)\n```\n"
    )
    first, second, third = newcomer.parse_readme(text)
    assert (first.text, first.mode, first.line) == (". .venv/bin/activate", "setup", 3)
    assert second.text == "palaestra eval x    --json" and second.line == 4
    assert (second.exit_code, second.prints) == (2, ["one", "two"])
    assert (third.lang, third.mode, third.reason, third.text) == (
        "python",
        "skip",
        "needs a GPU",
        "print(1)",
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_readme_runs_as_written_on_a_fresh_clone(tmp_path: Path) -> None:
    report = tmp_path / "newcomer.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--setup", "reuse", "--report", str(report)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    results = json.loads(report.read_text())
    failed = [r for r in results if r["status"] == "failed"]
    assert proc.returncode == 0 and failed == [], proc.stdout[-6000:] + proc.stderr[-2000:]
    ran = [r["command"] for r in results if r["status"] == "ok"]
    assert ran[0] == "make demo" and len(ran) >= 8
    assert any(r["mode"] == "setup" for r in results if r["status"] == "ok")
