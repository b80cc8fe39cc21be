"""Which host environment variables a task's MCP headers may carry to the task's url.

Harbor lets an ``sse``/``streamable-http`` server's headers name host environment variables
(``Authorization = "Bearer ${MCP_TOKEN}"``) and resolves them from the environment of the
process that runs the agent. A task is untrusted input (a downloaded dataset, a self-play
proposal), and so is the url it names: resolving any variable would let a task send
``${OPENAI_API_KEY}``, ``${HF_TOKEN}`` or ``${AWS_SECRET_ACCESS_KEY}`` to a server of its
author's choosing. So the rule is Harbor's, opted into per variable by whoever runs the
episodes: a header may name only the variables listed in :data:`ALLOW_ENV` (comma-separated
names, e.g. ``PALAESTRA_MCP_HEADER_ENV=MCP_TOKEN``); any other refuses the server before
anything is sent, naming the variable and the way to allow it. The same rule holds for the
configuration a harness is given (:mod:`palaestra.scaffolds.mcp_config`), which would
otherwise expand the variables, or hold their values, inside the sandbox.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from palaestra.tasks.config import MCPServerConfig

#: The environment variable listing the variables a task's MCP headers may name.
ALLOW_ENV = "PALAESTRA_MCP_HEADER_ENV"
VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class HeaderVariableError(ValueError):
    """A task's MCP header names a host environment variable it may not have."""


def allowed_variables(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The variables named in :data:`ALLOW_ENV`."""
    listed = (os.environ if environ is None else environ).get(ALLOW_ENV, "")
    return frozenset(name.strip() for name in listed.split(",") if name.strip())


def check_header_variables(server: MCPServerConfig) -> None:
    """Raise :class:`HeaderVariableError` (one line) unless every ``${VAR}`` in ``server``'s
    headers is allowed (it need not be set: a harness may resolve it in its own
    environment)."""
    allowed = allowed_variables()
    for header, value in server.headers.items():
        for name in VAR.findall(value):
            if name not in allowed:
                raise HeaderVariableError(
                    f"MCP server {server.name!r}: header {header!r} asks for the host "
                    f"environment variable {name}, which a task may not send to its url "
                    f"({server.url}); if you trust that url, allow it with {ALLOW_ENV}={name}"
                )


def resolve_headers(server: MCPServerConfig) -> dict[str, str]:
    """``server``'s headers with their ``${VAR}`` resolved from the host environment, once
    :func:`check_header_variables` allows them; one that is not set raises
    :class:`HeaderVariableError` naming it."""
    check_header_variables(server)

    def var(m: re.Match[str]) -> str:
        if m.group(1) not in os.environ:
            raise HeaderVariableError(
                f"MCP server {server.name!r}: a header needs the host environment variable "
                f"{m.group(1)}; set it"
            )
        return os.environ[m.group(1)]

    return {k: VAR.sub(var, v) for k, v in server.headers.items()}


__all__ = [
    "ALLOW_ENV",
    "HeaderVariableError",
    "allowed_variables",
    "check_header_variables",
    "resolve_headers",
]
