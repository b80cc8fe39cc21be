"""The local Docker engine: where it listens, whether it can run sandboxes, a client, and the
images it must have (pulled when missing)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiodocker
from aiodocker.exceptions import DockerError

from palaestra.sandbox.base import SandboxError, SandboxSpecError
from palaestra.sandbox.docker_janitor import reclaim_docker_leftovers

#: The image a sandbox runs when its spec names none: the base image that
#: ``scripts/provision-docker.sh`` builds locally.
DEFAULT_IMAGE = "palaestra/base:bookworm"
PROVISION_HINT = (
    "run `sudo apt-get install -y docker.io debootstrap && sudo scripts/provision-docker.sh` "
    f"(starts dockerd, builds {DEFAULT_IMAGE} locally with debootstrap and tags it "
    "debian:bookworm-slim; no registry needed)"
)

_PULL_TIMEOUT_S = 120.0


def docker_socket() -> str:
    """The engine's unix socket: ``$DOCKER_HOST`` when it is ``unix://...``, else the default.

    Only a local engine works: the helper is bind-mounted from this machine.
    """
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        raise SandboxError(
            f"DOCKER_HOST={host} is not a unix socket; the docker backend needs an engine on "
            "this machine (unset DOCKER_HOST, or point it at unix:///path/to/docker.sock)"
        )
    return host[len("unix://") :]


async def docker_unavailable() -> str | None:
    """Why the docker backend cannot run here (with the fix), or None when it can: the engine
    must answer and have the default image."""
    try:
        socket_path = docker_socket()
    except SandboxError as exc:
        return str(exc)
    if not await asyncio.to_thread(os.path.exists, socket_path):
        return f"no Docker engine at {socket_path}; to enable it, {PROVISION_HINT}"
    try:
        async with aiodocker.Docker(url=f"unix://{socket_path}") as docker:
            await docker.version()
            try:
                await docker.images.inspect(DEFAULT_IMAGE)
            except DockerError:
                return f"the Docker engine has no image {DEFAULT_IMAGE}; {PROVISION_HINT}"
    except (DockerError, OSError, aiodocker.exceptions.DockerError) as exc:
        return f"the Docker engine at {socket_path} does not answer ({exc}); {PROVISION_HINT}"
    return None


def client() -> aiodocker.Docker:
    """A client of the local engine (close it, or use ``async with``)."""
    return aiodocker.Docker(url=f"unix://{docker_socket()}")


async def reclaim_dead_owners() -> int:
    """:func:`reclaim_docker_leftovers` on a client of its own, for a process without one (a
    Ray actor starting on a node); how many it removed."""
    async with client() as docker:
        return await reclaim_docker_leftovers(docker)


async def ensure_image(docker: aiodocker.Docker, image: str) -> dict[str, Any]:
    """The engine's description of ``image``, pulling it when missing; a clear error if it
    cannot be had: SandboxSpecError when a registry has no such image (final), else SandboxError."""
    try:
        return await docker.images.inspect(image)
    except DockerError as exc:
        if exc.status != 404:
            raise SandboxError(f"cannot inspect image {image!r}: {exc.message}") from exc
    try:
        async with asyncio.timeout(_PULL_TIMEOUT_S):
            await docker.images.pull(image)
        return await docker.images.inspect(image)
    except (DockerError, TimeoutError) as exc:
        reason = exc.message if isinstance(exc, DockerError) else "timed out"
        if image in (DEFAULT_IMAGE, "debian:bookworm-slim", "debian:bookworm"):
            fix = PROVISION_HINT
        else:
            fix = (
                f"build or load it on this machine (`docker build -t {image} ...` or "
                f"`docker load -i image.tar`); for Debian-based images, {PROVISION_HINT}"
            )
        error = SandboxSpecError if getattr(exc, "status", 0) == 404 else SandboxError
        message = f"image {image!r} is not on this machine and cannot be pulled ({reason}); {fix}"
        raise error(message) from None
