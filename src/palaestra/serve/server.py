"""Running a served environment: uvicorn on one socket, the idle reaper, a clean stop.

:func:`serve` loads the env id's tasks once, builds the protocol's app (:data:`PROTOCOLS`)
over one :class:`~palaestra.serve.sessions.Sessions`, binds the socket (port 0: any free one,
announced), and serves until SIGINT or SIGTERM; then every connection is closed, every
session released (each environment closed: its sandbox and processes) and it returns.

Request bodies over ``max_request_bytes`` get HTTP 413 before the protocol sees them;
WebSocket messages over it close the socket (1009, message too big).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import signal
import socket
from collections.abc import Callable, Iterator

import uvicorn
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from palaestra.env.registry import load_tasks, make
from palaestra.serve import PROTOCOLS, Served
from palaestra.serve.sessions import Limits, Sessions


class MissingExtra(RuntimeError):
    """The protocol's package is not installed."""


def check_protocol(protocol: str) -> None:
    """ValueError for an unknown protocol, :class:`MissingExtra` when its package is absent."""
    if protocol not in PROTOCOLS:
        raise ValueError(
            f"unknown protocol {protocol!r}; choose one of: {', '.join(sorted(PROTOCOLS))}"
        )
    spec = PROTOCOLS[protocol]
    if importlib.util.find_spec(spec.needs) is None:
        raise MissingExtra(
            f"--protocol {protocol} needs the {spec.needs!r} package: "
            f"pip install 'palaestra[{spec.extra}]'"
        )


def check_env_for(protocol: str, env_id: str) -> None:
    """ValueError (one line) when ``protocol``'s adapter cannot serve ``env_id`` (an adapter
    with a ``check(env_id)``: MCP serves tool environments only)."""
    check = getattr(importlib.import_module(PROTOCOLS[protocol].module), "check", None)
    if check is not None:
        check(env_id)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: any free port); OSError when taken."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class BodyLimit:
    """ASGI middleware: HTTP request bodies over ``limit`` bytes get 413, unread by the app."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) <= self.limit:
            return await self.app(scope, receive, send)
        body: list[Message] = []  # no length given (or too long): read it, up to the limit
        size = 0
        while length is None:
            message = await receive()
            body.append(message)
            size += len(message.get("body", b""))
            if size > self.limit or not message.get("more_body", False):
                break
        if size > self.limit or length is not None:
            detail = f"the request body is over {self.limit} bytes (--max-request-bytes)"
            return await JSONResponse({"detail": detail}, 413)(scope, receive, send)

        async def replay() -> Message:
            return body.pop(0) if body else await receive()

        await self.app(scope, replay, send)


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling: :func:`serve` stops it and returns normally
    (uvicorn's re-raises the signal after shutting down, which would kill the process)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(
    env_id: str,
    protocol: str,
    *,
    sock: socket.socket,
    limits: Limits,
    announce: Callable[[Served, str], None] = lambda served, url: None,
) -> None:
    """Serve ``env_id`` over ``protocol`` on ``sock`` until SIGINT or SIGTERM (or
    cancellation); every session is closed before it returns."""
    check_protocol(protocol)
    tasks = load_tasks(env_id)
    sessions = Sessions(lambda: make(env_id, tasks=tasks), limits)
    adapter = importlib.import_module(PROTOCOLS[protocol].module)
    served: Served = adapter.build(env_id, list(tasks.ids), sessions)
    config = uvicorn.Config(
        BodyLimit(served.app, limits.max_request_bytes),
        ws_max_size=limits.max_request_bytes,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
        timeout_keep_alive=60,
    )
    server = _Uvicorn(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))
    reaper = asyncio.create_task(sessions.reap(served.end_session))
    host, port = sock.getsockname()[:2]
    announce(served, f"http://{f'[{host}]' if ':' in host else host}:{port}")
    try:
        await server.serve(sockets=[sock])
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        reaper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reaper
        await sessions.close_all()
