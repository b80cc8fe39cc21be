"""Output sized to the work: `palaestra eval` prints a short summary (the tables with
--verbose), its live line fits the terminal; `tasks check` shows its progress and lists its
failures in full; tables that hold ids never cut them; --json wherever a table is printed."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import sys

import pytest
from rich.console import Console
from typer.testing import CliRunner

from palaestra.cli import app
from palaestra.cli_progress import fitted_line
from palaestra.env.registry import list_envs, load_tasks
from palaestra.tasks import generators

CLI = [sys.executable, "-m", "palaestra.cli"]
CLOCK = re.compile(r"\d+:\d\d:\d\d")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def _cli(*args: str, columns: int = 200, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow
def test_eval_prints_a_short_summary_and_a_whole_progress_line_at_80_columns(tmp_path):
    out = tmp_path / "run"
    proc = _cli("eval", "starter:0:3", "-p", "oracle", "-k", "2", "-o", str(out), columns=80)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) <= 4, proc.stdout  # 75 lines of tables before
    first = lines[0]
    assert first.startswith("starter:0:3 / oracle: passed 6/6 (100.0%) · pass@2 100.0%")
    assert "errors 0" in first and "cost $0.0000" in first and re.search(r" \d+\.\d s", first)
    assert f"results: {out}/results.db, {out}/summary.json" in lines  # one line: copyable
    assert "--verbose" in proc.stdout and f"palaestra report {out}" in proc.stdout
    assert "By category" not in proc.stdout
    # the live line (stderr) keeps its counts, numbers and clock whole at 80 columns
    live = [line for line in proc.stderr.splitlines() if "6/6" in line]
    assert live, proc.stderr
    assert "6/6 pass 100.0% · errors 0 · $0.0000" in live[-1] and CLOCK.search(live[-1])
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


def _invoke(*args: str, columns: int = 60):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})


def _column(output: str, index: int, key: int = 0) -> list[str]:
    """The cells of a drawn table's column ``index``, a cell folded over several lines joined;
    a row starts where column ``key`` is not blank."""
    cells: list[str] = []
    for line in output.splitlines():
        if not line.startswith("│"):
            continue
        fields = [f.strip() for f in line.split("│")[1:-1]]
        if fields[key] or not cells:
            cells.append(fields[index])
        else:
            cells[-1] += fields[index]
    return cells


def test_tasks_list_and_envs_keep_ids_whole_and_speak_json():
    """Ids are never cut: on one line when they fit beside every other column at its header's
    width (120 columns), folded over lines, whole, when they do not (60), where no other
    column is squeezed out of sight."""
    ids = [load_tasks("starter").id_at(i) for i in range(18)]
    wide = _invoke("tasks", "list", "starter", "-n", "18", columns=120)
    assert wide.exit_code == 0, wide.output
    assert all(re.search(rf"│ {re.escape(i)} +│", wide.output) for i in ids), wide.output
    listed = _invoke("tasks", "list", "starter", "-n", "18")
    assert listed.exit_code == 0, listed.output
    assert _column(listed.output, 1) == ids and "…" not in listed.output, listed.output
    tiers = [load_tasks("starter").get(i).difficulty for i in ids]
    assert _column(listed.output, 4) == tiers, listed.output
    as_json = json.loads(_invoke("tasks", "list", "starter", "-n", "5", "--json").stdout)
    assert as_json["total"] == 18 and [t["id"] for t in as_json["tasks"]] == ids[:5]
    assert as_json["tasks"][0] == {
        "index": 0,
        "id": ids[0],
        "family": "",
        "category": "algorithms",
        "tier": "easy",
    }

    envs = json.loads(_invoke("envs", "--json").stdout)
    assert {e["id"]: e["tasks"] for e in envs} == {s.id: len(s.tasks()) for s in list_envs()}
    shown = _invoke("envs", columns=70)
    assert shown.exit_code == 0 and all(f"│ {s.id} " in shown.output for s in list_envs())

    families = json.loads(_invoke("tasks", "families", "--json").stdout)
    assert [f["name"] for f in families["families"]] == [f.name for f in generators.families()]
    assert "starter" in families["packs"]


def _in_a_terminal(*args: str, columns: int = 70) -> tuple[int, str]:
    """Run the CLI on a pseudo-terminal (so Rich draws its live display) and return its exit
    code and everything it wrote, read until it exits."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "xterm"}
    proc = subprocess.Popen([*CLI, *args], stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 240)
            assert ready, "no output for 240 s"
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child exited and closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
        code = proc.wait(timeout=60)
    return code, b"".join(chunks).decode(errors="replace")


@pytest.mark.slow
def test_tasks_check_shows_progress_then_the_failures_in_full(make_task, tmp_path):
    make_task("answer-task")
    gameable = "a-verifier-that-passes-whatever-the-agent-does-or-does-not-do"
    make_task(gameable, test_sh="echo 1 > /logs/verifier/reward.txt\n")
    root = str(tmp_path / "tasks")
    code, shown = _in_a_terminal("tasks", "check", root)
    assert code == 1, shown
    text = ANSI.sub("", shown)
    # the live line counts from the start (nothing was printed for minutes before)
    assert "0/4 as expected 0 · not 0" in text and "4/4 as expected 3 · not 1" in text, text
    assert "┏" not in text, "no table of every scenario without --verbose"
    assert f"  {gameable} nop: expected 0, reward 1 (WRONG)" in text  # whole, on one line
    assert "3/4 scenarios as expected (2 tasks" in text

    result = subprocess.run(
        [*CLI, "tasks", "check", root, "--json"], capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 1 and result.stderr == ""
    report = json.loads(result.stdout)
    assert (report["tasks"], report["scenarios"], report["as_expected"]) == (2, 4, 3)
    (wrong,) = [r for r in report["results"] if not r["ok"]]
    assert (wrong["task_id"], wrong["scenario"], wrong["verdict"]) == (gameable, "nop", "WRONG")

    # the table of every scenario: a 62-character id on one line beside every column at 120
    # columns; at 80 it folds, whole, and the verdicts stay in sight
    verbose = _in_a_terminal("tasks", "check", root, "--verbose", columns=120)[1]
    assert "┏" in verbose and ANSI.sub("", verbose).count(f"│ {gameable} │") == 2
    narrow = ANSI.sub("", _in_a_terminal("tasks", "check", root, "--verbose", columns=80)[1])
    table = narrow[narrow.index("┏") : narrow.index("┘") + 1]
    assert gameable in "".join(_column(table, 0, key=1)) and "…" not in table, table
    assert _column(table, 4, key=1).count("WRONG") == 1 and "ok" in _column(table, 4, key=1)
