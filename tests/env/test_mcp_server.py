"""A tool environment served over MCP, driven by the official ``mcp`` SDK's client: over
stdio (the module run as a process) and over streamable HTTP (one episode per session), to the
oracle's reward 1 and nop's 0."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from palaestra import make
from palaestra.env.tools import pack
from palaestra.env.tools.mcp_server import EPISODE_URI, INSTRUCTION_URI, build_server, http_server

SRC = str(Path(__file__).resolve().parents[2] / "src")


def stdio_server(*args: str) -> StdioServerParameters:
    module = ["-m", "palaestra.env.tools.mcp_server"]
    return StdioServerParameters(
        command=sys.executable, args=[*module, *args], env={"PYTHONPATH": SRC}
    )


async def episode(client: Client) -> dict:
    contents = (await client.read_resource(EPISODE_URI)).contents[0]
    return json.loads(contents.text)


async def solve(client: Client) -> str:
    """The oracle's calls (the task's known solution), then submit unless a game ended with
    its last call: the last result's text."""
    task = pack.task((await episode(client))["task_id"])
    for name, args in task.scenario().solution:
        result = await client.call_tool(name, args)
        assert not result.is_error, result
    if (await episode(client))["done"]:
        return result.content[0].text
    return (await client.call_tool("submit", {})).content[0].text


async def test_over_stdio_an_episode_per_session_to_the_oracles_reward():
    async with Client(stdio_server("tools/crm", "--seed", "0")) as client:
        state = await episode(client)
        assert state["done"] is False and state["steps"] == 0
        instruction = (await client.read_resource(INSTRUCTION_URI)).contents[0].text
        assert client.instructions == instruction
        task = pack.task(state["task_id"])
        assert instruction == task.scenario().instruction
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {t.name for t in task.scenario().tools} | {"submit"} <= set(tools)
        name, _ = task.scenario().solution[0]
        assert tools[name].input_schema == task.scenario().tool(name).parameters
        # the environment checks the arguments, as the tools scaffold does
        bad = await client.call_tool(name, {"no_such_argument": 1})
        assert bad.is_error
        assert "unknown argument(s): no_such_argument" in bad.content[0].text
        assert (await episode(client))["steps"] == 1
        last = await solve(client)
        assert last.endswith("The episode has ended: reward 1 (passed, submitted).")
        state = await episode(client)
        assert (state["done"], state["reward"], state["status"]) == (True, 1.0, "passed")
        after = await client.call_tool("submit", {})
        assert after.is_error and "the episode has ended" in after.content[0].text


async def test_over_stdio_nop_scores_zero():
    async with Client(stdio_server("tools/files", "--seed", "3"), mode="legacy") as client:
        result = await client.call_tool("submit", {})
        assert result.content[0].text.endswith("reward 0 (failed, submitted).")
        assert (await episode(client))["reward"] == 0.0


async def test_over_http_each_session_is_its_own_episode_and_closing_closes_it():
    envs = []

    def make_env():
        envs.append(make("games/mastermind"))
        return envs[-1]

    server = build_server("games/mastermind", seed=7, make_env=make_env)
    web = http_server(server)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        serving = asyncio.create_task(web.serve(sockets=[sock]))
        try:
            async with Client(url) as oracle, Client(url) as nop:
                first, second = await episode(oracle), await episode(nop)
                assert first["episode_id"] != second["episode_id"]
                assert len(envs) == 2 and not any(env._closed for env in envs)
                assert (await solve(oracle)).endswith("reward 1 (passed, submitted).")
                assert (
                    (await nop.call_tool("submit", {}))
                    .content[0]
                    .text.endswith("reward 0 (failed, submitted).")
                )
                assert (await episode(nop))["done"] is True
            for _ in range(200):  # the DELETE ends each session; its teardown follows
                if all(env._closed for env in envs):
                    break
                await asyncio.sleep(0.05)
            assert all(env._closed for env in envs)
        finally:
            web.should_exit = True
            await serving


def test_an_unknown_env_id_is_one_line_and_exit_2():
    run = subprocess.run(
        [sys.executable, "-m", "palaestra.env.tools.mcp_server", "starter", "--transport", "stdio"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=120,
    )
    assert run.returncode == 2
    assert run.stderr.startswith("error: starter is not a tool environment")
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("env_id", ["no-such-env"])
def test_a_misspelt_env_id_names_it(env_id):
    run = subprocess.run(
        [sys.executable, "-m", "palaestra.env.tools.mcp_server", env_id],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=120,
    )
    assert run.returncode == 2
    assert run.stderr.startswith("error: ") and env_id in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
