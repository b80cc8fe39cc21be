"""``palaestra serve TOOL_ENV --protocol mcp``: the MCP server of a tool environment under the
serve command, driven by the official ``mcp`` SDK's client over streamable HTTP: sessions at
once, each its own episode (the oracle's reward 1, nop's 0), the session limit, the one-line
refusal of a code environment, a clean stop."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client

from tests.env.test_mcp_server import episode, solve
from tests.serve.serving import served

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier


async def _oracle(url: str) -> str:
    async with Client(url) as client:
        return await solve(client)


async def _nop(url: str) -> str:
    async with Client(url) as client:
        return (await client.call_tool("submit", {})).content[0].text


def test_sessions_at_once_each_an_episode_to_the_oracles_and_nops_rewards(tmp_path: Path):
    with served("tools/crm:0:3", "mcp", tmp_path) as server:
        url = server.url + "/mcp"

        async def main() -> list[str]:
            return await asyncio.gather(_oracle(url), _oracle(url), _nop(url), _nop(url))

        results = asyncio.run(main())
        assert [r.split("The episode has ended: ")[-1] for r in results] == [
            "reward 1 (passed, submitted).",
            "reward 1 (passed, submitted).",
            "reward 0 (failed, submitted).",
            "reward 0 (failed, submitted).",
        ]
        assert server.stop() == 0


def test_one_session_over_the_limit_is_refused(tmp_path: Path):
    with served("games/mastermind", "mcp", tmp_path, "--max-sessions", "1") as server:
        url = server.url + "/mcp"

        async def main() -> tuple[dict, int]:
            async with Client(url) as first:
                state = await episode(first)
                async with httpx.AsyncClient() as http:  # a second initialize: no room
                    answer = await http.post(
                        url,
                        json={
                            "jsonrpc": "2.0",
                            "id": 1,
                            "method": "initialize",
                            "params": {
                                "protocolVersion": "2025-06-18",
                                "capabilities": {},
                                "clientInfo": {"name": "t", "version": "1"},
                            },
                        },
                        headers={"Accept": "application/json, text/event-stream"},
                    )
                return state, answer.status_code

        state, status = asyncio.run(main())
        assert state["done"] is False and status == 503
        assert server.stop() == 0


def test_a_code_environment_is_refused_in_one_line():
    run = subprocess.run(
        [sys.executable, "-m", "palaestra.cli", "serve", "starter", "--protocol", "mcp"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert run.returncode == 2, run.stderr
    assert "not a tool environment" in run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_sigint_stops_it_cleanly(tmp_path: Path):
    with served("tools/files", "mcp", tmp_path) as server:
        assert asyncio.run(_nop(server.url + "/mcp")).endswith("reward 0 (failed, submitted).")
        assert server.stop(signal.SIGINT) == 0
