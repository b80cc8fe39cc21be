"""``palaestra serve``: any registered environment, served to remote clients over a protocol.

Each protocol is an adapter module (:data:`PROTOCOLS`) whose ``build(env_id, task_ids,
sessions)`` returns a :class:`Served`: the ASGI app speaking the protocol through its own
package's server, and how to end one of its sessions. The sessions themselves (one environment
and sandbox each, the limits, the idle reaper) are :mod:`palaestra.serve.sessions`; running the
app is :mod:`palaestra.serve.server`. Adding a protocol is one line here and one module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Protocol:
    """A protocol's adapter module, imported on use: ``needs`` is the package it serves
    through, installed by ``palaestra[extra]``."""

    module: str
    needs: str
    extra: str = "serve"
    client: str = ""
    """How a client connects, for the start-up line (``{url}`` and ``{name}`` filled in)."""


#: ``--protocol`` name -> its adapter.
PROTOCOLS: dict[str, Protocol] = {
    "openenv": Protocol(
        "palaestra.serve.openenv_adapter", "openenv", client="GenericEnvClient(base_url='{url}')"
    ),
    "ors": Protocol(
        "palaestra.serve.ors_adapter", "ors", client="AsyncORS('{url}').environment('{name}')"
    ),
    "mcp": Protocol(
        "palaestra.serve.mcp_adapter",
        "mcp",
        extra="mcp",
        client="streamable_http_client('{url}/mcp') (tool environments only)",
    ),
}


@dataclass(frozen=True)
class Served:
    """What an adapter builds: the app, the name clients use for the environment, and
    ``end_session(key)``, which ends a session in the protocol (the idle reaper calls it)."""

    app: Any
    name: str
    end_session: Callable[[Hashable], Awaitable[None]]


__all__ = ["PROTOCOLS", "Protocol", "Served"]
