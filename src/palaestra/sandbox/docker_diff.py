"""What a container changed in its file system, as the engine sees it (``docker diff``).

:class:`ContainerSandbox` is the part of the docker backend's sandbox that asks the engine, not
the processes inside, which paths the container created, changed or deleted on top of its image:
nothing inside can hide a change from it (a reset modification time, a file put back).
"""

from __future__ import annotations

import aiodocker

from palaestra.sandbox.base import is_within
from palaestra.sandbox.channel_sandbox import ChannelSandbox


class ContainerSandbox(ChannelSandbox):
    """A :class:`ChannelSandbox` running as a container: ``_docker`` is its engine client and
    ``container_id`` its container, set by the subclass once it is created."""

    _docker: aiodocker.Docker
    container_id: str | None

    async def changed_paths(self, under: tuple[str, ...]) -> list[str]:
        self._usable_channel()
        changes = await self._docker._query_json(f"containers/{self.container_id}/changes")
        paths = {change["Path"] for change in changes or ()}
        return sorted(p for p in paths if any(is_within(p, d) for d in under))
