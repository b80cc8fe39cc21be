"""The execution boundary: sandbox protocol and backends."""

from __future__ import annotations

from typing import Any

from palaestra.sandbox.base import (
    Command,
    ExecResult,
    Mount,
    Sandbox,
    SandboxBackend,
    SandboxClosedError,
    SandboxError,
    SandboxSnapshot,
    SandboxSpec,
    ShellSession,
)
from palaestra.sandbox.local import LocalBackend

BACKENDS = ("local", "docker")
_defaults: dict[str, SandboxBackend] = {}


def make_backend(name: str, **options: Any) -> SandboxBackend:
    """A new backend by name; ``options`` go to its constructor (``make_backend("local",
    warm=4)`` keeps 4 local sandboxes started ahead of time)."""
    if name == "local":
        return LocalBackend(**options)
    if name == "docker":
        from palaestra.sandbox.docker import DockerBackend

        return DockerBackend(**options)
    raise ValueError(f"unknown sandbox backend {name!r}; choose one of: {', '.join(BACKENDS)}")


def default_backend(name: str) -> SandboxBackend:
    """The process-wide shared backend of that name (one run id per process)."""
    if name not in _defaults:
        _defaults[name] = make_backend(name)
    return _defaults[name]


__all__ = [
    "BACKENDS",
    "Command",
    "ExecResult",
    "Mount",
    "Sandbox",
    "SandboxBackend",
    "SandboxClosedError",
    "SandboxError",
    "SandboxSnapshot",
    "SandboxSpec",
    "ShellSession",
    "default_backend",
    "make_backend",
]
