"""A task's stdio MCP server, run inside the episode's sandbox, as the SDK's transport streams.

The sandbox API has no process with open pipes, so the server's stdin and stdout are two FIFOs
in a private temporary directory: one long ``exec`` runs the server (it returns when the
server exits, with its status and stderr), each message to it is an ``exec`` writing one line
into the first FIFO, and one ``exec`` at a time waits for its next line on the second (bash's
``read`` takes a pipe a byte at a time, so nothing past the line is consumed).

**Everything here is hostile.** The server is the task author's; the agent runs in the same
sandbox as the same user, so it can kill or stop the server, swap, fill or read the FIFOs and
write its own lines into them. The rules that follow:

* Once the server has started, nothing it or the agent does raises out of these streams: a
  failed write, an oversized or unreadable line, a dead server all mark the server as gone
  (:meth:`SandboxStdio.exit_note` says why; the process is killed) and end the read stream, so
  a pending request fails and later calls are the agent's errors to read. Before, such a
  failure cancelled the scaffold: an agent could turn an episode it was failing into an
  ``error`` episode, never verified and dropped from training.
* A line is read only while a request of the client is outstanding: between calls a server
  (or the agent) flooding the FIFO costs the host nothing; during a call, the call's timeout
  bounds it.
* A line is at most :data:`MAX_MESSAGE_BYTES`; the server's stderr is kept to 64 KiB.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types
from mcp.shared.message import SessionMessage

from palaestra.sandbox.base import ExecResult, Sandbox, SandboxError
from palaestra.tasks.config import MCPServerConfig

#: The longest message read from a stdio server.
MAX_MESSAGE_BYTES = 4 << 20

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


class SandboxStdio:
    """A stdio server running in the sandbox, its pipes as FIFOs (see the module docstring)."""

    def __init__(self, sandbox: Sandbox, server: MCPServerConfig) -> None:
        self.sandbox = sandbox
        self.server = server
        self.dir = ""
        self.process: asyncio.Task[ExecResult] | None = None
        self.failure: str | None = None

    async def start(self) -> None:
        made = await self.sandbox.exec(["bash", "-c", _MAKE_FIFOS], timeout=30)
        if not made.ok:
            raise MCPServerError(
                f"MCP server {self.server.name!r}: cannot make its pipes in the sandbox: "
                f"{made.output.strip()}"
            )
        self.dir = made.stdout
        argv = ["bash", "-c", _SERVE, "serve", self.dir, self.server.command or ""]
        argv += self.server.args
        self.process = asyncio.ensure_future(self.sandbox.exec(argv, output_limit=64 << 10))

    def fail(self, why: str) -> None:
        """The server is gone for this episode: ``why``, and its process is killed."""
        if self.failure is None:
            self.failure = why
        if self.process is not None and not self.process.done():
            self.process.cancel()  # the sandbox kills the command and everything it started

    def exit_note(self) -> str | None:
        """Why the server is gone (its status and stderr's tail), or None while it runs."""
        if self.failure is not None:
            return self.failure
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
        """The server's next line, None once it is gone."""
        assert self.process is not None
        if self.exit_note() is not None:
            return None
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
            self.fail(f"it sent a message over {MAX_MESSAGE_BYTES} bytes")
            return None
        if result.exit_code != 0:
            if why := result.stderr.strip()[-300:]:  # else the end of its output: it exited
                self.fail(f"its output could not be read ({why})")
            return None
        return result.stdout.encode()

    async def settle(self, timeout: float = 5.0) -> None:
        """Wait up to ``timeout`` seconds for an ending server's process to end (its exit
        status and stderr then name the cause)."""
        if self.process is not None and not self.process.done():
            await asyncio.wait({self.process}, timeout=timeout)

    async def write(self, data: bytes) -> None:
        """Send ``data``; a failure marks the server as gone (no raise)."""
        if self.exit_note() is not None:
            return
        res = await self.sandbox.exec(
            ["bash", "-c", _WRITE, "write", f"{self.dir}/in"], stdin=data, timeout=60
        )
        if not res.ok:
            # A server that exited as it was written to (a command not found, say): its exit
            # status and stderr are the cause, not the write that found no reader.
            await self.settle(2.0)
            if self.exit_note() is None:
                why = "timed out" if res.timed_out else res.output.strip()[-300:]
                self.fail(f"it does not take input ({why})")

    async def stop(self) -> None:
        if self.process is not None and not self.process.done():
            self.process.cancel()
        if self.process is not None:
            await asyncio.gather(self.process, return_exceptions=True)
        if self.dir and not self.sandbox.closed:
            await self.sandbox.exec(["rm", "-rf", "--", self.dir], timeout=30)


class _Outstanding:
    """The ids of the client's requests not answered yet: the reader waits for one."""

    def __init__(self) -> None:
        self.ids: set[Any] = set()
        self.any = asyncio.Event()

    def sent(self, message: Any) -> None:
        if isinstance(message, mcp_types.JSONRPCRequest):
            self.ids.add(message.id)
        elif isinstance(message, mcp_types.JSONRPCNotification) and (
            message.method == "notifications/cancelled"  # a request the client gave up on
        ):
            self.ids.discard((message.params or {}).get("requestId"))
        self._update()

    def received(self, message: Any) -> None:
        if isinstance(message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
            self.ids.discard(message.id)
            self._update()

    def _update(self) -> None:
        if self.ids:
            self.any.set()
        else:
            self.any.clear()


@asynccontextmanager
async def stdio_streams(pipes: SandboxStdio) -> AsyncIterator[Any]:
    """The SDK's transport streams over a :class:`SandboxStdio`: they never raise (see the
    module docstring)."""
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    outstanding = _Outstanding()

    async def reader() -> None:
        async with read_in:
            while True:
                await outstanding.any.wait()
                if (line := await pipes.read_line()) is None:
                    return  # the stream's end: the client fails what is pending
                try:
                    message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError as e:
                    await read_in.send(e)
                    continue
                outstanding.received(message)
                await read_in.send(SessionMessage(message))

    async def writer() -> None:
        async with write_out:
            async for item in write_out:  # after a failure: swallowed, so the client never blocks
                outstanding.sent(item.message)
                text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                await pipes.write(text.encode() + b"\n")

    async def guarded(pump: Any) -> None:
        try:
            await pump()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pipes.fail("the client closed its streams")
        except Exception as e:  # the pumps' failures are the server's, never the episode's
            pipes.fail(f"{type(e).__name__}: {e}")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(guarded, reader)
        tasks.start_soon(guarded, writer)
        try:
            yield read_out, write_in
        finally:
            tasks.cancel_scope.cancel()
