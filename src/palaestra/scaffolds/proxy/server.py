"""The proxy server: one app (the LLM routes and the exec route over one episode table) served
by uvicorn in the caller's event loop, on 127.0.0.1 and a free port and optionally a unix
socket; see :mod:`palaestra.scaffolds.proxy`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.applications import Starlette

from palaestra.scaffolds.proxy.episodes import EpisodeTable, ProxyEpisode
from palaestra.scaffolds.proxy.exec import exec_route
from palaestra.scaffolds.proxy.routes import LLMRoutes

if TYPE_CHECKING:
    from palaestra.llm.client import LLMClient
    from palaestra.sandbox.base import Sandbox

DEFAULT_MODEL = "palaestra-policy"


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: in-process, Ctrl-C belongs to the host program."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ProxyServer:
    """The proxy; see :mod:`palaestra.scaffolds.proxy`. Use ``async with ProxyServer() as proxy:``.

    ``port=0`` picks a free port. ``unix_socket``: also listen on this path (mode 0666), so a
    sandbox that binds its directory can reach the proxy without a network.
    ``model_name`` is what ``/v1/models`` lists.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        unix_socket: Path | str | None = None,
        model_name: str = DEFAULT_MODEL,
    ) -> None:
        self.host = host
        self.port = port
        self.unix_socket = Path(unix_socket) if unix_socket is not None else None
        self._episodes = EpisodeTable()
        self._llm = LLMRoutes(self._episodes, model_name)
        self._server: _Server | None = None
        self._serve_task: asyncio.Task[None] | None = None
        self._sockets: list[socket.socket] = []
        self.app = Starlette(routes=[*self._llm.routes(), exec_route(self._episodes)])

    @property
    def model_name(self) -> str:
        return self._llm.model_name

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._serve_task is not None and not self._serve_task.done()

    @property
    def base_url(self) -> str:
        """``http://host:port`` (no ``/v1``)."""
        if not self.started:
            raise RuntimeError("the proxy is not running: call start() or use `async with`")
        return f"http://{self.host}:{self.port}"

    async def start(self) -> ProxyServer:
        if self._serve_task is not None:
            raise RuntimeError("the proxy was already started")
        sockets = [self._tcp_socket()]
        if self.unix_socket is not None:
            sockets.append(self._unix_socket(self.unix_socket))
        config = uvicorn.Config(
            self.app,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=5,
            timeout_keep_alive=30,
            log_level="warning",
        )
        self._server = _Server(config)
        self._sockets = sockets
        self._serve_task = asyncio.create_task(self._server.serve(sockets=sockets))
        while not self._server.started:
            if self._serve_task.done():
                await self._serve_task  # raises the startup error
                raise RuntimeError("the proxy server exited during startup")
            await asyncio.sleep(0.005)
        return self

    def _tcp_socket(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it. Without it a response written in two parts (h11
        # writes headers, then body) waits for the client's delayed ACK: ~40 ms per call.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        sock.set_inheritable(True)
        return sock

    @staticmethod
    def _unix_socket(path: Path) -> socket.socket:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        os.chmod(path, 0o666)
        return sock

    async def stop(self) -> None:
        """End every episode's pending calls, close connections, stop serving. Idempotent."""
        if self._serve_task is None or self._server is None:
            return
        for token in self._episodes.tokens():
            self.unregister(token)
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self._serve_task
        self._serve_task = None
        if self.unix_socket is not None:
            with contextlib.suppress(FileNotFoundError):
                self.unix_socket.unlink()

    def forget(self) -> None:
        """Let go of a proxy whose event loop has ended (an ``asyncio.run`` that returned with
        it running): its listening sockets closed, its unix socket removed, without that loop."""
        for sock in self._sockets:
            sock.close()
        self._sockets = []
        self._server = self._serve_task = None
        if self.unix_socket is not None:
            with contextlib.suppress(FileNotFoundError):
                self.unix_socket.unlink()

    async def __aenter__(self) -> ProxyServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- episodes ----------------------------------------------------------------------------

    def register(
        self,
        client: LLMClient,
        *,
        episode_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        sandbox: Sandbox | None = None,
        token: str | None = None,
    ) -> ProxyEpisode:
        """Serve a new episode from ``client``. ``metadata`` is merged into every request (the
        proxy adds ``turn``, the call's index); ``sandbox`` enables the exec route. ``token``
        fixes the episode's token (default: the episode id and a random secret, so a harness
        cannot guess another episode's)."""
        episode_id = episode_id or secrets.token_hex(8)
        ep = ProxyEpisode(
            token=token or f"{episode_id}-{secrets.token_hex(12)}",
            episode_id=episode_id,
            client=client,
            metadata=dict(metadata or {}),
            sandbox=sandbox,
        )
        self._episodes.add(ep)
        return ep

    def unregister(self, token: str) -> None:
        """End an episode: later calls get 404, calls still waiting for the policy get 410."""
        self._episodes.unregister(token)

    def url_for(self, ep: ProxyEpisode) -> str:
        """The OpenAI base URL of one episode (token in the path)."""
        return f"{self.base_url}/e/{ep.token}/v1"

    @property
    def episodes(self) -> int:
        return len(self._episodes)
