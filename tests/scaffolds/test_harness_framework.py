"""The harness framework's shared parts: breaks in a harness's history, a failed harness's
own error line, and the CLI's listing and checks of the harnesses."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from palaestra import CodeEnv
from palaestra.cli import app
from palaestra.llm import ScriptedPolicy
from palaestra.rl.trajectory import to_trajectories
from palaestra.run import rollout
from palaestra.scaffolds import SCAFFOLDS, ExternalScaffold, external
from palaestra.scaffolds.external import last_error_line
from palaestra.scaffolds.harness import HARNESSES, HarnessNotReady, harness_scaffold
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action
from tests.scaffolds.conftest import proxy_stopped
from tests.scaffolds.harness_support import TokenPolicy
from tests.scaffolds.test_external import our_processes

#: A harness that rewrites its history: from its third call on it sends the first command's
#: output cut to 5 characters (as harnesses that trim old tool output do).
REWRITING_AGENT = r"""
import json, os, re, subprocess, sys, urllib.request
base = os.environ["OPENAI_BASE_URL"]
headers = {"Content-Type": "application/json"}
messages = [{"role": "user", "content": open(sys.argv[1]).read()}]
for turn in range(10):
    if turn == 2:
        messages[2]["content"] = messages[2]["content"][:5]
    req = urllib.request.Request(base + "/chat/completions", json.dumps({"messages": messages}).encode(), headers)
    reply = json.load(urllib.request.urlopen(req))["choices"][0]["message"]["content"]
    messages.append({"role": "assistant", "content": reply})
    out = subprocess.run(["bash", "-c", re.findall(r"```bash\n(.*?)\n```", reply, re.S)[0]],
                         capture_output=True, text=True).stdout
    if out.startswith("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"):
        sys.exit(0)
    messages.append({"role": "user", "content": out})
sys.exit(1)
"""


async def test_a_harness_that_rewrites_its_history_is_a_break(make_task):
    scaffold = ExternalScaffold(command=["python3", "-c", REWRITING_AGENT, "{instruction_file}"])
    script = ScriptedPolicy(
        [bash_action("seq 1 100"), bash_action("echo 42 > /app/answer.txt"), SUBMIT_ACTION]
    )
    async with CodeEnv(TaskSet.from_dir(make_task().parent), scaffold=scaffold) as env:
        episode = await rollout(env, TokenPolicy(script))
    assert episode.reward == 1.0, episode.end.error
    trajectories = to_trajectories(episode)
    assert [b.turn for b in trajectories.breaks] == [2]
    assert [len(s.spans) for s in trajectories.samples] == [2, 1]
    assert our_processes() == []


async def test_a_failed_harness_names_its_own_last_error(make_task):
    """A Python harness that dies with a traceback: the error's first line (what eval prints)
    is the exception, not 'its output ends:'."""
    command = ["python3", "-c", "import json; print('starting'); json.loads('{')"]
    async with CodeEnv(
        TaskSet.from_dir(make_task().parent), scaffold=ExternalScaffold(command=command)
    ) as env:
        episode = await rollout(env, ScriptedPolicy([]))
    first = episode.end.error.splitlines()[0]
    assert "the command exited with status 1: json.decoder.JSONDecodeError: Expecting" in first


def test_last_error_line():
    assert last_error_line("ok\nError: disk full\nbye\n") == "Error: disk full"
    assert last_error_line("one\ntwo\n\n") == "two"
    assert last_error_line("") == ""


runner = CliRunner()


def test_eval_help_lists_every_harness():
    out = runner.invoke(app, ["eval", "--help"], terminal_width=400).output
    for name in HARNESSES:
        assert name in out and name in SCAFFOLDS


def test_a_harness_not_installed_is_one_line_before_any_episode(tmp_path, monkeypatch):
    monkeypatch.setenv("PALAESTRA_HARNESS_DIR", str(tmp_path / "none"))
    for name in HARNESSES:
        res = runner.invoke(
            app, ["eval", "starter:0:1", "--scaffold", name, "--out", str(tmp_path / name)]
        )
        assert res.exit_code == 2, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and f"palaestra harness install {name}" in lines[0], res.output
        assert not (tmp_path / name).exists()  # refused before any run
    with pytest.raises(HarnessNotReady, match="is not installed"):
        harness_scaffold("opencode").sandbox_mounts()
    res = runner.invoke(app, ["harness", "install", "nope"])
    assert res.exit_code == 2 and "unknown harness 'nope'" in res.output


def test_install_without_npm_names_the_fix(tmp_path, monkeypatch):
    from palaestra.scaffolds.harness import install

    monkeypatch.setenv("PALAESTRA_HARNESS_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm, no node
    with pytest.raises(HarnessNotReady, match="npm and Node.js are not installed"):
        install(HARNESSES["claude-code"])


def test_interpreter_reads_an_executables_loader(tmp_path):
    from palaestra.scaffolds.harness.install import interpreter

    assert interpreter(Path(os.path.realpath("/bin/sh"))).startswith("/lib")
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    assert interpreter(script) is None


def _with_loader(source: Path, target: Path, loader: str) -> None:
    """A copy of the ELF executable ``source`` whose PT_INTERP names ``loader``; the
    directories up to it made traversable."""
    from palaestra.scaffolds.harness.install import interpreter

    source = Path(os.path.realpath(source))
    data = source.read_bytes()
    old = interpreter(source)
    assert old is not None and len(loader) <= len(old)
    at = data.index(old.encode() + b"\0")
    patched = loader.encode().ljust(len(old), b"\0")
    target.parent.mkdir(parents=True)
    target.write_bytes(data[:at] + patched + data[at + len(old) :])
    target.chmod(0o755)
    for d in target.parents[:3]:
        d.chmod(0o755)


async def test_an_image_without_the_clis_c_library_is_one_clear_error(make_task, tmp_path):
    """A native CLI linked against glibc cannot start where the loader it names is missing (a
    musl image): the episode's error is one line naming the loader and the fix, and the CLI
    never starts (no proxy call)."""
    from palaestra.scaffolds.harness import HarnessScaffold
    from palaestra.scaffolds.harness.claude_code import ClaudeCode

    install = tmp_path / "claude-code-fake"
    musl = "/lib/ld-musl-x86_64.so.1"
    _with_loader(Path("/bin/true"), install / "node_modules/.bin/claude", musl)
    scaffold = HarnessScaffold(ClaudeCode(), install_dir=install)
    async with CodeEnv(TaskSet.from_dir(make_task().parent), scaffold=scaffold) as env:
        episode = await rollout(env, ScriptedPolicy([]))
    assert episode.status == "error" and episode.turns == []
    first = episode.end.error.splitlines()[0]
    assert "claude-code 2.1.332 cannot run in this sandbox" in first, first
    assert musl in first and "glibc-based image" in first, first
    assert our_processes() == []


async def test_an_episode_starting_while_the_last_one_stops_the_proxy_gets_a_live_socket():
    """The scaffold's own proxy stops once its last episode has ended (and its linger run
    out); an episode that starts during that stop gets a new proxy whose socket is in place
    (the old proxy's stop must not unlink the new one's socket: concurrent episodes then
    failed with 'no proxy socket')."""
    scaffold = ExternalScaffold(command=["true"])
    try:
        first = await scaffold._acquire()
        began, stop = asyncio.Event(), first.stop

        async def stopping_first() -> None:
            began.set()
            await stop()

        first.stop = stopping_first  # type: ignore[method-assign]
        await scaffold._release()
        stopping = scaffold._linger
        assert stopping is not None and scaffold._own_proxy is first  # it lingers
        await began.wait()  # its linger ran out: the stop has begun
        second = await scaffold._acquire()
        await stopping
        assert second is not first and second.unix_socket is not None
        assert second.unix_socket.is_socket()
        await scaffold._release()
        assert await proxy_stopped(scaffold) and not second.unix_socket.exists()
    finally:
        await scaffold.aclose()


async def test_the_proxy_outlives_an_episode_for_the_next_and_then_stops(monkeypatch):
    """Episodes one after the other share one proxy (stopping uvicorn takes 0.1 s, which
    was on every episode's path); it stops by itself PROXY_LINGER_S after the last, and
    aclose() stops one still lingering."""
    monkeypatch.setattr(external, "PROXY_LINGER_S", 1.0)
    scaffold = ExternalScaffold(command=["true"])
    try:
        first = await scaffold._acquire()
        await scaffold._release()
        await asyncio.sleep(0)
        assert await scaffold._acquire() is first  # within the linger: the same proxy
        await scaffold._release()
        lingering = scaffold._linger
        assert lingering is not None and scaffold._own_proxy is first
        await lingering  # the linger runs out, the proxy stops
        assert scaffold._own_proxy is None and scaffold._linger is None
        socket = first.unix_socket
        assert socket is not None and not socket.exists()
        third = await scaffold._acquire()
        assert third is not first
        await scaffold._release()
        await scaffold.aclose()  # stops the lingering proxy at once
        assert scaffold._own_proxy is None and scaffold._linger is None
    finally:
        await scaffold.aclose()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_proxy_socket_directory_goes_when_the_process_is_stopped(sig):
    """A process ended by a signal runs no finalizer; its scaffold's socket directory under
    /tmp goes all the same (SIGKILL excepted: nothing can run then)."""
    code = (
        "import time\n"
        "from palaestra.scaffolds import ExternalScaffold\n"
        "scaffold = ExternalScaffold(command=['true'])\n"
        "print(scaffold._socket_path().parent, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        made = Path(proc.stdout.readline().strip())
        assert made.is_dir() and made.name.startswith("palaestra-proxy-")
        proc.send_signal(sig)
        assert proc.wait(timeout=30) != 0
    finally:
        proc.kill()
        proc.wait()
    assert not made.exists()
