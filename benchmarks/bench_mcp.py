"""MCP both ways: what a task's stdio server in the sandbox and a tool env served over MCP cost.

Prints figures; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_mcp.py``.

* **Sandbox stdio server** (``palaestra.scaffolds.mcp_client``): a stdlib MCP server
  (``tests/scaffolds/mcp_notes_server.py``) run by ``python3`` inside a local sandbox, its pipes
  FIFOs driven through ``exec``: the time to start it (``initialize`` + ``tools/list``) and the
  p50/p90 of one ``tools/call`` round trip, over ``--calls`` calls; next to it, one plain
  ``sandbox.exec(["true"])`` in the same sandbox (the unit a message costs).
* **Tool env over MCP** (``palaestra.env.tools.mcp_server``, streamable HTTP on 127.0.0.1,
  served in this process): the p50/p90 of one ``tools/call`` through the SDK's client, against
  the same call as ``ToolEnv.step`` directly: what MCP adds per step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import time
from pathlib import Path

from mcp import Client

from palaestra import make
from palaestra.env.tools.mcp_server import build_server, http_server
from palaestra.llm import LLMResponse
from palaestra.llm.types import ToolCall
from palaestra.run.metrics import percentile
from palaestra.sandbox import default_backend
from palaestra.sandbox.base import SandboxSpec
from palaestra.scaffolds.mcp_client import open_mcp_tools
from palaestra.tasks.config import MCPServerConfig

SERVER = Path(__file__).resolve().parents[1] / "tests" / "scaffolds" / "mcp_notes_server.py"


def quantiles(label: str, seconds: list[float]) -> None:
    ms = [s * 1000 for s in seconds]
    print(f"{label:>44}: p50 {percentile(ms, 0.5):7.2f} ms  p90 {percentile(ms, 0.9):7.2f} ms")


async def sandbox_stdio(calls: int) -> None:
    backend = default_backend("local")
    spec = SandboxSpec(workdir="/app", files={"/app/notes_server.py": SERVER})
    server = MCPServerConfig(
        name="notes", transport="stdio", command="python3", args=["/app/notes_server.py"]
    )
    async with await backend.create(spec) as sandbox:
        execs = []
        for _ in range(calls):
            started = time.perf_counter()
            await sandbox.exec(["true"])
            execs.append(time.perf_counter() - started)
        started = time.perf_counter()
        async with open_mcp_tools([server], sandbox) as tools:
            start_ms = (time.perf_counter() - started) * 1000
            print(f"{'stdio server start (initialize, tools/list)':>44}: {start_ms:7.1f} ms")
            times = []
            for i in range(calls):
                started = time.perf_counter()
                await tools.call("mcp__notes__write_note", {"path": "/tmp/n", "text": str(i)}, 30)
                times.append(time.perf_counter() - started)
        quantiles("sandbox exec(['true'])", execs)
        quantiles("stdio server tools/call (in the sandbox)", times)
    await backend.aclose()


async def tool_env_over_mcp(calls: int) -> None:
    args = {"query": "a"}
    async with make("tools/crm") as env:
        await env.reset(options={"task_id": "crm-easy-0"})
        direct = []
        for i in range(calls):
            call = ToolCall(id=f"c{i}", name="search_contacts", arguments=json.dumps(args))
            started = time.perf_counter()
            await env.step(LLMResponse(tool_calls=[call], finish_reason="tool_calls"))
            direct.append(time.perf_counter() - started)
    web = http_server(build_server("tools/crm", task_id="crm-easy-0"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        serving = asyncio.create_task(web.serve(sockets=[sock]))
        try:
            async with Client(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp") as client:
                over = []
                for _ in range(calls):
                    started = time.perf_counter()
                    await client.call_tool("search_contacts", args)
                    over.append(time.perf_counter() - started)
        finally:
            web.should_exit = True
            await serving
    quantiles("ToolEnv.step (search_contacts)", direct)
    quantiles("the same over MCP (streamable HTTP)", over)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per figure")
    args = parser.parse_args()
    asyncio.run(sandbox_stdio(args.calls))
    asyncio.run(tool_env_over_mcp(min(args.calls, 25)))  # within the env's 30 steps


if __name__ == "__main__":
    main()
