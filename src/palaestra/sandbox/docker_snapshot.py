"""Snapshots of Docker sandboxes: the container committed to an image.

``docker commit`` (the container paused meanwhile, so the files are consistent) makes an image
``palaestra/snapshot:<snapshot id>`` of the container's file system: its image and every change
on top (the writable directories included: the docker backend keeps them in the container's own
layer), not its bind mounts. It keeps the container's labels (``palaestra.run_id``, its owner)
and adds ``palaestra.snapshot``, so the janitor removes it once its owner has ended
(:mod:`palaestra.sandbox.docker_janitor`). A restored sandbox is a new container of that image,
configured as the snapshot's spec says, with the original image's entrypoint as its service. The
image is removed once the snapshot is released and the last container running it is closed.
"""

from __future__ import annotations

import secrets

import aiodocker
from aiodocker.exceptions import DockerError

from palaestra.sandbox.base import SandboxError, SandboxSnapshot, SandboxSpec
from palaestra.sandbox.docker_janitor import SNAPSHOT_LABEL

SNAPSHOT_REPOSITORY = "palaestra/snapshot"


class DockerSnapshot(SandboxSnapshot):
    """A Docker sandbox's files as the image :attr:`image`; made by
    :meth:`~palaestra.sandbox.docker.DockerSandbox.snapshot`. ``url`` is the engine's, and
    ``registry`` the set of open snapshots it belongs to (its backend's), left once freed."""

    def __init__(
        self,
        snapshot_id: str,
        spec: SandboxSpec,
        url: str,
        registry: set[DockerSnapshot],
    ) -> None:
        super().__init__(snapshot_id, spec)
        self.image = f"{SNAPSHOT_REPOSITORY}:{snapshot_id}"
        self._url = url
        self._registry = registry
        registry.add(self)

    async def _free(self) -> None:
        self._registry.discard(self)
        async with aiodocker.Docker(url=self._url) as docker:
            try:
                await docker.images.delete(self.image)
            except DockerError as exc:
                if exc.status != 404:
                    raise SandboxError(
                        f"cannot remove snapshot image {self.image}: {exc.message}"
                    ) from exc


async def commit(
    docker: aiodocker.Docker,
    container_id: str,
    spec: SandboxSpec,
    url: str,
    registry: set[DockerSnapshot],
) -> DockerSnapshot:
    """Commit the container ``container_id`` (paused meanwhile) to a snapshot's image. The
    snapshot is in ``registry`` from the start: a commit cancelled halfway is still released
    with the backend."""
    snapshot = DockerSnapshot(f"snap-{secrets.token_hex(6)}", spec, url, registry)
    try:
        await docker.containers.container(container_id).commit(
            repository=SNAPSHOT_REPOSITORY,
            tag=snapshot.id,
            changes=f"LABEL {SNAPSHOT_LABEL}={snapshot.id}",
            pause=True,
        )
    except DockerError as exc:
        await snapshot.release()
        raise SandboxError(f"cannot commit container {container_id}: {exc.message}") from exc
    return snapshot
