"""``palaestra serve ENV_ID --protocol openenv|ors``: an environment served to remote clients
(:mod:`palaestra.serve`). Bad input (an unknown env id or protocol, a port in use, a missing
extra) is one line before anything starts; SIGINT and SIGTERM close every session and exit 0.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.markup import escape

from palaestra.cli_errors import fail
from palaestra.cli_summary import console
from palaestra.env.registry import spec as env_spec
from palaestra.serve import PROTOCOLS, Served
from palaestra.serve.server import MissingExtra, bind, check_env_for, check_protocol, serve
from palaestra.serve.sessions import Limits


def serve_cmd(
    env_id: Annotated[
        str,
        typer.Argument(help="The environment: an env id as `palaestra eval` takes it."),
    ],
    protocol: Annotated[
        str,
        typer.Option("--protocol", help=f"One of: {', '.join(PROTOCOLS)} (mcp: tool envs only)."),
    ] = "openenv",
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free).")] = 8000,
    max_sessions: Annotated[
        int, typer.Option(min=1, help="Sessions (each an episode and its sandbox) at once.")
    ] = 64,
    idle_timeout: Annotated[
        float,
        typer.Option(min=0.01, help="Seconds without a request before a session is closed."),
    ] = 300.0,
    max_request_bytes: Annotated[
        int, typer.Option(min=1024, help="The largest request body or WebSocket message.")
    ] = 4 * 1024 * 1024,
) -> None:
    """Serve an environment over OpenEnv or ORS: every client session is its own episode and
    sandbox, closed when the client leaves or idles past --idle-timeout."""
    try:
        check_protocol(protocol)
    except (ValueError, MissingExtra) as e:
        fail(f"--protocol: {e}" if isinstance(e, ValueError) else str(e))
    try:
        env_spec(env_id)
        check_env_for(protocol, env_id)
    except (KeyError, ValueError) as e:
        fail(str(e.args[0]) if e.args else str(e))
    try:
        sock = bind(host, port)
    except OSError as e:
        fail(
            f"--port {port} on {host}: {e.strerror or e}; pick another port, or 0 for any free one"
        )
    limits = Limits(
        max_sessions=max_sessions, idle_timeout_s=idle_timeout, max_request_bytes=max_request_bytes
    )

    def announce(served: Served, url: str) -> None:
        client = PROTOCOLS[protocol].client.format(url=url, name=served.name)
        console.print(
            f"serving {escape(env_id)} over {protocol} on {url}", highlight=False, soft_wrap=True
        )
        console.print(f"  client: {escape(client)}; Ctrl-C stops", highlight=False, soft_wrap=True)

    try:
        asyncio.run(serve(env_id, protocol, sock=sock, limits=limits, announce=announce))
    except KeyboardInterrupt:  # a second Ctrl-C while closing: the sessions were being closed
        pass
    finally:
        sock.close()
