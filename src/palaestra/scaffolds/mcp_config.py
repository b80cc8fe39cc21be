"""A task's ``mcp_servers`` as the MCP configuration of a harness that speaks MCP itself.

Harbor's installed agents write the task's servers into their own configuration before they
run; a harness started inside the sandbox does the same with these (no ``mcp`` SDK needed):

* ``claude-code``: JSON ``{"mcpServers": {...}}`` for ``~/.claude.json`` (user scope: loaded
  without a trust prompt) or ``claude --mcp-config FILE``; streamable-http is ``"http"``.
* ``codex``: TOML ``[mcp_servers.<name>]`` tables for ``~/.codex/config.toml``.
* ``opencode``: JSON ``{"mcp": {...}}`` for ``~/.config/opencode/opencode.json`` (``local``
  and ``remote`` servers).

A stdio server's command is the task's (the harness starts it, inside the sandbox). Header
values keep their ``${VAR}`` references, as Harbor does, so no credential is written into the
file: Claude Code expands ``${VAR}`` itself, Codex reads a header that is exactly ``${VAR}``
from ``env_http_headers``, OpenCode reads ``{env:VAR}``; give the harness's process those
variables (:func:`header_env` gives their host values). A header mixing text and a variable (``Bearer ${TOKEN}``) is written for Codex
with the variable resolved from the host environment (Codex has no template form).

A header may name only the variables the operator allows (``PALAESTRA_MCP_HEADER_ENV``,
:mod:`palaestra.scaffolds.mcp_headers`): the harness would otherwise send whatever its own
environment holds (its API key) to the task's url. Any other raises ``ValueError`` naming the
variable and how to allow it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from palaestra.scaffolds.mcp_headers import check_header_variables, resolve_headers
from palaestra.tasks.config import MCPServerConfig

HARNESSES = ("claude-code", "codex", "opencode")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def claude_code_config(servers: Sequence[MCPServerConfig]) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for s in servers:
        if s.transport == "stdio":
            entries[s.name] = {"type": "stdio", "command": s.command, "args": list(s.args)}
        else:
            kind = "http" if s.transport == "streamable-http" else "sse"
            entries[s.name] = {"type": kind, "url": s.url}
            if s.headers:
                entries[s.name]["headers"] = dict(s.headers)
    return {"mcpServers": entries}


def opencode_config(servers: Sequence[MCPServerConfig]) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for s in servers:
        if s.transport == "stdio":
            entries[s.name] = {"type": "local", "command": [s.command, *s.args]}
        else:
            entries[s.name] = {"type": "remote", "url": s.url, "oauth": False}
            if s.headers:
                headers = {k: _VAR.sub(r"{env:\1}", v) for k, v in s.headers.items()}
                entries[s.name]["headers"] = headers
    return {"mcp": entries}


def codex_config(servers: Sequence[MCPServerConfig]) -> str:
    tables = []
    for s in servers:
        lines = [f"[mcp_servers.{_toml_key(s.name)}]"]
        if s.transport == "stdio":
            lines += [f"command = {_toml(s.command)}", f"args = {_toml(list(s.args))}"]
        else:
            lines.append(f"url = {_toml(s.url)}")
            from_env = {k: m.group(1) for k, v in s.headers.items() if (m := _VAR.fullmatch(v))}
            mixed = {k: v for k, v in s.headers.items() if k not in from_env}
            literal = resolve_headers(s.model_copy(update={"headers": mixed})) if mixed else {}
            if from_env:
                lines.append(f"env_http_headers = {_toml_table(from_env)}")
            if literal:
                lines.append(f"http_headers = {_toml_table(literal)}")
        tables.append("\n".join(lines))
    return "\n\n".join(tables) + "\n" if tables else ""


def render_mcp_config(harness: str, servers: Sequence[MCPServerConfig]) -> str:
    """The text of ``harness``'s configuration file holding ``servers`` (a task's
    ``task.config.environment.mcp_servers``)."""
    for server in servers:
        check_header_variables(server)
    if harness == "claude-code":
        return json.dumps(claude_code_config(servers), indent=2) + "\n"
    if harness == "opencode":
        return json.dumps(opencode_config(servers), indent=2) + "\n"
    if harness == "codex":
        return codex_config(servers)
    raise ValueError(f"no MCP configuration for harness {harness!r}; choose one of {HARNESSES}")


def header_env(servers: Sequence[MCPServerConfig]) -> dict[str, str]:
    """The host values of the variables ``servers``' headers name, for the harness's
    environment (it expands them itself); each is checked against the allow-list first, and
    one that is not set on the host is left out (the header then reaches the server empty or
    unexpanded, as the harness does with a variable it lacks)."""
    names: dict[str, str] = {}
    for server in servers:
        check_header_variables(server)
        for value in server.headers.values():
            for name in _VAR.findall(value):
                if name in os.environ:
                    names[name] = os.environ[name]
    return names


def _toml(value: Any) -> str:
    return json.dumps(value)  # a JSON string or list of strings is a valid TOML value


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml_table(table: dict[str, str]) -> str:
    return "{ " + ", ".join(f"{_toml_key(k)} = {_toml(v)}" for k, v in table.items()) + " }"


__all__ = [
    "HARNESSES",
    "claude_code_config",
    "codex_config",
    "header_env",
    "opencode_config",
    "render_mcp_config",
]
