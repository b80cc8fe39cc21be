"""``--protocol mcp``: a tool environment's tools over MCP's streamable HTTP, at ``/mcp``.

The server is :mod:`palaestra.env.tools.mcp_server`'s (one episode per MCP session: opened at
``initialize``, each ``tools/call`` one step, closed with its session). MCP's own session manager
holds those sessions, so :class:`~palaestra.serve.sessions.Sessions` holds none here; the
server's limits are given to that manager instead: ``--max-sessions`` (one more is refused
with 503) and ``--idle-timeout`` (an idle session is closed, its environment too).
``--max-request-bytes`` caps bodies before MCP reads them, as for the other protocols. Only
tool environments (``tools/...``, ``games/...``) are served: an MCP tool call is a function
call, and a code environment's action is a whole LLM response.
"""

from __future__ import annotations

from collections.abc import Hashable

from palaestra.env.tools.mcp_server import build_server, check_env_id
from palaestra.serve import Served
from palaestra.serve.sessions import Sessions

#: The route clients connect to (``streamablehttp_client(url + PATH)``).
PATH = "/mcp"


def check(env_id: str) -> None:
    """ValueError (one line naming the fix) unless ``env_id`` is a tool environment."""
    check_env_id(env_id)


def build(env_id: str, task_ids: list[str], sessions: Sessions) -> Served:
    """The MCP app of ``env_id``; its sessions are MCP's, limited by ``sessions``' limits."""
    server = build_server(env_id)  # refuses an id that is no tool environment
    limits = sessions.limits
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        max_sessions=limits.max_sessions,
        session_idle_timeout=limits.idle_timeout_s,
        max_request_body_size=limits.max_request_bytes,
    )

    async def end_session(key: Hashable) -> None:  # never called: Sessions holds none
        return None

    return Served(app, env_id, end_session)
