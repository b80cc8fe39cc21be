"""A task's ``[[environment.mcp_servers]]`` offered to the real harnesses (Claude Code, OpenCode,
Codex, each the real CLI from npm in a real local sandbox): the CLI starts the task's stdio
server inside the sandbox from its own MCP configuration and offers the server's tools to the
policy; a scripted policy that calls the tool passes, one that does not fails."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from palaestra import CodeEnv
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.run import rollout
from palaestra.scaffolds import make_scaffold
from palaestra.scaffolds.harness import HARNESSES, HarnessRun, HarnessScaffold
from palaestra.scaffolds.mcp_headers import ALLOW_ENV, HeaderVariableError
from palaestra.tasks.config import MCPServerConfig
from palaestra.tasks.source import TaskSet
from tests.scaffolds.conftest import proxy_stopped
from tests.scaffolds.harness_support import ProtocolScript, call, installed
from tests.scaffolds.test_external import our_processes

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

SERVER = Path(__file__).with_name("mcp_notes_server.py")
DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY notes_server.py /app/notes_server.py\n"
NOTES = """
[[environment.mcp_servers]]
name = "notes"
transport = "stdio"
command = "python3"
args = ["/app/notes_server.py"]
"""
#: The name each CLI offers the server's ``write_note`` tool under (Codex sends it in the
#: ``mcp__notes__`` namespace of the Responses API; the proxy lists it by its own name).
WRITE_NOTE = {
    "claude-code": "mcp__notes__write_note",
    "opencode": "notes_write_note",
    "codex": "write_note",
}
ANSWER = "/app/answer.txt"


@pytest.fixture
def notes_task(make_task):
    return make_task(
        instruction="Write 42 to /app/answer.txt with the notes server's write_note tool.",
        files={"notes_server.py": SERVER.read_text()},
        dockerfile=DOCKERFILE,
        extra_toml=NOTES,
    )


def offered(request: LLMRequest) -> list[str]:
    return [t["function"]["name"] for t in request.tools or ()]


def tool_results(request: LLMRequest) -> list[str]:
    results = []
    for m in request.messages:
        if m["role"] == "tool":
            content = m["content"]
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            results.append(content)
    return results


@pytest.mark.parametrize("harness", ["claude-code", "opencode", "codex"])
async def test_the_cli_starts_the_tasks_server_and_offers_its_tool(harness, notes_task):
    installed(harness)
    tool = WRITE_NOTE[harness]
    shell = HARNESSES[harness].actions
    calls = ProtocolScript(
        [
            lambda r: call(tool, 0, path=ANSWER, text="42"),
            lambda r: shell.run(r, "cat /app/answer.txt; ps -eo args"),
            lambda r: LLMResponse(content="The note is written."),
        ]
    )
    silent = ProtocolScript([lambda r: LLMResponse(content="Nothing to do.")])
    scaffold = make_scaffold(harness)

    async def episode(policy):
        async with CodeEnv(TaskSet.from_dir(notes_task.parent), scaffold=scaffold) as env:
            return await rollout(env, policy)

    called, not_called = await asyncio.gather(episode(calls), episode(silent))
    assert called.reward == 1.0 and called.end_reason == "submitted", called.end.error
    assert not_called.reward == 0.0 and not_called.status == "failed", not_called.end.error
    for script in (calls, silent):  # the first request already lists the server's tools
        assert {tool, tool.replace("write_note", "fail")} <= set(offered(script.requests[0]))
        assert {"Bash", "bash", "exec_command"} & set(offered(script.requests[0]))
    assert "wrote /app/answer.txt" in tool_results(calls.requests[1])[-1]
    shown = tool_results(calls.requests[2])[-1]
    assert "42" in shown and "python3 /app/notes_server.py" in shown  # the CLI's child, in it
    assert our_processes() == [] and await proxy_stopped(scaffold)


def run_with(*servers: MCPServerConfig) -> HarnessRun:
    return HarnessRun(
        executable="/h/bin/cli",
        install_dir="/h",
        home="/tmp/palaestra-agent/home",
        workdir="/app",
        instruction_file="/tmp/palaestra-agent/instruction.md",
        model="m",
        proxy_url="http://127.0.0.1:1/e/t",
        api_key="t",
        mcp_servers=servers,
    )


NOTES_SERVER = MCPServerConfig(
    name="notes", transport="stdio", command="python3", args=["/app/notes_server.py"]
)
REMOTE = MCPServerConfig(
    name="remote",
    transport="streamable-http",
    url="http://127.0.0.1:9/mcp",
    headers={"Authorization": "Bearer ${MCP_TOKEN}"},
)


def test_each_harness_writes_the_servers_into_its_own_configuration(tmp_path):
    plain, notes = run_with(), run_with(NOTES_SERVER)
    claude, opencode, codex = (HARNESSES[n] for n in ("claude-code", "opencode", "codex"))
    # no servers: no MCP configuration (OpenCode's empty models catalogue and plugin manifest
    # are written anyway)
    for h in (claude, codex):
        assert h.files(plain) == {}
    written = {opencode.models_file(plain): "{}\n", **opencode.plugin_manifest(plain)}
    assert opencode.files(plain) == written
    assert "--mcp-config" not in claude.command(plain)
    assert "mcp" not in opencode.config(plain) and "ENABLE_TOOL_SEARCH" not in claude.env(plain)
    # Claude Code: a file for --mcp-config, only it, its tools allowed and listed up front
    ((path, text),) = claude.files(notes).items()
    assert json.loads(text)["mcpServers"]["notes"]["command"] == "python3"
    assert claude.env(notes)["ENABLE_TOOL_SEARCH"] == "false"
    tail = ["--mcp-config", path, "--strict-mcp-config", "--allowedTools", "mcp__notes"]
    assert claude.command(notes)[-5:] == tail
    # its sh -c line passes the instruction, the model and those flags on, each one argument
    (tmp_path / "instruction.md").write_text("Say 'hi' twice.\n")
    echo = tmp_path / "argv"
    echo.write_text('#!/bin/sh\nfor a; do printf "%s\\n" "$a"; done\n')
    echo.chmod(0o755)
    run = run_with(NOTES_SERVER)
    run = dataclasses.replace(
        run, executable=str(echo), instruction_file=str(tmp_path / "instruction.md")
    )
    argv = subprocess.run(claude.command(run), capture_output=True, text=True, check=True)
    assert argv.stdout.splitlines() == [
        "-p",
        "Say 'hi' twice.",
        "--dangerously-skip-permissions",
        "--no-session-persistence",
        "--output-format",
        "json",
        "--model",
        "m",
        *tail,
    ]
    # OpenCode: the mcp key of its configuration
    mcp = json.loads(opencode.env(notes)["OPENCODE_CONFIG_CONTENT"])["mcp"]
    assert mcp == {"notes": {"type": "local", "command": ["python3", "/app/notes_server.py"]}}
    # Codex: mcp_servers tables in $CODEX_HOME/config.toml
    assert codex.files(notes) == {
        "/tmp/palaestra-agent/home/config.toml": '[mcp_servers.notes]\ncommand = "python3"\n'
        'args = ["/app/notes_server.py"]\n'
    }


def test_an_allowed_header_variable_is_in_the_harness_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MCP_TOKEN", "s3cret")
    monkeypatch.setenv("OTHER_SECRET", "no")
    monkeypatch.setenv(ALLOW_ENV, "MCP_TOKEN")
    values = {
        "workdir": "/app",
        "instruction_file": "/tmp/i.md",
        "model": "m",
        "base_url": "http://127.0.0.1:1/e/t/v1",
        "api_key": "t",
        "mcp_servers": json.dumps([REMOTE.model_dump(mode="json")]),
    }
    for name in ("claude-code", "opencode", "codex"):
        scaffold = HarnessScaffold(HARNESSES[name], install_dir=tmp_path)
        env = scaffold.command_env("http://127.0.0.1:1", "t", values)
        assert env["MCP_TOKEN"] == "s3cret" and "OTHER_SECRET" not in env
    config = json.loads(next(iter(HARNESSES["claude-code"].files(run_with(REMOTE)).values())))
    assert config["mcpServers"]["remote"]["headers"] == {"Authorization": "Bearer ${MCP_TOKEN}"}
    monkeypatch.delenv(ALLOW_ENV)
    for name in ("claude-code", "opencode", "codex"):
        scaffold = HarnessScaffold(HARNESSES[name], install_dir=tmp_path)
        with pytest.raises(HeaderVariableError, match=f"{ALLOW_ENV}=MCP_TOKEN"):
            scaffold.command_env("http://127.0.0.1:1", "t", values)


async def test_a_disallowed_header_variable_stops_the_episode_before_the_cli(
    make_task, monkeypatch
):
    installed("claude-code")
    monkeypatch.setenv("MCP_TOKEN", "s3cret")
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    remote = """
[[environment.mcp_servers]]
name = "remote"
transport = "streamable-http"
url = "http://127.0.0.1:9/mcp"
headers = { Authorization = "Bearer ${MCP_TOKEN}" }
"""
    task = make_task(extra_toml=remote)
    policy = ProtocolScript([])
    async with CodeEnv(TaskSet.from_dir(task.parent), scaffold="claude-code") as env:
        episode = await rollout(env, policy)
    assert policy.requests == []
    assert episode.end.status == "error" and not episode.end.verified
    message = episode.end.error_message
    assert "HeaderVariableError: MCP server 'remote': header 'Authorization' asks for" in message
    assert message.endswith(f"allow it with {ALLOW_ENV}=MCP_TOKEN")
    assert our_processes() == []
