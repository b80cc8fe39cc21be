"""Docker images for tasks: built from a task's ``environment/``, and exported as root filesystems.

* :func:`build_image` builds a Docker build context into ``palaestra/task-<hash>``, where the
  hash covers every file of the context (paths, contents, executable bits, symlink targets)
  and the ids of the base images its ``FROM`` lines name: an unchanged context on an unchanged
  base is never rebuilt; a changed one always is.
* :func:`export_rootfs` turns an image into a directory the local backend can run on
  (:attr:`SandboxSpec.rootfs`), cached by image id under ``$PALAESTRA_ROOTFS_DIR`` (default
  ``~/.cache/palaestra/rootfs/<image id>/``). The export is unpacked next to its final place and
  renamed into it once complete, so a reader never sees half a tree and an interrupted export
  is redone. Sandboxes share it read-only. Exports of images on a common base share that
  base's files as hard links (:mod:`palaestra.sandbox.rootfs_share`): the base is stored once.

Together they let a task whose Dockerfile has ``RUN`` steps run on the local backend: Docker
builds the layer once, then every episode starts at local-sandbox speed.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import secrets
import shutil
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp
from aiodocker.exceptions import DockerError

from palaestra.sandbox.base import SandboxError, SandboxSpecError
from palaestra.sandbox.docker import docker_socket, ensure_image
from palaestra.sandbox.docker_janitor import OWNER_LABEL, owner_label
from palaestra.sandbox.dockerfile import parse_dockerfile
from palaestra.sandbox.janitor import RUN_ID_LABEL
from palaestra.sandbox.rootfs_share import (
    closest_export,
    layers_file,
    record_layers,
    share_files,
)

TASK_IMAGE_PREFIX = "palaestra/task-"
CONTEXT_HASH_LABEL = "palaestra.context_hash"
_CHUNK = 1 << 16
_BUILD_LOG_TAIL = 30


class BuildError(SandboxSpecError):
    """A Dockerfile that did not build: a failing step or the build timeout (the task's fault,
    unlike an engine that cannot be reached)."""


@dataclass(frozen=True)
class ImageConfig:
    """What an image says about how to run it (``docker image inspect``'s ``Config``)."""

    image_id: str
    workdir: str | None
    env: dict[str, str]
    entrypoint: list[str] | None
    user: str | None
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Rootfs:
    """An image's root filesystem, exported to a host directory."""

    path: Path
    config: ImageConfig


def rootfs_cache_dir() -> Path:
    configured = os.environ.get("PALAESTRA_ROOTFS_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "palaestra" / "rootfs"


def context_hash(context: Path) -> str:
    """A content hash of a build context (blocking: call it from a thread in async code)."""
    digest = hashlib.sha256()
    for path in sorted(context.rglob("*")):
        rel = path.relative_to(context).as_posix()
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            entry = f"L {rel} {os.readlink(path)}"
        elif stat.S_ISDIR(info.st_mode):
            entry = f"D {rel}"
        else:
            entry = (
                f"F {rel} {info.st_mode & 0o111:o} {hashlib.sha256(path.read_bytes()).hexdigest()}"
            )
        digest.update(entry.encode() + b"\0")
    return digest.hexdigest()


def _base_images(dockerfile: Path) -> list[str]:
    """The images the ``FROM`` lines name (those without variables; stages excluded)."""
    stages: set[str] = set()
    bases = []
    for ins in parse_dockerfile(dockerfile.read_text(encoding="utf-8")):
        if ins.keyword != "FROM":
            continue
        words = [w for w in ins.value.split() if not w.startswith("--")]
        if not words:
            continue
        if "$" not in words[0] and words[0].lower() not in stages:
            bases.append(words[0])
        if len(words) == 3 and words[1].lower() == "as":
            stages.add(words[2].lower())
    return bases


def _context_tar(context: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(context, arcname=".")
    return buf.getvalue()


def _image_config(data: dict[str, Any]) -> ImageConfig:
    config = data.get("Config") or {}
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    return ImageConfig(
        image_id=data["Id"],
        workdir=config.get("WorkingDir") or None,
        env=env,
        entrypoint=config.get("Entrypoint") or None,
        user=config.get("User") or None,
        labels=dict(config.get("Labels") or {}),
    )


def _client() -> aiodocker.Docker:
    return aiodocker.Docker(url=f"unix://{docker_socket()}")


async def image_config(image: str) -> ImageConfig:
    """The run configuration of ``image`` (pulled when missing and pullable)."""
    async with _client() as docker:
        return _image_config(await ensure_image(docker, image))


#: An image with this label set to "1" asks the local backend to run it on its exported root
#: filesystem (a task's prebuilt ``docker_image`` otherwise runs on the host's system
#: directories there): palaestra's own images whose files the tasks need (``tasks synth``).
LOCAL_ROOTFS_LABEL = "palaestra.local-rootfs"


async def local_image_labels(image: str) -> dict[str, str] | None:
    """The labels of ``image`` when the engine has it (never pulled), else None; None too when
    no engine answers."""
    try:
        if not await asyncio.to_thread(os.path.exists, docker_socket()):
            return None
        async with _client() as docker:
            return dict((await docker.images.inspect(image)).get("Config", {}).get("Labels") or {})
    except (DockerError, OSError, SandboxError, aiohttp.ClientError):
        return None


# Concurrent builds of one context in this process wait for the first instead of repeating it.
_builds: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Lock] = {}


async def build_image(context: Path, *, timeout: float = 600.0) -> str:
    """Build the Docker context ``context`` (holding a ``Dockerfile``); return the image tag.

    Cached by content: when ``palaestra/task-<hash>`` exists it is returned at once. Base images
    are never pulled when present locally. Raises :class:`SandboxError` with the end of the
    build log when the build fails or exceeds ``timeout`` seconds.
    """
    context = await asyncio.to_thread(Path(context).absolute)
    if not await asyncio.to_thread((context / "Dockerfile").is_file):
        raise SandboxSpecError(f"{context} has no Dockerfile to build")
    digest = await asyncio.to_thread(context_hash, context)
    async with _client() as docker:
        # The base images are part of what is built: a re-provisioned base means a rebuild.
        for base in await asyncio.to_thread(_base_images, context / "Dockerfile"):
            try:
                base_id = (await docker.images.inspect(base))["Id"]
            except DockerError:
                base_id = "absent"  # the build pulls it, or fails saying so
            digest = hashlib.sha256(f"{digest} {base} {base_id}".encode()).hexdigest()
    tag = f"{TASK_IMAGE_PREFIX}{digest[:20]}"
    key = (asyncio.get_running_loop(), tag)
    lock = _builds.setdefault(key, asyncio.Lock())
    try:
        async with lock, _client() as docker:
            try:
                await docker.images.inspect(tag)
                return tag
            except DockerError as exc:
                if exc.status != 404:
                    raise SandboxError(f"cannot inspect image {tag}: {exc.message}") from exc
            archive = await asyncio.to_thread(_context_tar, context)
            log: list[str] = []
            try:
                async with asyncio.timeout(timeout):
                    async for line in docker.images.build(
                        fileobj=io.BytesIO(archive),
                        encoding="identity",
                        tag=tag,
                        rm=True,
                        forcerm=True,
                        labels={CONTEXT_HASH_LABEL: digest},
                        stream=True,
                    ):
                        if "stream" in line:
                            log.extend(line["stream"].splitlines())
                        if "error" in line:
                            raise BuildError(
                                f"building {context / 'Dockerfile'} failed: {line['error'].strip()}"
                                + _tail(log)
                            )
            except TimeoutError:
                raise BuildError(
                    f"building {context / 'Dockerfile'} took longer than {timeout:g}s "
                    "([environment] build_timeout_sec in task.toml)" + _tail(log)
                ) from None
            except DockerError as exc:  # the engine refused the Dockerfile or a step failed
                raise BuildError(
                    f"building {context / 'Dockerfile'} failed: {exc.message}" + _tail(log)
                ) from exc
            return tag
    finally:
        if not lock.locked():
            _builds.pop(key, None)


def _tail(log: list[str]) -> str:
    lines = [line for line in log if line.strip()][-_BUILD_LOG_TAIL:]
    return ("\nbuild log (end):\n" + "\n".join(lines)) if lines else ""


async def export_rootfs(image: str) -> Rootfs:
    """The root filesystem of ``image`` as a host directory, cached by image id."""
    async with _client() as docker:
        image_info = await ensure_image(docker, image)
        config = _image_config(image_info)
        target = rootfs_cache_dir() / config.image_id.removeprefix("sha256:")
        layers = list(image_info.get("RootFS", {}).get("Layers") or [])
        if await asyncio.to_thread(target.is_dir):
            if layers and not await asyncio.to_thread(layers_file(target).exists):
                await asyncio.to_thread(record_layers, target, layers)  # an older export's
            return Rootfs(target, config)
        await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
        partial = target.parent / f".{target.name}.{secrets.token_hex(4)}.partial"
        await asyncio.to_thread(partial.mkdir)
        try:
            await _export_into(docker, config.image_id, partial)
            base = await asyncio.to_thread(closest_export, target.parent, layers)
            if base is not None:  # the files of the layers in common are stored once
                await asyncio.to_thread(share_files, partial, base)
            try:
                await asyncio.to_thread(os.rename, partial, target)
            except OSError:
                if not await asyncio.to_thread(target.is_dir):
                    raise
                # another process finished the same export first: keep theirs
            if layers:
                await asyncio.to_thread(record_layers, target, layers)
        finally:
            await asyncio.to_thread(shutil.rmtree, partial, ignore_errors=True)
    return Rootfs(target, config)


async def _export_into(docker: aiodocker.Docker, image_id: str, directory: Path) -> None:
    """Stream ``docker export`` of a never-started container of the image into ``tar -x``."""
    container = await docker.containers.create(
        {
            "Image": image_id,
            "Entrypoint": ["true"],
            "Cmd": [],
            # Labelled like sandboxes, so that the janitor removes it if this process dies.
            "Labels": {RUN_ID_LABEL: "rootfs-export", OWNER_LABEL: owner_label()},
        }
    )
    try:
        tar = await asyncio.create_subprocess_exec(
            "tar",
            "-x",
            "--numeric-owner",
            "--exclude=dev/*",
            "-C",
            str(directory),
            "-f",
            "-",
            stdin=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert tar.stdin is not None and tar.stderr is not None
        stderr_task = asyncio.create_task(tar.stderr.read())
        try:
            # aiodocker has no streaming export; this is its documented low-level query.
            async with docker._query(f"containers/{container.id}/export") as response:
                async for chunk in response.content.iter_chunked(_CHUNK):
                    tar.stdin.write(chunk)
                    await tar.stdin.drain()
            tar.stdin.close()
            code = await tar.wait()
        except BaseException:
            tar.kill()
            await tar.wait()
            raise
        stderr = (await stderr_task).decode(errors="replace").strip()
        if code != 0:
            raise SandboxError(f"unpacking the export of {image_id} failed: {stderr}")
    finally:
        await container.delete(force=True)
