"""A tool environment served as an MCP server: each MCP session is one episode.

``python -m palaestra.env.tools.mcp_server ENV_ID --transport stdio|http [--port N]`` serves the
tool environment ``ENV_ID`` (``tools/crm``, ``games/mastermind:0``, any id ``palaestra.make``
builds a :class:`~palaestra.env.tools.ToolEnv` from) with the official ``mcp`` SDK's server,
over stdio (one session: the process's stdin and stdout) or streamable HTTP (``/mcp`` on
127.0.0.1, one episode per ``Mcp-Session-Id``). :func:`build_server` is the server itself, for
``palaestra serve ENV_ID --protocol mcp``.

* **Opening a session** (``initialize``) makes a fresh environment and resets it: the task is
  the next seed's (``seed``, ``seed + 1``, ... per session; random without ``seed``), or
  ``task_id``. The initialize result's ``instructions`` are the task's instruction.
* **Tools** (``tools/list``): the episode's tools as the environment declares them, ``submit``
  and any distractors included, with their JSON schemas.
* **A call** (``tools/call``) is one step of the episode: the call as a response with one tool
  call. The environment checks its arguments as the ``tools`` scaffold does (an unknown tool,
  missing, extra or mistyped arguments are answered with what is wrong and the schema, and
  count as format errors); a refused or malformed call is an ``isError`` result.
* **The reward**: when the episode ends (``submit``, a game won or lost, the step or
  format-error limit), that call's result ends with ``The episode has ended: reward R
  (status, reason).`` and later calls are errors. The resource ``palaestra://episode`` (JSON)
  holds the episode's state at any time: ``env_id``, ``task_id``, ``episode_id``, ``steps``,
  ``done``, and once done ``reward``, ``status`` and ``reason``; ``palaestra://instruction``
  holds the instruction.
* **Closing a session** (the client's ``DELETE``, stdin's end, the HTTP session's idle timeout)
  closes its environment.
* **Limits** (remote clients may be hostile): at most :data:`MAX_SESSIONS` sessions (each one
  an environment) are open at once over HTTP, a new one beyond is refused (503) until one
  closes; a session idle for :data:`IDLE_TIMEOUT_S` is closed; a request body is at most
  4 MiB (the SDK's 413). A session's calls run one at a time, in the order they came, so
  concurrent calls cannot interleave the steps of one episode. A malformed request gets a
  JSON-RPC error, never a traceback.

The protocol era is the handshake's (``initialize``, 2025 versions): an episode needs a
session, which the 2026 per-request era does not have, so ``server/discover`` answers
"method not found" and clients in ``auto`` mode fall back to ``initialize``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import socket
import sys
from collections.abc import Callable
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from palaestra.env.registry import list_envs, make, spec
from palaestra.env.tools.env import ToolEnv
from palaestra.env.types import TimeStep
from palaestra.llm.types import LLMRequest, LLMResponse, ToolCall

#: Sessions (each an environment) open at once over HTTP, and the idle seconds that close one.
MAX_SESSIONS = 256
IDLE_TIMEOUT_S = 600.0
EPISODE_URI = "palaestra://episode"
INSTRUCTION_URI = "palaestra://instruction"
_NO_SESSION = (
    "this server keeps one episode per session: connect with the initialize handshake "
    "(the mcp SDK's Client(..., mode='legacy'), or 'auto')"
)


class Episode:
    """One session's episode: a fresh environment, reset when the session opens."""

    def __init__(self, env: ToolEnv, env_id: str) -> None:
        self.env = env
        self.env_id = env_id
        self.ts: TimeStep[LLMRequest] | None = None
        self.calls = 0
        self.turn = asyncio.Lock()  # one step at a time: concurrent calls wait their turn

    async def start(self, seed: int | None, task_id: str | None) -> None:
        options = {"task_id": task_id} if task_id is not None else None
        self.ts = await self.env.reset(seed=seed, options=options)

    @property
    def request(self) -> LLMRequest:
        assert self.ts is not None and self.ts.observation is not None
        return self.ts.observation

    @property
    def instruction(self) -> str:
        return next(str(m["content"]) for m in self.request.messages if m["role"] == "user")

    def tools(self) -> list[types.Tool]:
        return [
            types.Tool(
                name=spec["function"]["name"],
                description=spec["function"].get("description"),
                input_schema=spec["function"]["parameters"],
            )
            for spec in self.request.tools or ()
        ]

    def state(self) -> dict[str, Any]:
        assert self.ts is not None
        info, end = self.ts.info, self.ts.end if self.ts.last() else None
        state = {
            "env_id": self.env_id,
            "task_id": info["task_id"],
            "episode_id": info["episode_id"],
            "steps": info["step"],
            "done": end is not None,
        }
        if end is not None:
            state.update(reward=end.reward, status=str(end.status), reason=str(end.reason))
        return state

    async def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        async with self.turn:
            return await self._step(name, arguments)

    async def _step(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        assert self.ts is not None
        if self.ts.last():
            end = self.ts.end
            text = (
                f"Error: the episode has ended (reward {end.reward:g}); open a new session "
                "for a new episode."
            )
            return _result(text, True)
        self.calls += 1
        call = ToolCall(id=f"mcp_{self.calls}", name=name, arguments=json.dumps(arguments or {}))
        self.ts = await self.env.step(LLMResponse(tool_calls=[call], finish_reason="tool_calls"))
        reply = next(
            str(m["content"])
            for m in reversed(self.request.messages)
            if m["role"] == "tool" and m.get("tool_call_id") == call.id
        )
        failed = reply.startswith("Error")
        if self.ts.last():
            end = self.ts.end
            reply += f"\nThe episode has ended: reward {end.reward:g} ({end.status}, {end.reason})."
        return _result(reply, failed)

    async def close(self) -> None:
        await self.env.close()


def _result(text: str, failed: bool) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=failed
    )


def _episode(ctx: Any) -> Episode:
    """The episode of the request's session (its connection's state)."""
    # The SDK keeps per-connection state and teardown on its Connection; the lowlevel handler's
    # context reaches it through its session.
    episode = _connection(ctx).state.get("palaestra_episode")
    if episode is None:
        raise MCPError(types.INVALID_REQUEST, _NO_SESSION)
    return episode


def _connection(ctx: Any) -> Any:
    return ctx.session._connection


def build_server(
    env_id: str,
    *,
    seed: int | None = None,
    task_id: str | None = None,
    make_env: Callable[[], ToolEnv] | None = None,
) -> Server[Any]:
    """The MCP server of the tool environment ``env_id`` (see the module docstring).
    ``make_env`` builds each session's environment (default: ``palaestra.make(env_id)``)."""
    if make_env is None:
        check_env_id(env_id)
    factory = make_env or (lambda: _tool_env(env_id))
    seeds = itertools.count(seed) if seed is not None else None

    async def open_episode(ctx: Any, call_next: Any) -> Any:
        if ctx.method != "initialize" or ctx.request_id is None:
            return await call_next(ctx)
        connection = _connection(ctx)
        episode = connection.state.get("palaestra_episode")
        if episode is None:
            episode = Episode(factory(), env_id)
            connection.exit_stack.push_async_callback(episode.close)
            connection.state["palaestra_episode"] = episode
            await episode.start(next(seeds) if seeds is not None else None, task_id)
        result = await call_next(ctx)
        if isinstance(result, dict):  # the initialize result, in its wire form
            result["instructions"] = episode.instruction
        return result

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=_episode(ctx).tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await _episode(ctx).call(params.name, params.arguments)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        _episode(ctx)
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=EPISODE_URI,
                    name="episode",
                    mime_type="application/json",
                    description="The episode: its task, steps, and once done its reward.",
                ),
                types.Resource(
                    uri=INSTRUCTION_URI,
                    name="instruction",
                    mime_type="text/plain",
                    description="The task's instruction.",
                ),
            ]
        )

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        episode = _episode(ctx)
        uri = str(params.uri)
        if uri == EPISODE_URI:
            text, mime = json.dumps(episode.state()), "application/json"
        elif uri == INSTRUCTION_URI:
            text, mime = episode.instruction, "text/plain"
        else:
            raise MCPError(types.INVALID_PARAMS, f"no resource {uri}; read {EPISODE_URI}")
        contents = types.TextResourceContents(uri=uri, mime_type=mime, text=text)
        return types.ReadResourceResult(contents=[contents])

    async def no_discover(ctx: Any, params: Any) -> Any:
        raise MCPError(types.METHOD_NOT_FOUND, _NO_SESSION)

    server: Server[Any] = Server(
        "palaestra",
        version="1",
        instructions=f"The tool environment {env_id}: one episode per session.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )
    server.add_request_handler("server/discover", types.RequestParams, no_discover)
    server.middleware.append(open_episode)
    return server


def check_env_id(env_id: str) -> None:
    """Raise ValueError (one line, naming the fix) unless ``env_id`` names a tool environment."""
    try:
        factory = spec(env_id).factory
    except KeyError as e:
        raise ValueError(e.args[0]) from None
    if not (isinstance(factory, type) and issubclass(factory, ToolEnv)):
        raise ValueError(
            f"{env_id} is not a tool environment; serve one of {', '.join(_tool_presets())}"
        )


def _tool_presets() -> list[str]:
    return [
        s.id for s in list_envs() if isinstance(s.factory, type) and issubclass(s.factory, ToolEnv)
    ]


def _tool_env(env_id: str) -> ToolEnv:
    env = make(env_id)
    assert isinstance(env, ToolEnv)
    return env


async def serve_stdio(server: Server[Any]) -> None:
    """One session over this process's stdin and stdout, until stdin ends."""
    async with stdio_server() as (read, write):
        await serve_loop(
            server,
            read,
            write,
            lifespan_state={},
            init_options=server.create_initialization_options(),
        )


def http_server(
    server: Server[Any],
    *,
    max_sessions: int = MAX_SESSIONS,
    idle_timeout: float = IDLE_TIMEOUT_S,
) -> uvicorn.Server:
    """Streamable HTTP at ``/mcp``, one episode per session, at most ``max_sessions`` open and
    each closed after ``idle_timeout`` seconds without a request: ``await
    it.serve(sockets=[sock])`` on a socket bound to 127.0.0.1; ``it.should_exit = True``
    stops it."""
    app = server.streamable_http_app(
        host="127.0.0.1", max_sessions=max_sessions, session_idle_timeout=idle_timeout
    )
    return uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m palaestra.env.tools.mcp_server",
        description="Serve a tool environment as an MCP server, one episode per session.",
    )
    parser.add_argument("env_id", help="a tool environment: tools/crm, games/mastermind:0, ...")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--port", type=int, default=0, help="HTTP port on 127.0.0.1 (0: any)")
    parser.add_argument("--seed", type=int, help="the first session's seed (then +1 each)")
    parser.add_argument("--task-id", help="every session's task")
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=MAX_SESSIONS,
        help=f"HTTP sessions (environments) open at once (default {MAX_SESSIONS})",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=IDLE_TIMEOUT_S,
        help=f"seconds without a request that close an HTTP session (default {IDLE_TIMEOUT_S:g})",
    )
    args = parser.parse_args(argv)
    try:
        check_env_id(args.env_id)  # an unknown or non-tool id: one line, before serving
        if args.max_sessions < 1 or not 0 < args.idle_timeout < float("inf"):
            raise ValueError("--max-sessions must be at least 1 and --idle-timeout positive")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    server = build_server(args.env_id, seed=args.seed, task_id=args.task_id)
    if args.transport == "stdio":
        asyncio.run(serve_stdio(server))
        return 0
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", args.port))
    except OSError as e:
        print(
            f"error: cannot listen on 127.0.0.1:{args.port}: {e.strerror}; "
            "choose another --port (0: any free one)",
            file=sys.stderr,
        )
        return 2
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    print(f"serving {args.env_id} over MCP at {url}", file=sys.stderr, flush=True)
    web = http_server(server, max_sessions=args.max_sessions, idle_timeout=args.idle_timeout)
    asyncio.run(web.serve(sockets=[sock]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
