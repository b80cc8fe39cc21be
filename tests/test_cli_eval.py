"""`palaestra eval` / `export` as a user runs them: tables, JSON, kill -9 and Ctrl-C, resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from rich.progress import Progress
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from typer.testing import CliRunner

from palaestra.cli import app
from palaestra.cli_live import Live
from palaestra.run.scalars import JsonlScalarWriter
from palaestra.run.store import read_episodes, read_run
from palaestra.run.tensorboard import ScalarWriter
from tests.procs import sandbox_processes

CLI = [sys.executable, "-m", "palaestra.cli"]


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def _tensorboard(logdir: Path, tag: str) -> list[tuple[int, float]]:
    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []


@pytest.mark.slow
def test_cli_eval_prints_tables_and_writes_results(tmp_path):
    out, tb = tmp_path / "run", tmp_path / "tb"
    scalars = tmp_path / "scalars.jsonl"
    proc = _cli(
        "eval",
        "starter:0:3",
        "-p",
        "oracle",
        "-k",
        "2",
        "-n",
        "3",
        "--out",
        str(out),
        "--scalars",
        str(scalars),
        "--tensorboard",
        str(tb),
        "--verbose",
    )
    assert proc.returncode == 0, proc.stderr
    for title in (
        "By category",
        "By difficulty",
        "pass@k",
        "Cost and tokens",
        "Wall time per phase",
    ):
        assert title in proc.stdout
    # no starter task has a family: a one-row "—" table would only repeat the first one
    assert "By family" not in proc.stdout
    assert "100.0%" in proc.stdout and "$0.0000" in proc.stdout  # the oracle costs nothing
    # the live bar (on stderr) ends with the run's pass rate, errors, cost and throughput
    assert "pass 100.0% · errors 0 · $0.0000 ·" in proc.stderr and "ep/s" in proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["passed"] == 6
    assert summary["cost"]["total_usd"] == 0.0 and summary["cost"]["unknown_trials"] == 0
    lines = [json.loads(line) for line in scalars.read_text().splitlines()]
    assert [s["step"] for s in lines] == [1, 2, 3, 4, 5, 6]
    assert all(s["pass_rate"] == 1.0 and s["error_rate"] == 0.0 for s in lines)
    assert all(s["cost_usd"] == 0.0 for s in lines)  # the oracle costs nothing: 0, not unknown
    # TensorBoard: one point per final episode, the run's running pass rate from its store
    final = read_episodes(out)
    expected = [(i, sum(e["status"] == "passed" for e in final[:i]) / i) for i in range(1, 7)]
    assert _tensorboard(tb, "pass_rate") == expected
    assert _tensorboard(tb, "reward") == [(i, e["reward"]) for i, e in enumerate(final, 1)]
    assert _tensorboard(tb, "error_rate") == [(i, 0.0) for i in range(1, 7)]
    assert [step for step, _ in _tensorboard(tb, "episodes_per_s")] == list(range(1, 7))
    assert _tensorboard(tb, "cost_usd") == [(i, 0.0) for i in range(1, 7)]
    exported = _cli("export", str(out), "--format", "jsonl")
    assert exported.returncode == 0 and "wrote 6 episodes" in exported.stdout
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 6


def _record(status: str, cost: float | None, final: bool = True, reward: float = 0.0) -> dict:
    return {"status": status, "cost_usd": cost, "final": final, "reward": reward}


def test_live_scalars_count_final_tries_and_continue_a_resumed_run(tmp_path):
    prior = [
        _record("passed", None, reward=1.0),
        _record("error", 0.5, final=False),
        _record("failed", 0.25),
    ]
    progress = Progress(disable=True)
    bar = progress.add_task("run", total=6)
    streams = {
        "--scalars": JsonlScalarWriter(tmp_path / "s.jsonl"),
        "--tensorboard": ScalarWriter(tmp_path / "tb"),
    }
    live = Live(progress, bar, streams, prior)
    assert live.done == 2  # the final tries already stored
    for record in (
        _record("error", None, final=False),
        _record("error", 0.25),
        _record("passed", None, reward=1.0),
    ):
        live(record)
    live.close()
    assert progress.tasks[0].completed == 4
    assert _tensorboard(tmp_path / "tb", "pass_rate") == [(3, pytest.approx(1 / 3)), (4, 0.5)]
    assert _tensorboard(tmp_path / "tb", "error_rate") == [(3, pytest.approx(1 / 3)), (4, 0.25)]
    assert _tensorboard(tmp_path / "tb", "cost_usd") == [(3, 1.0), (4, 1.0)]  # every try's cost
    assert _tensorboard(tmp_path / "tb", "reward") == [(3, 0.0), (4, 1.0)]
    lines = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert [(s["step"], s["pass_rate"], s["cost_usd"]) for s in lines] == [
        (3, 1 / 3, 1.0),
        (4, 0.5, 1.0),
    ]
    assert all(s["episodes_per_s"] > 0 for s in lines)


def test_cli_rejects_an_unwritable_stream_target(tmp_path):
    (tmp_path / "file").write_text("")
    proc = _cli("eval", "starter:0:1", "--tensorboard", str(tmp_path / "file" / "tb"), timeout=60)
    assert proc.returncode == 2 and "--tensorboard" in proc.stderr and "cannot write" in proc.stderr


@pytest.mark.slow
def test_cli_json_mismatch_and_bad_env(tmp_path):
    proc = _cli("eval", "starter:0:1", "--policy", "nop", "--json", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["passed"] == 0 and summary["pass_at_k"] == {"1": 0.0}
    assert summary["statuses"] == {"failed": 1}
    streams = tmp_path.parent / f"{tmp_path.name}-streams"
    other = _cli(
        "eval",
        "starter:0:1",
        "--policy",
        "oracle",
        "--out",
        str(tmp_path),
        "--scalars",
        str(streams / "s.jsonl"),
        "--tensorboard",
        str(streams / "tb"),
    )
    # refused before any work: one line, no progress bar, no stream file or directory made
    assert other.returncode == 2
    assert "policy: stored 'nop', now 'oracle'" in other.stderr and "--overwrite" in other.stderr
    assert other.stderr.startswith("error: ") and len(other.stderr.splitlines()) == 1
    assert not streams.exists() and other.stdout == ""
    bad = _cli("eval", "nope", timeout=60)
    assert bad.returncode == 2 and "no environment or task 'nope'" in bad.stderr
    missing = _cli("export", str(tmp_path / "nothing"), timeout=60)
    assert missing.returncode == 2 and "no results.db" in missing.stderr


def _start(out: Path, env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            *CLI,
            "eval",
            "starter:0:6",
            "-p",
            "oracle",
            "-k",
            "3",
            "-n",
            "2",
            "--out",
            str(out),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _wait_for_episodes(out: Path, n: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before it could be interrupted"
        try:
            if len(read_episodes(out)) >= n:
                return
        except (FileNotFoundError, sqlite3.OperationalError):
            pass  # the run has not created its store yet
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} episodes after 240 s")


def _sandbox_dirs(state: Path) -> list[Path]:
    return (
        [d for run in state.iterdir() if run.is_dir() for d in run.iterdir()]
        if state.is_dir()
        else []
    )


def _wait_no_sandboxes(state: Path, *, mid_start_ok: bool = False) -> None:
    """Wait until no process of a sandbox under ``state`` is left. ``mid_start_ok``: bwrap
    processes that never started a sandbox may stay (a child bwrap cloned just before its
    owner was killed waits for a go-ahead that never comes; the next janitor kills it)."""

    def left() -> list[str]:
        procs = sandbox_processes(str(state))
        return [cmd for cmd in procs if not cmd.startswith("bwrap ")] if mid_start_ok else procs

    deadline = time.monotonic() + 10
    while left() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left()


def _assert_complete(out: Path, before: list[dict]) -> None:
    final = read_episodes(out)
    jobs = Counter((e["task_id"], e["attempt"]) for e in final)
    assert len(jobs) == 18 and set(jobs.values()) == {1}, jobs  # 6 tasks x 3 attempts, once each
    assert all(e["status"] == "passed" for e in final)
    by_id = {e["id"]: e for e in final}
    for e in before:  # nothing finished before the interruption was lost or rewritten
        assert by_id[e["id"]]["episode_id"] == e["episode_id"]
    assert len(read_episodes(out, final_only=False)) == 18  # no duplicate or stray tries


@pytest.mark.slow
def test_kill_9_mid_run_then_rerun_resumes_exactly(tmp_path):
    out, state = tmp_path / "run", tmp_path / "state"
    env = {**os.environ, "PALAESTRA_STATE_DIR": str(state)}
    proc = _start(out, env)
    _wait_for_episodes(out, 3, proc)
    proc.kill()
    proc.wait(timeout=30)
    before = read_episodes(out)
    assert 3 <= len(before) < 18
    # bwrap --die-with-parent: every started sandbox died with its owner
    _wait_no_sandboxes(state, mid_start_ok=True)
    leftovers = _sandbox_dirs(state)
    rerun = subprocess.run(
        [
            *CLI,
            "eval",
            "starter:0:6",
            "-p",
            "oracle",
            "-k",
            "3",
            "-n",
            "2",
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout)
    assert summary["resumed"] and summary["skipped"] == len(before) and summary["episodes"] == 18
    _assert_complete(out, before)
    # the janitor of the rerun's backend reclaimed what the killed run left on disk, and any
    # bwrap caught mid-start
    assert not any(d.exists() for d in leftovers) and not _sandbox_dirs(state)
    _wait_no_sandboxes(state)


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_the_run_resumes(tmp_path):
    out, state, tb = tmp_path / "run", tmp_path / "state", tmp_path / "tb"
    env = {**os.environ, "PALAESTRA_STATE_DIR": str(state)}
    streams = ("--tensorboard", str(tb), "--scalars", str(tmp_path / "scalars.jsonl"))
    proc = _start(out, env, *streams)
    _wait_for_episodes(out, 2, proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert not sandbox_processes(str(state)) and not _sandbox_dirs(state)
    assert read_run(out)["stop_reason"] == "interrupted"
    before = read_episodes(out)
    # the streams were closed cleanly: both hold every point recorded, steps 1, 2, ...
    steps = [step for step, _ in _tensorboard(tb, "pass_rate")]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) <= len(before)
    lines = (tmp_path / "scalars.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == steps
    rerun = _cli(
        "eval",
        "starter:0:6",
        "-p",
        "oracle",
        "-k",
        "3",
        "-n",
        "2",
        "--out",
        str(out),
        *streams,
        env=env,
    )
    assert rerun.returncode == 0, rerun.stderr
    _assert_complete(out, before)
    assert read_run(out)["stop_reason"] is None
    # the rerun's file continues the steps from the episodes already stored
    assert len(list(tb.glob("events.out.tfevents.*"))) == 2
    points = _tensorboard(tb, "pass_rate")
    assert [step for step, _ in points] == steps + list(range(len(before) + 1, 19))
    assert all(value == 1.0 for _, value in points)


def _invoke(*args: str):
    runner = CliRunner()
    return runner.invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "200"})


def test_eval_dir_skips_an_invalid_task_and_says_what_errored(tmp_path, make_task):
    """One task that does not load no longer refuses the folder: it is skipped, said and
    counted (console, summary.json, the stored run); --strict-tasks refuses instead. Episodes
    that errored are said with their first errors; a run in which all errored exits 1."""
    root = tmp_path / "tasks"
    make_task("good", root=root)
    make_task("no-reward", root=root, test_sh="echo 'checked, but wrote no reward'\n")
    make_task("broken", root=root, agent_timeout=-1)
    out = tmp_path / "run"
    res = _invoke("eval", str(root), "-p", "oracle", "--out", str(out), "--json")
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "invalid task broken:" in text and "timeout_sec" in text
    assert "skipped 1 task(s) that do not load (--strict-tasks refuses them instead)" in text
    assert "1 of 2 episodes ended in an error; the first: no-reward: VerifierError:" in text
    summary = json.loads((out / "summary.json").read_text())
    assert [t["task"] for t in summary["invalid_tasks"]] == ["broken"]
    assert summary["episodes"] == 2 and summary["passed"] == 1
    assert read_run(out)["config"]["invalid_tasks"] == summary["invalid_tasks"]

    strict = _invoke("eval", str(root), "--strict-tasks", "--out", str(tmp_path / "strict"))
    assert strict.exit_code == 2 and "1 task(s) do not load; refused" in strict.output
    assert not (tmp_path / "strict").exists(), "a refused run starts nothing"

    all_errors = _invoke(
        "eval", f"{root}:1", "-p", "oracle", "-k", "2", "--out", str(tmp_path / "errors")
    )
    assert all_errors.exit_code == 1, all_errors.output
    text = " ".join(all_errors.output.split())
    assert "2 of 2 episodes ended in an error" in text and "every episode errored" in text
    assert "no-reward: VerifierError:" in text and "deterministic: not retried" in text


@pytest.mark.slow
def test_cli_step_limit_and_max_tokens_configure_the_scaffold(tmp_path):
    # the oracle runs its solution then submits: a limit of one response cuts it before submitting
    proc = _cli(
        "eval",
        "starter:0:1",
        "-p",
        "oracle",
        "--step-limit",
        "1",
        "--max-tokens",
        "64",
        "--json",
        "--out",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["end_reasons"] == {"step_limit": 1}
    (row,) = read_episodes(tmp_path)
    assert row["steps"] == 1


@pytest.mark.slow
def test_cli_bash_compact_and_temperature_are_accepted(tmp_path):
    # bash-compact ends after one response; the oracle's first one runs the reference solution
    proc = _cli(
        "eval",
        "gen/shell-warmup:0:1",
        "-p",
        "oracle",
        "--scaffold",
        "bash-compact",
        "--temperature",
        "0.25",
        "--json",
        "--out",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["end_reasons"] == {"step_limit": 1} and summary["pass_rate"] == 1.0
    assert summary["scaffold"] == "bash-compact"
    db = sqlite3.connect(tmp_path / "results.db")
    (request,) = db.execute("select new_messages from steps").fetchone()
    assert "skilled software engineer" not in request  # the compact system prompt
    bad = _cli("eval", "starter:0:1", "-p", "oracle", "--temperature", "-1")
    assert bad.returncode == 2 and "--temperature" in bad.stderr


def test_cli_prepare_ahead_runs_the_same_episodes(tmp_path):
    """--prepare-ahead: each worker starts its next episode while its current one runs; the
    run's results are a cold run's, and its config says it was prepared."""
    proc = _cli(
        "eval",
        "starter:0:3",
        "-p",
        "oracle",
        "--scaffold",
        "tools",
        "-j",
        "2",
        "--prepare-ahead",
        "--json",
        "--out",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["pass_rate"] == 1.0 and summary["episodes"] == 3
    assert read_run(tmp_path)["config"]["prepare_ahead"] is True
    assert not sandbox_processes(str(tmp_path))
