"""The ``external`` scaffold's configuration: :class:`ExternalScaffoldConfig`, its check (one
clear line for a wrong command, placeholder or mount) and the command with its placeholders
replaced; the scaffold itself is :mod:`palaestra.scaffolds.external`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from palaestra.sandbox.base import Mount
from palaestra.scaffolds.proxy import DEFAULT_MODEL

PLACEHOLDERS = frozenset(
    {
        "instruction_file",
        "instruction",
        "base_url",
        "api_key",
        "model",
        "workdir",
        "exec_url",
        "python",
        "task_id",
        "episode_id",
    }
)
_HOST_ONLY = frozenset({"exec_url", "python"})
_PLACEHOLDER_RE = re.compile(r"\{([a-z_]+)\}")


@dataclass
class ExternalScaffoldConfig:
    """``command``: what to run (see the module docstring for placeholders). ``env``: extra
    environment variables. ``cwd``: its working directory (default: the sandbox's workdir, or a
    fresh temporary directory on the host). ``timeout_s``: wall-clock limit for the command,
    policy time included (the environment's agent time limit applies too). ``idle_timeout_s``:
    end the episode when the harness has made no call for this long."""

    command: str | list[str] = ""
    where: Literal["sandbox", "host"] = "sandbox"
    model: str = DEFAULT_MODEL
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout_s: float | None = None
    idle_timeout_s: float | None = None
    #: The command's output kept in the outcome (its tail), in characters.
    output_chars: int = 10_000
    #: Host paths the harness needs in the sandbox (its installation), bound read-only;
    #: ``where="sandbox"`` only. :func:`~palaestra.scaffolds.host_process.host_python_mounts` gives this Python and its packages.
    mounts: tuple[Mount, ...] = ()


def check_config(cfg: ExternalScaffoldConfig) -> None:
    if cfg.where not in ("sandbox", "host"):
        raise ValueError(f"external scaffold: where must be 'sandbox' or 'host', not {cfg.where!r}")
    parts = [cfg.command] if isinstance(cfg.command, str) else list(cfg.command)
    if not parts or not all(isinstance(p, str) for p in parts) or not "".join(parts).strip():
        raise ValueError(
            "external scaffold needs a command: a shell string or an argv list, e.g. "
            "command='my-agent --base-url {base_url} --task-file {instruction_file}'"
        )
    used = {name for p in parts for name in _PLACEHOLDER_RE.findall(p)}
    unknown = sorted(used - PLACEHOLDERS)
    if unknown:
        raise ValueError(
            f"external scaffold: unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}"
            f" in command; known: {', '.join(sorted(PLACEHOLDERS))} (write other braces as they"
            " are: only these names are replaced)"
        )
    if cfg.where == "host" and cfg.mounts:
        raise ValueError(
            "external scaffold: mounts are for where='sandbox' (a host command sees the host)"
        )
    if cfg.where == "sandbox" and used & _HOST_ONLY:
        raise ValueError(
            f"external scaffold: {', '.join(sorted(used & _HOST_ONLY))} exist only with "
            "where='host'"
        )


def render_command(command: str | list[str], values: dict[str, str]) -> list[str]:
    """The argv to run: placeholders replaced; a string becomes ``bash -c <string>``."""

    def sub(text: str) -> str:
        return _PLACEHOLDER_RE.sub(lambda m: values.get(m.group(1), m.group(0)), text)

    if isinstance(command, str):
        return ["bash", "-c", sub(command)]
    return [sub(part) for part in command]
