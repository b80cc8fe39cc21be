"""A Harbor task's ``mcp_servers``, started for one episode and offered as tools.

Harbor lets a task declare MCP servers under ``[environment]``; its agents start a ``stdio``
server's command themselves, *inside the task's environment*, and reach an ``sse`` or
``streamable-http`` server at its url. Here the same happens for a tool-calling scaffold:

* **stdio**: the command runs in the episode's sandbox, as the agent's commands do (its user,
  the working directory, the sandbox's limits and network): it is the agent's to reach and
  break, so everything it says is untrusted. Its pipes are FIFOs driven by ``exec`` calls
  (:mod:`palaestra.scaffolds.mcp_stdio`).
* **sse / streamable-http**: the SDK's client connects to the url from the host, with the
  task's ``headers`` (a ``${VAR}`` resolved from the host environment only when the operator
  allows that variable: :mod:`palaestra.scaffolds.mcp_headers`; the answers' size bounded:
  :mod:`palaestra.scaffolds.mcp_http`).

:func:`open_mcp_tools` starts every server (initialize, then ``tools/list``), and gives an
:class:`MCPTools`: the tools as OpenAI function specs named ``mcp__<server>__<tool>`` (they
cannot collide with a scaffold's built-ins) and :meth:`MCPTools.call`, which checks the
arguments against the tool's input schema and forwards the call (``tools/call``). Leaving it
closes every session and kills every server process. A server that does not start raises
:class:`MCPServerError` naming the server and the cause: a sandbox-side (infrastructure)
failure of the episode. Once started, whatever a server does (or the agent does to it) is the
agent's to read: a call answers within its timeout, as text, and never raises.

The host trusts nothing of a server's: its schemas are checked without its regular
expressions (:func:`_host_validator`), its output schemas are not used (the policy reads the
result's text), a call ends at its timeout whatever the server sends meanwhile.

Needs the ``mcp`` extra (``pip install 'palaestra[mcp]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import mcp_types
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from mcp import Client
from referencing import Registry

from palaestra.llm.types import ToolCall
from palaestra.sandbox.base import Sandbox
from palaestra.scaffolds.mcp_headers import HeaderVariableError, resolve_headers
from palaestra.scaffolds.mcp_http import http_transport
from palaestra.scaffolds.mcp_stdio import (
    MAX_MESSAGE_BYTES,
    MCPServerError,
    SandboxStdio,
    stdio_streams,
)
from palaestra.tasks.config import MCPServerConfig

#: Seconds a server has to start and list its tools.
START_TIMEOUT_S = 60.0
#: Seconds closing one server may take (an http server may never answer its session's end).
CLOSE_TIMEOUT_S = 10.0
#: Tools taken from one server at most.
MAX_TOOLS = 128
#: What a tool name may be in OpenAI function calling.
_NAME = re.compile(r"[^A-Za-z0-9_-]")


def _skip(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    return iter(())


def _host_validator(schema: dict[str, Any]) -> Validator | None:
    """A validator of a tool's arguments against the server's ``schema`` that runs no regular
    expression of the server's (Python's ``re`` backtracks: a crafted pattern and string hold
    the event loop for hours); None when the schema is not one jsonschema can check."""
    try:
        cls = validator_for(schema, default=Draft202012Validator)
        cls.check_schema(schema)
    except Exception:  # not a valid schema: the server judges the call itself
        return None
    additional = cls.VALIDATORS.get("additionalProperties")

    def additional_properties(v: Any, value: Any, instance: Any, s: dict[str, Any]) -> Any:
        if "patternProperties" in s or additional is None:
            return iter(())
        return additional(v, value, instance, s)

    skipped = ("pattern", "patternProperties", "unevaluatedProperties")
    keywords = {k: _skip for k in skipped} | {"additionalProperties": additional_properties}
    return validators.extend(cls, keywords)(schema, registry=Registry())


async def _transport(
    server: MCPServerConfig, pipes: SandboxStdio | None, stack: AsyncExitStack
) -> Any:
    if pipes is not None:
        return stdio_streams(pipes)
    try:
        return await http_transport(server, stack)
    except HeaderVariableError as e:
        raise MCPServerError(str(e)) from None


async def _close_within(stack: AsyncExitStack, timeout: float) -> None:
    """Close ``stack``, giving up on what is left of its waits after ``timeout`` seconds (an
    http session's ``DELETE`` waited for the client's read timeout, 300 s): its process is
    killed and its connections closed all the same, as the cancellation unwinds them."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await stack.aclose()


@dataclass(frozen=True)
class _Tool:
    server: str
    name: str
    schema: dict[str, Any]
    validator: Validator | None


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
        self._pipes: dict[str, SandboxStdio] = {}
        #: The servers left out, each with why (see :func:`open_mcp_tools`'s ``agent_acted``).
        self.unavailable: dict[str, str] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    async def _connect(self, server: MCPServerConfig, stack: AsyncExitStack) -> None:
        own = AsyncExitStack()  # this server's session, client and process, closed in time
        stack.push_async_callback(_close_within, own, CLOSE_TIMEOUT_S)
        pipes = None
        if server.transport == "stdio":
            pipes = self._pipes[server.name] = SandboxStdio(self.sandbox, server)
            own.push_async_callback(pipes.stop)
            await pipes.start()
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                transport = await _transport(server, pipes, own)
                client = await own.enter_async_context(Client(transport, mode="legacy", cache=None))
                listed = await client.list_tools()
        except MCPServerError:
            raise
        except Exception as e:  # any failure to start is the server's, named with its cause
            if pipes is not None:
                await pipes.settle()
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
            self._tools[name] = _Tool(server.name, tool.name, schema, _host_validator(schema))
            description = f"[MCP server {server.name}] {tool.description or tool.name}"
            parameters = schema or {"type": "object"}
            function = {"name": name, "description": description[:2000], "parameters": parameters}
            self.specs.append({"type": "function", "function": function})

    def check(self, name: str, arguments: str) -> dict[str, Any]:
        """The call's arguments, checked against the tool's input schema; raises ValueError
        with guidance for the agent."""
        try:
            args = ToolCall(id="", name=name, arguments=arguments).parsed_arguments()
        except ValueError as e:
            raise ValueError(f"Error: {e}.") from None
        tool = self._tools[name]
        try:
            error = best_match(tool.validator.iter_errors(args)) if tool.validator else None
        except Exception:  # an unresolvable $ref, a recursion: the server judges the call
            error = None
        if isinstance(error, ValidationError):
            raise ValueError(
                f"Error: malformed call of {name!r}: {error.message}. Its arguments must "
                f"match: {json.dumps(tool.schema)[:4000]}"
            )
        return args

    async def call(self, name: str, args: dict[str, Any], timeout: float) -> tuple[str, bool]:
        """Forward a checked call: (the text the policy reads, whether it is an error)."""
        tool = self._tools[name]
        note = self._pipes[tool.server].exit_note() if tool.server in self._pipes else None
        if note is not None:
            return f"Error: MCP server {tool.server!r} is no longer running ({note}).", True
        # The session's request, not Client.call_tool: that one validates structured content
        # against the server's output schema (its regular expressions, on the event loop) and
        # retries "input required" answers, each round with a fresh timeout.
        request = mcp_types.CallToolRequest(
            params=mcp_types.CallToolRequestParams(name=tool.name, arguments=args)
        )
        session = self._clients[tool.server].session
        try:
            async with asyncio.timeout(timeout):  # whatever the server sends meanwhile
                result = await session.send_request(
                    request, mcp_types.CallToolResult, request_read_timeout_seconds=timeout
                )
        except TimeoutError:
            return f"Error: MCP server {tool.server!r} did not answer within {timeout:g} s.", True
        except Exception as e:  # the server's failure is the agent's to read, not the episode's
            note = self._pipes[tool.server].exit_note() if tool.server in self._pipes else None
            if note is not None:
                return f"Error: MCP server {tool.server!r} is no longer running ({note}).", True
            return f"Error: the MCP call failed: {type(e).__name__}: {e}"[:2000], True
        text = result_text(result)
        return (f"Error: {text}" if result.is_error else text), bool(result.is_error)


@asynccontextmanager
async def open_mcp_tools(
    servers: Sequence[MCPServerConfig], sandbox: Sandbox, *, agent_acted: bool = False
) -> AsyncIterator[MCPTools]:
    """Start ``servers`` for one episode in ``sandbox`` (see the module docstring); leaving
    closes every session and kills every server process.

    ``agent_acted``: the agent has already run commands in ``sandbox`` (a later step of a
    multi-step task, a resumed episode), so a stdio server that does not start there may be
    its doing (it deleted the server's script, filled the disk): then the server is left out
    (:attr:`MCPTools.unavailable` says why) rather than failing the episode's
    infrastructure, which would drop an episode the agent is failing from training."""
    tools = MCPTools(sandbox)
    async with AsyncExitStack() as stack:
        for server in servers:
            try:
                await tools._connect(server, stack)
            except MCPServerError as e:
                if not (agent_acted and server.name in tools._pipes):
                    raise
                tools._pipes[server.name].fail(str(e))
                tools.unavailable[server.name] = str(e)
        yield tools


__all__ = [
    "MAX_MESSAGE_BYTES",
    "MAX_TOOLS",
    "CLOSE_TIMEOUT_S",
    "START_TIMEOUT_S",
    "MCPServerError",
    "MCPTools",
    "open_mcp_tools",
    "resolve_headers",
    "result_text",
    "tool_name",
]
