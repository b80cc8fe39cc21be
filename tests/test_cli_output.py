"""Output sized to the work: `palaestra eval` prints a short summary (the tables with
--verbose), its live line fits the terminal, and tables that hold ids never cut them."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

from rich.console import Console

from palaestra.cli_progress import fitted_line

CLI = [sys.executable, "-m", "palaestra.cli"]
CLOCK = re.compile(r"\d+:\d\d:\d\d")


def _cli(*args: str, columns: int = 200, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_eval_prints_a_short_summary_and_a_whole_progress_line_at_80_columns(tmp_path):
    out = tmp_path / "run"
    proc = _cli("eval", "starter:0:3", "-p", "oracle", "-k", "2", "-o", str(out), columns=80)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) <= 4, proc.stdout  # 75 lines of tables before
    first = lines[0]
    assert first.startswith("starter:0:3 / oracle: passed 6/6 (100.0%) · pass@2 100.0%")
    assert "errors 0" in first and "cost unknown" in first and re.search(r" \d+\.\d s", first)
    assert f"results: {out}/results.db, {out}/summary.json" in lines  # one line: copyable
    assert "--verbose" in proc.stdout and f"palaestra report {out}" in proc.stdout
    assert "By category" not in proc.stdout
    # the live line (stderr) keeps its counts, numbers and clock whole at 80 columns
    live = [line for line in proc.stderr.splitlines() if "6/6" in line]
    assert live, proc.stderr
    assert "6/6 pass 100.0% · errors 0 · cost unknown" in live[-1] and CLOCK.search(live[-1])
    assert "…" not in proc.stderr and all(len(line) <= 80 for line in live), live


def test_the_live_line_fits_every_width_and_drops_the_least_first():
    clauses = ["pass 55.6%", "errors 2", "$0.0123 (+3 unknown)", "0.73 ep/s"]
    drawn = {}
    for width in range(36, 201, 4):
        buffer = io.StringIO()
        console = Console(file=buffer, width=width, color_system=None)
        console.print(fitted_line("starter / openai:gpt-4o-mini", 10, 18, clauses, 25.0, width))
        text = buffer.getvalue().rstrip("\n")
        assert "\n" not in text and len(text) <= width and "…" not in text, (width, text)
        assert "10/18" in text and "0:00:25" in text and "pass 55.6%" in text, (width, text)
        drawn[width] = text
    assert "ep/s" not in drawn[36] and "starter" not in drawn[80] and "━" in drawn[100]
    assert drawn[200].startswith("starter / openai:gpt-4o-mini ━") and "0.73 ep/s" in drawn[200]
