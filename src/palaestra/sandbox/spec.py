"""What a sandbox must look like: :class:`SandboxSpec`, its mounts, and path arithmetic on
in-sandbox paths."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

NetworkMode = Literal["none", "public"]


@dataclass(frozen=True)
class Mount:
    """A host path made visible inside the sandbox.

    On the local backend the sandbox's ids are an unprivileged range of the host's
    (:mod:`palaestra.sandbox.local.userns`): it reads and writes a mount as that range's users,
    so a writable mount must be writable by them (the sandbox's root is host uid
    ``id_base()``), and what it writes there belongs to them.
    """

    source: Path
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class SandboxSpec:
    """What a sandbox must look like. Backends enforce what they support and reject the rest.

    ``workdir`` is created (writable, empty unless ``files`` fill it) and is the default cwd.
    ``files`` maps absolute in-sandbox paths to host files or directories copied in at creation.
    ``writable_dirs`` are extra empty writable directories; the defaults name no task format's
    layout (the environment passes a task's workdir and the directories its verifier uses).
    ``rootfs`` is a host directory holding a root filesystem (e.g. one exported from a Docker
    image) to run on instead of the host's system directories: the local backend shares it
    read-only between sandboxes and gives each a writable overlay discarded on close; it needs
    no Python (the helper brings its own runtime: :mod:`palaestra.sandbox.helper_runtime`).
    ``image`` names a container
    image for backends that run one (docker).
    """

    workdir: str = "/workspace"
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    writable_dirs: tuple[str, ...] = ("/tmp",)
    mounts: tuple[Mount, ...] = ()
    network: NetworkMode = "none"
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    pids_limit: int | None = None
    image: str | None = None
    rootfs: Path | None = None
    hostname: str = "sandbox"
    labels: dict[str, str] = field(default_factory=dict)


def is_within(path: str, directory: str) -> bool:
    """Whether the absolute ``path`` is ``directory`` or inside it (no file system access)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")
