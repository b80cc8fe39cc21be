"""A Docker sandbox: a running container driven through the helper, its pid 1
(:class:`DockerSandbox`); :class:`~palaestra.sandbox.docker.DockerBackend` makes them."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import aiodocker
from aiodocker.exceptions import DockerError

from palaestra.sandbox._channel import HelperChannel, sandbox_path
from palaestra.sandbox.base import (
    Command,
    ExecResult,
    SandboxClosedError,
    SandboxError,
    SandboxSpec,
    await_to_the_end,
)
from palaestra.sandbox.docker_attach import AttachedStream, attach
from palaestra.sandbox.docker_diff import ContainerSandbox
from palaestra.sandbox.docker_engine import docker_socket
from palaestra.sandbox.docker_snapshot import DockerSnapshot, commit

if TYPE_CHECKING:
    from palaestra.sandbox.docker import DockerBackend

_START_TIMEOUT_S = 60.0
_CLOSE_TIMEOUT_S = 30.0


class DockerSandbox(ContainerSandbox):
    """A running container driven through its helper; made by :meth:`DockerBackend.create`."""

    def __init__(
        self,
        sandbox_id: str,
        spec: SandboxSpec,
        docker: aiodocker.Docker,
        on_close: Callable[[DockerSandbox], None],
    ) -> None:
        self.id = sandbox_id
        self.spec = spec
        self.container_id: str | None = None
        self._docker = docker
        self._on_close = on_close
        self._channel: HelperChannel | None = None
        self._attach: AttachedStream | None = None
        self._closing: asyncio.Future[None] | None = None
        self._oom_kills_seen = 0
        self.restored_from: DockerSnapshot | None = None
        self.snapshots: set[DockerSnapshot] = set()  # its backend's, where its own go

    @property
    def closed(self) -> bool:
        return self._closing is not None

    async def _start(
        self, config: dict[str, Any], archive: bytes | None, backend: DockerBackend
    ) -> None:
        while True:
            try:
                container = await self._docker.containers.create(config, name=self._name())
                break
            except DockerError as exc:
                if exc.status == 500 and "storage-opt" in exc.message.lower():
                    if backend._storage_opt_refused(config):
                        continue
                raise SandboxError(f"cannot create container for {self.id}: {exc.message}") from exc
        self.container_id = container.id
        if archive is not None:
            await container.put_archive("/", archive)
        self._attach = await attach(docker_socket(), container.id, _START_TIMEOUT_S)
        self._channel = HelperChannel(
            self._attach.reader,
            self._attach.writer,  # type: ignore[arg-type]
            name=self.id,
            workdir=sandbox_path(self.spec.workdir),
            on_eof=self._death_report,
        )
        try:
            await container.start()
        except DockerError as exc:
            raise SandboxError(f"cannot start container for {self.id}: {exc.message}") from exc
        await self._channel.ready(_START_TIMEOUT_S)

    def _name(self) -> str:
        return f"palaestra-{self.id}"

    async def _death_report(self) -> SandboxError:
        tail = self._attach.stderr_tail() if self._attach is not None else ""
        return SandboxError(
            f"sandbox {self.id} (container {self.container_id}) stopped unexpectedly"
            + (f": {tail}" if tail else "")
        )

    async def close(self) -> None:
        """Remove the container (killing everything in it) and wait until it is gone.

        Idempotent. A caller cancelled meanwhile (even repeatedly) still waits until it is
        complete, then gets its cancellation.
        """
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._shutdown())
        await await_to_the_end(self._closing)

    async def _shutdown(self) -> None:
        try:
            if self._channel is not None:
                self._channel.begin_close()
            if self.container_id is not None:
                await remove_container(self._docker, self.container_id)
            if self._attach is not None:
                self._attach.close()
            if self._channel is not None:
                await self._channel.closed()
                self._channel.fail(SandboxClosedError(f"sandbox {self.id} is closed"))
        finally:
            await self._docker.close()
            self._on_close(self)
            if self.restored_from is not None:
                await self.restored_from.let_go()

    async def snapshot(self) -> DockerSnapshot:
        """The container committed to an image (see :mod:`.docker_snapshot`)."""
        assert self.container_id is not None
        self._usable_channel()
        url = f"unix://{docker_socket()}"
        return await commit(self._docker, self.container_id, self.spec, url, self.snapshots)

    async def _run(self, command: Command) -> ExecResult:
        result = await super()._run(command)
        if result.exit_code in (137, -9) and not result.oom_killed and self.spec.memory_mb:
            result = await self._with_oom_flag(result)
        return result

    async def _with_oom_flag(self, result: ExecResult) -> ExecResult:
        """Mark a SIGKILLed command as OOM-killed when the container's memory cgroup counted a
        new OOM kill since the last one seen (cgroup v1 ``memory.oom_control``, v2
        ``memory.events``)."""
        probe = await super()._run(
            Command(
                ["cat", "/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"],
                timeout=10,
            )
        )
        counts = [int(n) for n in re.findall(r"^oom_kill (\d+)$", probe.stdout, re.MULTILINE)]
        kills = max(counts, default=0)
        if kills > self._oom_kills_seen:
            self._oom_kills_seen = kills
            return replace(result, oom_killed=True)
        return result


async def remove_container(docker: aiodocker.Docker, container_id: str) -> None:
    """Force-remove a container and wait until the engine no longer lists it."""
    container = docker.containers.container(container_id)
    try:
        await container.delete(force=True)
    except DockerError as exc:
        if exc.status not in (404, 409):  # 409: AutoRemove is removing it already
            raise SandboxError(f"cannot remove container {container_id}: {exc.message}") from exc
    deadline = time.monotonic() + _CLOSE_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            await container.show()
        except DockerError as exc:
            if exc.status == 404:
                return
            raise
        await asyncio.sleep(0.02)
    raise SandboxError(
        f"container {container_id} was still there {_CLOSE_TIMEOUT_S:.0f}s after removal"
    )
