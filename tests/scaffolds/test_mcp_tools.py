"""A Harbor task's ``mcp_servers`` in the ``tools`` scaffold, on the real local sandbox: the
stdio server runs inside the sandbox, its tools are offered as ``mcp__<server>__<tool>``, the
calls reach it through the official ``mcp`` SDK's client, and nothing is left behind."""

from __future__ import annotations

import asyncio
import json
import socket
import tomllib
from pathlib import Path

import pytest

from palaestra import CodeEnv
from palaestra.env.tools.mcp_server import build_server, http_server
from palaestra.llm import ScriptedPolicy
from palaestra.llm.types import LLMResponse, ToolCall
from palaestra.run import rollout
from palaestra.sandbox import default_backend
from palaestra.sandbox.base import SandboxSpec
from palaestra.scaffolds.mcp_client import MCPServerError, open_mcp_tools, tool_name
from palaestra.scaffolds.mcp_config import render_mcp_config
from palaestra.tasks.config import MCPServerConfig
from palaestra.tasks.source import TaskSet

SERVER = Path(__file__).with_name("mcp_notes_server.py")
DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY notes_server.py /app/notes_server.py\n"
NOTES = """
[[environment.mcp_servers]]
name = "notes"
transport = "stdio"
command = "python3"
args = ["/app/notes_server.py"]
"""
WRITE = "mcp__notes__write_note"


def call(name: str, call_id: str, **args: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(args))


def act(*calls: ToolCall) -> LLMResponse:
    return LLMResponse(tool_calls=list(calls), finish_reason="tool_calls")


@pytest.fixture
def notes_task(make_task):
    return make_task(
        files={"notes_server.py": SERVER.read_text()}, dockerfile=DOCKERFILE, extra_toml=NOTES
    )


def tool_replies(request) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request.messages if m["role"] == "tool"}


async def test_the_scaffold_calls_a_tasks_stdio_server_and_the_verifier_sees_it(notes_task):
    policy = ScriptedPolicy(
        [
            act(call(WRITE, "c1", path="/app/answer.txt")),  # missing text: a malformed call
            act(call("mcp__notes__fail", "c2")),  # the tool's own error: a refusal
            act(
                call(WRITE, "c3", path="/app/answer.txt", text="42"),
                call("bash", "c4", command="cat /app/answer.txt; ps -eo args"),
            ),
            act(call("submit", "c5")),
        ]
    )
    async with CodeEnv(TaskSet.from_dir(notes_task.parent), scaffold="tools") as env:
        episode = await rollout(env, policy)
    assert episode.end.status == "passed", episode.end
    assert episode.reward == 1.0
    first = policy.requests[0]
    offered = [t["function"]["name"] for t in first.tools]
    assert offered == ["bash", "view", "edit", "submit", WRITE, "mcp__notes__fail"]
    write_spec = first.tools[4]["function"]
    assert write_spec["parameters"]["required"] == ["path", "text"]
    assert write_spec["description"].startswith("[MCP server notes]")
    replies = tool_replies(policy.requests[3])
    assert "'text' is a required property" in replies["c1"]
    assert replies["c2"] == "Error: the disk is full"
    assert replies["c3"] == "wrote /app/answer.txt"
    assert "exit code: 0\n42" in replies["c4"]
    assert "python3 /app/notes_server.py" in replies["c4"]  # the server runs in the sandbox
    executions = episode.info["executions"]
    assert executions[0]["format_error"] is True  # only a malformed call
    assert executions[1]["tool_calls"][0]["refused"] is True
    assert "format_error" not in executions[1]


async def test_a_server_that_does_not_start_is_an_infrastructure_error(make_task):
    broken = NOTES.replace('command = "python3"', 'command = "no-such-mcp-server"')
    task = make_task(extra_toml=broken, dockerfile="FROM debian:bookworm-slim\nWORKDIR /app\n")
    policy = ScriptedPolicy([])
    async with CodeEnv(TaskSet.from_dir(task.parent), scaffold="tools") as env:
        episode = await rollout(env, policy)
    assert policy.requests == []
    end = episode.end
    assert (end.status, end.error_class, end.infra_error) == ("error", "MCPServerError", True)
    assert end.error_message.startswith(
        "MCP server 'notes' (no-such-mcp-server /app/notes_server.py) did not start: its "
        "command exited with status 127"
    )
    assert "no-such-mcp-server: command not found" in end.error_message


async def test_leaving_kills_the_server_and_removes_its_pipes(tmp_path):
    backend = default_backend("local")
    spec = SandboxSpec(workdir="/app", files={"/app/notes_server.py": SERVER})
    server = MCPServerConfig(
        name="notes", transport="stdio", command="python3", args=["/app/notes_server.py"]
    )
    async with await backend.create(spec) as sandbox:
        async with open_mcp_tools([server], sandbox) as tools:
            assert WRITE in tools and "bash" not in tools
            running = await sandbox.exec("pgrep -ax python3; ls /tmp")
            assert "python3 /app/notes_server.py" in running.stdout
            assert "palaestra-mcp." in running.stdout
        after = await sandbox.exec("pgrep -ax python3; ls -A /tmp")
        assert after.stdout == ""


async def test_a_server_that_dies_mid_episode_is_the_agents_error_to_read(tmp_path):
    backend = default_backend("local")
    spec = SandboxSpec(workdir="/app", files={"/app/notes_server.py": SERVER})
    server = MCPServerConfig(
        name="notes", transport="stdio", command="python3", args=["/app/notes_server.py"]
    )
    async with await backend.create(spec) as sandbox:
        async with open_mcp_tools([server], sandbox) as tools:
            await sandbox.exec("pkill -f notes_server.py")  # what a hostile agent may do
            text, failed = await tools.call(WRITE, {"path": "/app/x", "text": "1"}, 30)
    assert failed
    assert text.startswith("Error: MCP server 'notes' is no longer running") or text.startswith(
        "Error: the MCP call failed"
    )


def test_tool_names_are_prefixed_and_valid_function_names():
    assert tool_name("notes", "write_note") == "mcp__notes__write_note"
    assert tool_name("my server", "read.file/x") == "mcp__my_server__read_file_x"
    assert len(tool_name("s" * 50, "t" * 50)) == 64


async def test_an_unreachable_http_server_names_the_server():
    with socket.socket() as s:  # a port nothing listens on any more
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/mcp"
    server = MCPServerConfig(name="web", transport="streamable-http", url=url)
    with pytest.raises(MCPServerError, match=rf"MCP server 'web' \({url}\) did not start"):
        async with open_mcp_tools([server], sandbox=None):  # type: ignore[arg-type]
            pass


SERVERS = [
    MCPServerConfig(name="notes", transport="stdio", command="python3", args=["/app/s.py"]),
    MCPServerConfig(
        name="web",
        transport="streamable-http",
        url="https://mcp.example/mcp",
        headers={"Authorization": "Bearer ${MCP_TOKEN}", "X-Key": "${MCP_KEY}"},
    ),
    MCPServerConfig(name="old", transport="sse", url="http://127.0.0.1:8000/sse"),
]


def test_claude_code_and_opencode_configs_keep_header_variables(monkeypatch):
    monkeypatch.setenv("PALAESTRA_MCP_HEADER_ENV", "MCP_TOKEN, MCP_KEY")
    claude = json.loads(render_mcp_config("claude-code", SERVERS))["mcpServers"]
    assert claude["notes"] == {"type": "stdio", "command": "python3", "args": ["/app/s.py"]}
    assert claude["web"]["type"] == "http"
    assert claude["web"]["headers"]["Authorization"] == "Bearer ${MCP_TOKEN}"
    assert claude["old"] == {"type": "sse", "url": "http://127.0.0.1:8000/sse"}
    opencode = json.loads(render_mcp_config("opencode", SERVERS))["mcp"]
    assert opencode["notes"] == {"type": "local", "command": ["python3", "/app/s.py"]}
    assert opencode["web"]["headers"] == {
        "Authorization": "Bearer {env:MCP_TOKEN}",
        "X-Key": "{env:MCP_KEY}",
    }


def test_codex_config_is_toml_with_env_headers(monkeypatch):
    monkeypatch.setenv("MCP_TOKEN", "t0k")
    monkeypatch.setenv("PALAESTRA_MCP_HEADER_ENV", "MCP_TOKEN,MCP_KEY")
    codex = tomllib.loads(render_mcp_config("codex", SERVERS))["mcp_servers"]
    assert codex["notes"] == {"command": "python3", "args": ["/app/s.py"]}
    assert codex["web"]["env_http_headers"] == {"X-Key": "MCP_KEY"}
    assert codex["web"]["http_headers"] == {"Authorization": "Bearer t0k"}
    assert codex["old"] == {"url": "http://127.0.0.1:8000/sse"}
    with pytest.raises(ValueError, match="choose one of"):
        render_mcp_config("aider", SERVERS)


async def test_a_streamable_http_server_is_reached_at_its_url(make_task):
    """The http path of the scaffold, against a tool environment served over MCP."""
    server = build_server("tools/crm", task_id="crm-easy-0")
    web = http_server(server)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        serving = asyncio.create_task(web.serve(sockets=[sock]))
        try:
            toml = f'[[environment.mcp_servers]]\nname = "crm"\ntransport = "http"\nurl = "{url}"\n'
            task = make_task(
                extra_toml=toml, dockerfile="FROM debian:bookworm-slim\nWORKDIR /app\n"
            )
            policy = ScriptedPolicy(
                [
                    act(call("mcp__crm__submit", "c1")),
                    act(call("bash", "c2", command="echo 42 > /app/answer.txt")),
                    act(call("submit", "c3")),
                ]
            )
            async with CodeEnv(TaskSet.from_dir(task.parent), scaffold="tools") as env:
                episode = await rollout(env, policy)
        finally:
            web.should_exit = True
            await serving
    assert episode.end.status == "passed", episode.end
    names = [t["function"]["name"] for t in policy.requests[0].tools]
    assert "mcp__crm__update_contact" in names and "mcp__crm__submit" in names
    reply = tool_replies(policy.requests[1])["c1"]
    assert reply.startswith("Submitted.\nThe episode has ended: reward 0 (failed, submitted).")


async def test_a_header_variable_missing_on_the_host_names_it(monkeypatch):
    monkeypatch.delenv("PALAESTRA_NO_SUCH_TOKEN", raising=False)
    monkeypatch.setenv("PALAESTRA_MCP_HEADER_ENV", "PALAESTRA_NO_SUCH_TOKEN")  # allowed, unset
    server = MCPServerConfig(
        name="web",
        transport="streamable-http",
        url="http://127.0.0.1:1/mcp",
        headers={"Authorization": "Bearer ${PALAESTRA_NO_SUCH_TOKEN}"},
    )
    with pytest.raises(MCPServerError, match="'web': a header needs .* PALAESTRA_NO_SUCH_TOKEN"):
        async with open_mcp_tools([server], sandbox=None):  # type: ignore[arg-type]
            pass
