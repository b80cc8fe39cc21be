"""Attacks on a tool environment served over MCP (``env/tools/mcp_server.py``) by hostile
remote clients, driven by the official SDK's client and raw HTTP: each failed before its fix."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
import mcp_types
from mcp import Client

from palaestra import make
from palaestra.env.tools.env import ToolEnv
from palaestra.env.tools.mcp_server import EPISODE_URI, build_server, http_server
from palaestra.llm.types import LLMRequest, LLMResponse


@asynccontextmanager
async def serving(make_env: Callable[[], ToolEnv], **limits: float) -> AsyncIterator[str]:
    web = http_server(build_server("tools/crm", task_id="crm-easy-0", make_env=make_env), **limits)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        sock.listen()  # connections wait in the backlog until the server accepts them
        task = asyncio.create_task(web.serve(sockets=[sock]))
        try:
            yield url
        finally:
            web.should_exit = True
            await task


async def episode(client: Client) -> dict:
    return json.loads((await client.read_resource(EPISODE_URI)).contents[0].text)


class SlowSimulator:
    """A tool simulator (an LLM client, the layer below) that answers after a pause, so a
    simulated call's step awaits while another call of the same session arrives."""

    async def complete(self, request: LLMRequest) -> LLMResponse:
        await asyncio.sleep(0.3)
        return LLMResponse(content="[]")


async def test_concurrent_calls_of_one_session_take_turns():
    """Before: two calls of one session stepped the environment at once: a slow (simulated)
    call that began first finished after ``submit`` had ended the episode and overwrote its
    last step, so the episode read as not done and the next call failed inside the
    environment. Now a session's calls run one at a time."""

    def make_env() -> ToolEnv:
        return make("tools/crm", simulator=SlowSimulator(), simulate="all")  # type: ignore[return-value]

    async with serving(make_env) as url, Client(url, mode="legacy") as client:
        slow = asyncio.create_task(client.call_tool("list_deals", {"contact_id": "c1"}))
        await asyncio.sleep(0.1)  # the simulated step is under way
        submitted = await client.call_tool("submit", {})
        await slow
        assert "The episode has ended: reward 0" in submitted.content[0].text
        state = await episode(client)
        assert (state["done"], state["steps"]) == (True, 2)
        after = await client.call_tool("submit", {})
        assert after.is_error and "the episode has ended" in after.content[0].text


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "flood", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_sessions_are_limited_and_an_idle_one_is_closed():
    """Before: 10,000 sessions (the SDK's default), each an environment (~1 MiB), kept for 30
    minutes without a request: a client that opens sessions and never closes them exhausts
    the server's memory. Now at most ``max_sessions`` (default 256) are open, and a session
    idle past ``idle_timeout`` (default 600 s) is closed with its environment."""
    envs: list[ToolEnv] = []

    def make_env() -> ToolEnv:
        envs.append(make("tools/crm"))  # type: ignore[arg-type]
        return envs[-1]

    async with (
        serving(make_env, max_sessions=2, idle_timeout=1.0) as url,
        httpx.AsyncClient(headers=ACCEPT, timeout=30) as http,
    ):
        opened = [await http.post(url, json=INITIALIZE) for _ in range(3)]
        assert [r.status_code for r in opened] == [200, 200, 503]
        assert len(envs) == 2  # the refused session built no environment
        for _ in range(100):  # never closed by the client: the idle timeout closes them
            if all(env._closed for env in envs):
                break
            await asyncio.sleep(0.1)
        assert all(env._closed for env in envs)
        assert (await http.post(url, json=INITIALIZE)).status_code == 200  # room again


async def test_malformed_requests_get_errors_and_the_server_goes_on(capfd):
    async with serving(lambda: make("tools/crm")) as url:  # type: ignore[arg-type,return-value]
        async with httpx.AsyncClient(headers=ACCEPT, timeout=30) as http:
            for body, status in [
                (b"garbage", 400),
                (b"[]", 400),
                (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}', 400),
                (b"x" * (5 << 20), 413),
            ]:
                reply = await http.post(
                    url, content=body, headers={"Content-Type": "application/json"}
                )
                assert reply.status_code == status
        async with Client(url, mode="legacy") as client:
            bad = await client.session.send_request(
                mcp_types.CallToolRequest(params={"name": "nope"}),
                mcp_types.CallToolResult,
            )
            assert bad.is_error and "there is no tool named 'nope'" in bad.content[0].text
    assert "Traceback" not in capfd.readouterr().err
