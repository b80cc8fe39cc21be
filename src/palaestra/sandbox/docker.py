"""The docker backend: each sandbox is a container on the real Docker engine.

The container's pid 1 is the helper the local backend uses, on its own runtime (bound read-only at
``/.palaestra``: :mod:`palaestra.sandbox.helper_runtime`), so any image works. The image's
``ENTRYPOINT`` is kept (Harbor overrides only the command): the helper runs it, followed by
:data:`HARBOR_COMMAND`, as the sandbox's *service*, which ``kill_all`` kills with the rest and
starts again from that argv (:meth:`~palaestra.sandbox.base.Sandbox.kill_all`). The host attaches to
the container's stdin/stdout once, before starting it, and drives the helper over that stream with
:class:`~palaestra.sandbox._channel.HelperChannel` (exec and file transfers are
:class:`~palaestra.sandbox.channel_sandbox.ChannelSandbox`'s): an exec is one round trip on an open
connection, not a ``docker exec``.

Engine calls (create, start, remove, list, images) go through aiodocker. The attach stream is
opened on a raw connection to the engine's unix socket (:mod:`palaestra.sandbox.docker_attach`):
the protocol needs a writer that sends at once (a cancel frame is written without waiting), which
aiodocker's attach stream does not offer, and the engine's stdout framing is decoded there.

Limits: ``cpus`` (CPU quota; more than the host's CPU count is lowered to it, warning once, and
the sandbox's ``adjustments`` say so), ``memory_mb`` (no swap on top), ``pids_limit`` (by default
the local backend's :data:`~palaestra.sandbox.limits.DEFAULT_PIDS_LIMIT`) and ``network``
(``none``: no interface but loopback; ``public``: the default bridge) are enforced by the engine.
``storage_mb`` (what the container may write) becomes a ``size`` storage option where the engine's
storage driver supports one: overlay2 on xfs with project quotas or btrfs (the data roots
``scripts/provision-docker.sh`` sets up; on btrfs with full qgroups the image's size is added,
since they count its files: :mod:`palaestra.sandbox.btrfs_quota`), zfs. Elsewhere it is not enforced and a warning says so once per backend.

Every container carries ``palaestra.run_id``, ``palaestra.sandbox`` and its owner (boot id, pid
namespace, pid and start time of the process that made it:
:func:`~palaestra.sandbox.docker_janitor.owner_label`). It is created with ``AutoRemove`` and
``StdinOnce``: when the owning process dies, its attach connection closes, the helper reads EOF and
exits, and the engine removes the container.
:func:`~palaestra.sandbox.docker_janitor.reclaim_docker_leftovers` removes what remains of dead
owners (e.g. a container created but never started, a snapshot's image) when a backend creates its
first sandbox. Snapshots commit the container to an image: :mod:`palaestra.sandbox.docker_snapshot`.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import secrets
import tarfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from palaestra.sandbox._channel import HELPER_DIR_IN_SANDBOX, sandbox_path
from palaestra.sandbox.base import (
    SandboxBackend,
    SandboxError,
    SandboxSnapshot,
    SandboxSpec,
)
from palaestra.sandbox.btrfs_quota import QuotaMode, quota_mode
from palaestra.sandbox.docker_engine import (
    DEFAULT_IMAGE,
    PROVISION_HINT,
    client,
    docker_socket,
    docker_unavailable,
    ensure_image,
    reclaim_dead_owners,
)
from palaestra.sandbox.docker_janitor import OWNER_LABEL, owner_label, reclaim_docker_leftovers
from palaestra.sandbox.docker_sandbox import DockerSandbox
from palaestra.sandbox.docker_snapshot import DockerSnapshot
from palaestra.sandbox.helper_runtime import helper_argv, helper_runtime
from palaestra.sandbox.janitor import RUN_ID_LABEL
from palaestra.sandbox.limits import DEFAULT_PIDS_LIMIT

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_IMAGE",
    "HARBOR_COMMAND",
    "PROVISION_HINT",
    "SANDBOX_LABEL",
    "DockerBackend",
    "DockerSandbox",
    "docker_socket",
    "docker_unavailable",
    "ensure_image",
    "reclaim_dead_owners",
]

SANDBOX_LABEL = "palaestra.sandbox"
#: What Harbor runs as the command of a task's container (after the image's ENTRYPOINT).
HARBOR_COMMAND = ["sh", "-c", "sleep infinity"]
_STICKY_DIRS = frozenset({"/tmp", "/var/tmp"})
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class DockerBackend(SandboxBackend):
    """Creates sandboxes as containers on the local Docker engine. ``image`` is used for specs
    that name none. Before its first sandbox, a backend removes the containers of dead owners
    (see :func:`reclaim_docker_leftovers`)."""

    name = "docker"

    def __init__(self, run_id: str | None = None, *, image: str = DEFAULT_IMAGE) -> None:
        self.run_id = run_id or secrets.token_hex(6)
        if not _RUN_ID.fullmatch(self.run_id):
            raise ValueError(f"run_id {self.run_id!r} must match {_RUN_ID.pattern}")
        self.image = image
        self._open: set[DockerSandbox] = set()
        self._snapshots: set[DockerSnapshot] = set()
        self._reclaimed = False
        self._storage_opt_supported: bool | None = None
        self._storage_driver: str | None = None
        self._btrfs_quota: QuotaMode | None = None
        self._owner = owner_label()
        self._runtime: Path | None = None
        self._cpus_warned = False

    async def create(self, spec: SandboxSpec) -> DockerSandbox:
        if spec.rootfs is not None:
            raise SandboxError(
                "the docker backend runs images, not root filesystem directories; set "
                "spec.image (or use the local backend for spec.rootfs)"
            )
        return await self._launch(spec, await asyncio.to_thread(_initial_files, spec))

    async def restore(
        self, snapshot: SandboxSnapshot, *, labels: dict[str, str] | None = None
    ) -> DockerSandbox:
        """A new container of ``snapshot``'s image (see :mod:`.docker_snapshot`)."""
        if not isinstance(snapshot, DockerSnapshot):
            raise SandboxError(f"snapshot {snapshot.id} is not a docker one; restore it there")
        snapshot.hold()  # until the container is closed
        spec = replace(snapshot.spec, labels={**snapshot.spec.labels, **(labels or {})})
        return await self._launch(spec, None, snapshot)

    async def _launch(
        self, spec: SandboxSpec, archive: bytes | None, snapshot: DockerSnapshot | None = None
    ) -> DockerSandbox:
        """Start a container of ``spec``'s image, or of ``snapshot``'s, with ``archive`` (a
        tar) extracted at ``/`` before it starts."""
        workdir = sandbox_path(spec.workdir)
        sandbox_id = f"sb-{secrets.token_hex(6)}"
        docker = client()
        sandbox = DockerSandbox(sandbox_id, spec, docker, on_close=self._open.discard)
        sandbox.restored_from, sandbox.snapshots = snapshot, self._snapshots
        self._open.add(sandbox)
        try:
            if not self._reclaimed:
                self._reclaimed = True
                await reclaim_docker_leftovers(docker)
            image = spec.image or self.image
            image_info = await ensure_image(docker, image)
            if self._storage_driver is None:
                info = await docker.system.info()
                root = info.get("DockerRootDir", "")
                if info.get("Driver") == "btrfs" and root:
                    self._btrfs_quota = await asyncio.to_thread(quota_mode, root)
                self._storage_driver = info.get("Driver", "")
            if self._runtime is None:
                self._runtime = await asyncio.to_thread(helper_runtime)
            entrypoint = (image_info.get("Config") or {}).get("Entrypoint") or []
            config = self._container_config(spec, image, workdir, sandbox_id, entrypoint)
            if snapshot is not None:  # the snapshot's files, the image's entrypoint
                config["Image"] = snapshot.image
                image_info = await docker.images.inspect(snapshot.image)
            sandbox.adjustments = self._cpus(spec, config)
            btrfs_full = self._storage_driver == "btrfs" and self._btrfs_quota != "squota"
            if "StorageOpt" in config["HostConfig"] and btrfs_full:
                # full qgroups limit what a container references, the image's files included
                # (simple quotas count only what it writes: storage_mb itself).
                size_mb = spec.storage_mb + (image_info.get("Size", 0) >> 20) + 1
                config["HostConfig"]["StorageOpt"] = {"size": f"{size_mb}M"}
            await sandbox._start(config, archive, self)
        except BaseException:
            await sandbox.close()
            raise
        return sandbox

    async def aclose(self) -> None:
        """Close every sandbox this backend created that is still open; release its snapshots."""
        await asyncio.gather(*(sandbox.close() for sandbox in list(self._open)))
        await asyncio.gather(*(snapshot.release() for snapshot in list(self._snapshots)))

    def _container_config(
        self, spec: SandboxSpec, image: str, workdir: str, sandbox_id: str, entrypoint: list[str]
    ) -> dict[str, Any]:
        host: dict[str, Any] = {
            "Binds": [f"{self._runtime}:{HELPER_DIR_IN_SANDBOX}:ro"]
            + [
                f"{m.source.absolute()}:{sandbox_path(m.target)}:{'ro' if m.read_only else 'rw'}"
                for m in spec.mounts
            ],
            "NetworkMode": "none" if spec.network == "none" else "bridge",
            "AutoRemove": True,
            # Docker's defaults minus what the local backend drops too (see local.CAPABILITIES).
            "CapDrop": ["MKNOD", "NET_RAW", "SETPCAP"],
            "SecurityOpt": ["no-new-privileges"],
            "Init": False,
        }
        if spec.memory_mb is not None:
            host["Memory"] = host["MemorySwap"] = spec.memory_mb << 20
        host["PidsLimit"] = spec.pids_limit or DEFAULT_PIDS_LIMIT
        if spec.storage_mb is not None and self._storage_opt_supported is not False:
            host["StorageOpt"] = {"size": f"{spec.storage_mb}M"}
        service = {"service": [*entrypoint, *HARBOR_COMMAND]} if entrypoint else {}
        helper = helper_argv(json.dumps(service) if service else None)
        return {
            "Image": image,
            "Entrypoint": helper[:1],
            "Cmd": helper[1:],
            "WorkingDir": workdir,
            "Env": [f"{k}={v}" for k, v in spec.env.items()],
            "Hostname": spec.hostname,
            "Labels": {
                **spec.labels,
                RUN_ID_LABEL: self.run_id,
                SANDBOX_LABEL: sandbox_id,
                OWNER_LABEL: self._owner,
            },
            "AttachStdin": True,
            "AttachStdout": True,
            "AttachStderr": True,
            "OpenStdin": True,
            "StdinOnce": True,
            "Tty": False,
            "HostConfig": host,
        }

    def _cpus(self, spec: SandboxSpec, config: dict[str, Any]) -> tuple[str, ...]:
        """Set ``spec.cpus`` as the quota, at most the host's CPUs; the sandbox's adjustments."""
        cpus, host_cpus = spec.cpus, os.cpu_count() or 1
        if cpus is None:
            return ()
        config["HostConfig"]["NanoCpus"] = int(min(cpus, host_cpus) * 1e9)
        if cpus <= host_cpus:
            return ()
        if not self._cpus_warned:
            self._cpus_warned = True
            log.warning("sandboxes ask for %g CPUs; this host has %d", cpus, host_cpus)
        return (f"cpus {host_cpus} (asked for {cpus:g}; the host has {host_cpus})",)

    def _storage_opt_refused(self, config: dict[str, Any]) -> bool:
        """After the engine refused StorageOpt: drop it (warning once) and say to retry."""
        if "StorageOpt" not in config["HostConfig"]:
            return False
        if self._storage_opt_supported is None:
            log.warning(
                "the Docker storage driver cannot limit a container's disk size (it needs "
                "overlay2 on xfs with pquota or btrfs, as scripts/provision-docker.sh sets up, "
                "or zfs): storage_mb is not enforced"
            )
        self._storage_opt_supported = False
        del config["HostConfig"]["StorageOpt"]
        return True


def _initial_files(spec: SandboxSpec) -> bytes | None:
    """One tar, extracted at ``/`` before the container starts: the writable directories
    (empty, world-writable where Docker images usually have them so) and ``spec.files``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for directory in sorted({sandbox_path(d) for d in spec.writable_dirs}):
            info = tarfile.TarInfo(directory.lstrip("/"))
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if directory in _STICKY_DIRS else 0o755
            info.mtime = int(time.time())
            tar.addfile(info)
        for target, source in spec.files.items():
            source = Path(source)
            if not source.exists():
                raise FileNotFoundError(f"spec.files source {source} does not exist")
            tar.add(source, arcname=sandbox_path(target).lstrip("/"))
    return buf.getvalue() if spec.writable_dirs or spec.files else None
