"""The host side of the helper protocol, independent of how the bytes travel.

:class:`HelperChannel` wraps an asyncio ``(StreamReader, StreamWriter)`` pair connected to a
running :mod:`palaestra.sandbox._helper` (bubblewrap's stdio for the local backend, ``docker
run -i``'s stdio for a container) and runs commands, shell sessions' commands, kill_all and
shutdown over the framed protocol described there. A backend owns the transport (starting it,
killing it, reporting why it died); the channel owns the conversation;
:class:`~palaestra.sandbox.channel_sandbox.ChannelSandbox` builds the Sandbox API on it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import posixpath
from collections.abc import Awaitable, Callable
from typing import Any

from palaestra.sandbox._helper import HEADER, encode_frame
from palaestra.sandbox.base import Command, SandboxClosedError, SandboxError

#: The host waits this much longer than an exec's timeout (which the helper enforces) before
#: declaring the helper unresponsive.
HOST_TIMEOUT_MARGIN_S = 10.0


#: Where each backend puts the helper package inside a sandbox (read-only).
HELPER_DIR_IN_SANDBOX = "/.palaestra"
#: How the sandbox's python starts the helper: imported rather than run as a script, so that its
#: bytecode is loaded, not compiled anew at every start; ``main`` marks the helper in ``ps``.
HELPER_BOOT = (
    f"import sys; sys.path.insert(0, {HELPER_DIR_IN_SANDBOX!r}); "
    "from _helper.server import main; main()"
)


class HelperChannel:
    """A conversation with one helper over a reader/writer pair.

    ``name`` names the sandbox in error messages. ``on_eof`` is awaited when the helper's
    output ends while the channel is not shutting down; it returns the error that explains the
    death (e.g. with the transport's exit status and last words), which every pending and later
    request then raises.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        name: str,
        workdir: str,
        on_eof: Callable[[], Awaitable[SandboxError]] | None = None,
    ) -> None:
        self.name = name
        self.workdir = workdir
        self._reader = reader
        self._writer = writer
        self._on_eof = on_eof
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[tuple[dict[str, Any], bytes]]] = {}
        self._failure: SandboxError | None = None
        self._closing = False
        self._greeting: asyncio.Future[tuple[dict[str, Any], bytes]] = (
            asyncio.get_running_loop().create_future()
        )
        self._pending[0] = self._greeting
        # A helper that dies before greeting fails this future; ready() may never be awaited.
        self._greeting.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._task = asyncio.create_task(self._read_frames())
        self.hello: dict[str, Any] = {}

    async def ready(self, timeout: float) -> dict[str, Any]:
        """Wait for the helper's greeting (``{"id": 0, ...}``) and return it."""
        try:
            self.hello, _ = await asyncio.wait_for(asyncio.shield(self._greeting), timeout)
        except TimeoutError:
            raise SandboxError(f"sandbox {self.name} did not start within {timeout:.0f}s") from None
        finally:
            self._pending.pop(0, None)
        return self.hello

    @property
    def failure(self) -> SandboxError | None:
        return self._failure

    # -- frames --------------------------------------------------------------------------------

    async def _read_frames(self) -> None:
        try:
            while True:
                head_len, blob_len = HEADER.unpack(await self._reader.readexactly(HEADER.size))
                body = await self._reader.readexactly(head_len + blob_len)
                head = json.loads(body[:head_len])
                future = self._pending.pop(head["id"], None)
                if future is not None and not future.done():
                    future.set_result((head, body[head_len:]))
        except Exception:  # EOF or garbage: either way the helper is gone
            if not self._closing:
                error = (
                    await self._on_eof()
                    if self._on_eof is not None
                    else SandboxError(f"sandbox {self.name} stopped unexpectedly")
                )
                self.fail(error)

    def fail(self, error: SandboxError) -> None:
        """Make every pending and future request raise ``error``."""
        if self._failure is None:
            self._failure = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self._failure)
        self._pending.clear()

    def check_usable(self) -> None:
        if self._failure is not None:
            raise self._failure

    async def request(
        self, head: dict[str, Any], blob: bytes = b"", answer_within: float | None = None
    ) -> tuple[dict[str, Any], bytes]:
        """Send one request and wait for its response (raises the helper's ``error``)."""
        self.check_usable()
        request_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self._writer.write(encode_frame({**head, "id": request_id}, blob))
            try:
                await self._writer.drain()
            except ConnectionError:
                pass  # the helper is gone; the frame reader fails the future with the reason
            response, data = await asyncio.wait_for(future, answer_within)
        except TimeoutError:
            self._cancel(request_id)
            raise SandboxError(
                f"sandbox {self.name}: no answer from its helper within {answer_within:.0f}s"
            ) from None
        except asyncio.CancelledError:
            self._cancel(request_id)
            raise
        finally:
            self._pending.pop(request_id, None)
        if "error" in response:
            raise SandboxError(f"sandbox {self.name}: {response['error']}")
        return response, data

    def _cancel(self, request_id: int) -> None:
        """Tell the helper to kill what a request abandoned by its caller still runs."""
        if self._failure is None and not self._writer.is_closing():
            self._writer.write(encode_frame({"op": "cancel", "id": request_id}))

    # -- operations ----------------------------------------------------------------------------

    async def run(self, command: Command) -> tuple[dict[str, Any], bytes, bytes]:
        """Have the helper run ``command``; its response (``exit_code``, ``timed_out``,
        ``truncated``, ``oom_killed``), stdout and stderr."""
        head = {
            "op": "exec",
            "argv": command.argv,
            "cwd": command.cwd or self.workdir,
            "env": command.env,
            "user": command.user,
            "timeout": command.timeout,
            "limit": command.output_limit,
            "stdin": command.stdin is not None,
        }
        return await self._command(head, command.stdin or b"", command.timeout)

    async def shell_run(
        self,
        shell: str,
        cmd: str,
        *,
        cwd: str | None,
        env: dict[str, str],
        user: str | int | None,
        timeout: float | None,
        output_limit: int,
    ) -> tuple[dict[str, Any], bytes, bytes]:
        """Run ``cmd`` in the helper's persistent shell session ``shell`` (started by its first
        run, with ``cwd``, ``env`` and ``user``); answered like :meth:`run`."""
        head = {
            "op": "shell_run",
            "shell": shell,
            "cwd": cwd or self.workdir,
            "env": env,
            "user": user,
            "timeout": timeout,
            "limit": output_limit,
        }
        return await self._command(head, cmd.encode(), timeout)

    async def shell_close(self, shell: str) -> None:
        """End the shell session ``shell``: its processes are gone when this returns."""
        await self.request({"op": "shell_close", "shell": shell}, answer_within=60.0)

    async def _command(
        self, head: dict[str, Any], blob: bytes, timeout: float | None
    ) -> tuple[dict[str, Any], bytes, bytes]:
        host_timeout = None if timeout is None else timeout + HOST_TIMEOUT_MARGIN_S
        response, data = await self.request(head, blob, host_timeout)
        split = response["stdout_len"]
        return response, data[:split], data[split:]

    async def kill_all(self, restart_service: bool) -> None:
        """Kill every process but the helper, the service's included; returns once they are
        gone and, with ``restart_service``, the service was started again."""
        head = {"op": "kill_all", "restart_service": restart_service}
        await self.request(head, answer_within=60.0)

    async def shutdown(self, timeout: float = 10.0) -> None:
        """End the conversation: close the helper's input (it exits on EOF, and as pid 1 its
        exit kills everything left) and wait until its output ends. Pending requests fail with
        :class:`SandboxClosedError`. The transport itself is the caller's to reap."""
        self._closing = True
        if not self._writer.is_closing():
            try:
                self._writer.write_eof()
            except (OSError, RuntimeError):
                self._writer.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except TimeoutError:
            pass
        self.fail(SandboxClosedError(f"sandbox {self.name} is closed"))

    def begin_close(self) -> None:
        """Say that the transport is about to be killed: its end is no failure to report."""
        self._closing = True

    async def closed(self) -> None:
        """After the transport was killed: wait for the reader, fail what is still pending."""
        self._closing = True
        await self._task
        self.fail(SandboxClosedError(f"sandbox {self.name} is closed"))


def sandbox_path(path: str) -> str:
    if not posixpath.isabs(path):
        raise ValueError(f"sandbox paths must be absolute, got {path!r}")
    return posixpath.normpath(path)
