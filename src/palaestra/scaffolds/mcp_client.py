"""A Harbor task's ``mcp_servers``, started for one episode and offered as tools.

Harbor lets a task declare MCP servers under ``[environment]``; its agents start a ``stdio``
server's command themselves, *inside the task's environment*, and reach an ``sse`` or
``streamable-http`` server at its url. Here the same happens for a tool-calling scaffold:

* **stdio**: the command runs in the episode's sandbox, as the agent's commands do (its user,
  the working directory, the sandbox's limits and network): it is the agent's to reach and
  break, so everything it says is untrusted. The sandbox API has no process with open pipes,
  so its stdin and stdout are two FIFOs in a private temporary directory: one long ``exec``
  runs the server (it returns when the server exits, with its status and stderr), each message
  to it is an ``exec`` writing one line into the first FIFO, and one ``exec`` at a time waits
  for its next line on the second (bash's ``read`` takes a pipe a byte at a time, so nothing
  past the line is consumed). The official ``mcp`` SDK's client runs over these streams.
* **sse / streamable-http**: the SDK's client connects to the url from the host, with the
  task's ``headers`` (``${VAR}`` resolved from the host environment, as Harbor does).

:func:`open_mcp_tools` starts every server (initialize, then ``tools/list``), and gives an
:class:`MCPTools`: the tools as OpenAI function specs named ``mcp__<server>__<tool>`` (they
cannot collide with a scaffold's built-ins) and :meth:`MCPTools.call`, which checks the
arguments against the tool's input schema and forwards the call (``tools/call``). Leaving it
closes every session and kills every server process. A server that does not start raises
:class:`MCPServerError` naming the server and the cause: a sandbox-side (infrastructure)
failure of the episode.

Needs the ``mcp`` extra (``pip install 'palaestra[mcp]'``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import jsonschema
import mcp_types
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from palaestra.sandbox.base import ExecResult, Sandbox, SandboxError
from palaestra.tasks.config import MCPServerConfig

#: Seconds a server has to start and list its tools.
START_TIMEOUT_S = 60.0
#: Tools taken from one server at most, and the longest message read from a stdio server.
MAX_TOOLS = 128
MAX_MESSAGE_BYTES = 4 << 20
#: What a tool name may be in OpenAI function calling.
_NAME = re.compile(r"[^A-Za-z0-9_-]")

# In the sandbox. $1: the directory of the two FIFOs, then the server's argv. The shell holds
# both FIFOs open both ways, so the server's stdin never ends between messages and its
# stdout never breaks between two readers.
_MAKE_FIFOS = (
    'd=$(mktemp -d "${TMPDIR:-/tmp}/palaestra-mcp.XXXXXX") && '
    'mkfifo -m 600 "$d/in" "$d/out" && printf %s "$d"'
)
_SERVE = 'd=$1; shift; exec 3<>"$d/in" 4<>"$d/out"; "$@" <"$d/in" >"$d/out" 3<&- 4<&-'
_READ_LINE = 'IFS= read -r line <"$1"; rc=$?; printf %s "$line"; exit $rc'
_WRITE = 'cat >"$1"'


class MCPServerError(SandboxError):
    """A task's MCP server did not start (its command failed, it did not answer, it is not
    reachable): the episode's infrastructure failed, not the agent."""


def resolve_headers(server: MCPServerConfig) -> dict[str, str]:
    """The server's headers, Harbor's ``${VAR}`` (anywhere in a value) resolved from the host
    environment."""

    def var(m: re.Match[str]) -> str:
        if m.group(1) not in os.environ:
            raise MCPServerError(
                f"MCP server {server.name!r}: a header needs the host environment variable "
                f"{m.group(1)}; set it"
            )
        return os.environ[m.group(1)]

    pattern = r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}"
    return {k: re.sub(pattern, var, v) for k, v in server.headers.items()}


class _SandboxStdio:
    """A stdio server running in the sandbox, its pipes as FIFOs (see the module docstring)."""

    def __init__(self, sandbox: Sandbox, server: MCPServerConfig) -> None:
        self.sandbox = sandbox
        self.server = server
        self.dir = ""
        self.process: asyncio.Task[ExecResult] | None = None

    async def start(self) -> None:
        made = await self.sandbox.exec(["bash", "-c", _MAKE_FIFOS], timeout=30)
        if not made.ok:
            raise MCPServerError(
                f"MCP server {self.server.name!r}: cannot make its pipes in the sandbox: "
                f"{made.output.strip()}"
            )
        self.dir = made.stdout
        argv = [
            "bash",
            "-c",
            _SERVE,
            "serve",
            self.dir,
            self.server.command or "",
            *self.server.args,
        ]
        self.process = asyncio.ensure_future(self.sandbox.exec(argv, output_limit=64 << 10))

    def exit_note(self) -> str | None:
        """How the server ended (its status and stderr's tail), or None while it runs."""
        if self.process is None or not self.process.done() or self.process.cancelled():
            return None
        if (error := self.process.exception()) is not None:
            return f"{type(error).__name__}: {error}"
        result = self.process.result()
        note = f"its command exited with status {result.exit_code}"
        if tail := result.stderr.strip()[-1500:]:
            note += f": {tail}"
        return note

    async def read_line(self) -> bytes | None:
        """The server's next line, None once it has ended."""
        assert self.process is not None
        reading = asyncio.ensure_future(
            self.sandbox.exec(
                ["bash", "-c", _READ_LINE, "read", f"{self.dir}/out"],
                output_limit=MAX_MESSAGE_BYTES,
            )
        )
        try:
            await asyncio.wait((reading, self.process), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not reading.done():  # the server ended (no line will come), or we were cancelled
                reading.cancel()
                with anyio.CancelScope(shield=True):
                    await asyncio.gather(reading, return_exceptions=True)
        if reading.cancelled() or reading.exception() is not None:
            return None
        result = reading.result()
        if result.truncated:
            raise MCPServerError(
                f"MCP server {self.server.name!r} sent a message over {MAX_MESSAGE_BYTES} bytes"
            )
        return result.stdout.encode() if result.exit_code == 0 else None

    async def write(self, data: bytes) -> None:
        res = await self.sandbox.exec(
            ["bash", "-c", _WRITE, "write", f"{self.dir}/in"], stdin=data, timeout=60
        )
        if not res.ok:
            raise MCPServerError(f"MCP server {self.server.name!r} does not take input")

    async def stop(self) -> None:
        if self.process is not None and not self.process.done():
            self.process.cancel()  # the sandbox kills the command and everything it started
        if self.process is not None:
            await asyncio.gather(self.process, return_exceptions=True)
        if self.dir and not self.sandbox.closed:
            await self.sandbox.exec(["rm", "-rf", "--", self.dir], timeout=30)


@asynccontextmanager
async def _stdio_streams(pipes: _SandboxStdio) -> AsyncIterator[Any]:
    """The SDK's transport streams over a :class:`_SandboxStdio`."""
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        async with read_in:
            while (line := await pipes.read_line()) is not None:
                try:
                    message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    await read_in.send(SessionMessage(message))
                except ValueError as e:
                    await read_in.send(e)

    async def writer() -> None:
        async with write_out:
            async for item in write_out:
                text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                await pipes.write(text.encode() + b"\n")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        tasks.start_soon(writer)
        try:
            yield read_out, write_in
        finally:
            tasks.cancel_scope.cancel()


async def _transport(
    server: MCPServerConfig, pipes: _SandboxStdio | None, stack: AsyncExitStack
) -> Any:
    if pipes is not None:
        return _stdio_streams(pipes)
    assert server.url is not None
    headers = resolve_headers(server)
    if server.transport == "sse":
        return sse_client(server.url, headers=headers)
    client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
    await stack.enter_async_context(client)  # the SDK leaves a client it is given open
    return streamable_http_client(server.url, http_client=client)


@dataclass(frozen=True)
class _Tool:
    server: str
    name: str
    schema: dict[str, Any]


def tool_name(server: str, tool: str) -> str:
    """The function name an MCP tool is offered under: ``mcp__<server>__<tool>``, characters
    OpenAI refuses replaced by ``_``, at most 64 characters."""
    return _NAME.sub("_", f"mcp__{server}__{tool}")[:64]


def result_text(result: mcp_types.CallToolResult) -> str:
    """A tool result as the policy reads it: its text blocks; other blocks named."""
    parts = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            parts.append(f"[{block.type}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            text = getattr(block.resource, "text", None)
            parts.append(text if text is not None else f"[resource {block.resource.uri}]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource link: {block.uri}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


class MCPTools:
    """The tools of an episode's MCP servers (made by :func:`open_mcp_tools`)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.specs: list[dict[str, Any]] = []
        self._tools: dict[str, _Tool] = {}
        self._clients: dict[str, Client] = {}
        self._pipes: dict[str, _SandboxStdio] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    async def _connect(self, server: MCPServerConfig, stack: AsyncExitStack) -> None:
        pipes = None
        if server.transport == "stdio":
            pipes = self._pipes[server.name] = _SandboxStdio(self.sandbox, server)
            stack.push_async_callback(pipes.stop)
            await pipes.start()
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                transport = await _transport(server, pipes, stack)
                client = await stack.enter_async_context(
                    Client(transport, mode="legacy", cache=None)
                )
                listed = await client.list_tools()
        except MCPServerError:
            raise
        except Exception as e:  # any failure to start is the server's, named with its cause
            note = pipes.exit_note() if pipes is not None else None
            if note is None and isinstance(e, TimeoutError):
                note = f"it did not answer initialize and tools/list within {START_TIMEOUT_S:g} s"
            cause = note or f"{type(e).__name__}: {e}"
            where = f"{server.command} {' '.join(server.args)}".strip() if pipes else server.url
            raise MCPServerError(
                f"MCP server {server.name!r} ({where}) did not start: {cause}"
            ) from e
        self._clients[server.name] = client
        for tool in listed.tools[:MAX_TOOLS]:
            name = tool_name(server.name, tool.name)
            if name in self._tools:
                continue  # two tools alike once sanitized: the first one keeps the name
            schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
            self._tools[name] = _Tool(server.name, tool.name, schema)
            description = f"[MCP server {server.name}] {tool.description or tool.name}"
            parameters = schema or {"type": "object"}
            function = {"name": name, "description": description[:2000], "parameters": parameters}
            self.specs.append({"type": "function", "function": function})

    def check(self, name: str, arguments: str) -> dict[str, Any]:
        """The call's arguments, checked against the tool's input schema; raises ValueError
        with guidance for the agent."""
        try:
            args = json.loads(arguments or "{}")
        except json.JSONDecodeError as e:
            raise ValueError(f"Error: the arguments are not JSON ({e.msg}).") from None
        if not isinstance(args, dict):
            raise ValueError("Error: the arguments must be a JSON object.")
        schema = self._tools[name].schema
        try:
            jsonschema.validate(args, schema)
        except jsonschema.ValidationError as e:
            raise ValueError(
                f"Error: malformed call of {name!r}: {e.message}. Its arguments must match: "
                f"{json.dumps(schema)[:4000]}"
            ) from None
        except jsonschema.SchemaError:
            pass  # the server's schema is not valid: the server judges the call itself
        return args

    async def call(self, name: str, args: dict[str, Any], timeout: float) -> tuple[str, bool]:
        """Forward a checked call: (the text the policy reads, whether it is an error)."""
        tool = self._tools[name]
        note = self._pipes[tool.server].exit_note() if tool.server in self._pipes else None
        if note is not None:
            return f"Error: MCP server {tool.server!r} is no longer running ({note}).", True
        try:
            result = await self._clients[tool.server].call_tool(
                tool.name, args, read_timeout_seconds=timeout
            )
        except Exception as e:  # the server's failure is the agent's to read, not the episode's
            return f"Error: the MCP call failed: {type(e).__name__}: {e}", True
        text = result_text(result)
        return (f"Error: {text}" if result.is_error else text), bool(result.is_error)


@asynccontextmanager
async def open_mcp_tools(
    servers: Sequence[MCPServerConfig], sandbox: Sandbox
) -> AsyncIterator[MCPTools]:
    """Start ``servers`` for one episode in ``sandbox`` (see the module docstring); leaving
    closes every session and kills every server process."""
    tools = MCPTools(sandbox)
    async with AsyncExitStack() as stack:
        for server in servers:
            await tools._connect(server, stack)
        yield tools
