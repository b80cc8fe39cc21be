"""Who owns a palaestra container or image, and removing those of owners that are gone.

Every container the docker backend makes, and every image a snapshot commits
(:mod:`palaestra.sandbox.docker_snapshot`), carries ``palaestra.run_id`` and
``palaestra.owner``: the boot, pid namespace, pid and start time of the process that made it
(:func:`owner_label`). :func:`reclaim_docker_leftovers` removes those whose owner has ended; a
backend runs it before its first sandbox.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import aiodocker
from aiodocker.exceptions import DockerError

from palaestra.sandbox.janitor import RUN_ID_LABEL, proc_stat, process_start_time

OWNER_LABEL = "palaestra.owner"
#: Marks an image committed by a snapshot; its value is the snapshot's id.
SNAPSHOT_LABEL = "palaestra.snapshot"


def _machine() -> str:
    """This boot of this machine's pid namespace: ``<boot id>/<pid namespace inode>``.

    A pid names a process only within one boot and one pid namespace; owners elsewhere (another
    container sharing the engine) cannot be checked from here, so they are never reclaimed.
    """
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        pid_ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return "unknown"
    return f"{boot}/{pid_ns}"


def owner_label(pid: int | None = None, start: int | None = None) -> str:
    """The ``palaestra.owner`` label naming process ``pid`` (this one by default) for good:
    ``<machine>/<pid>/<start time>``."""
    if pid is None:
        pid = os.getpid()
        start = process_start_time(pid)
    return f"{_machine()}/{pid}/{start}"


def _owner_gone(label: str, machine: str) -> bool:
    """Whether the owner a label names has certainly ended (never true for other machines)."""
    try:
        owner_machine, pid, start = label.rsplit("/", 2)
        pid_n = int(pid)
    except ValueError:
        return False  # not ours to judge
    if owner_machine != machine:
        return owner_machine.split("/", 1)[0] != machine.split("/", 1)[0]  # an older boot
    stat = proc_stat(pid_n)
    if stat is None or stat[0] in ("Z", "X"):
        return True
    return start != "None" and int(stat[19]) != int(start)


async def reclaim_docker_leftovers(docker: aiodocker.Docker) -> int:
    """Remove the palaestra containers, then the snapshot images, whose owning process is
    gone; return how many. Those of live owners (this process included) are never touched."""
    machine = await asyncio.to_thread(_machine)
    containers = await docker.containers.list(all=True, filters={"label": [RUN_ID_LABEL]})
    removed = 0
    for container in containers:
        labels = container["Labels"] or {}
        if not _owner_gone(labels.get(OWNER_LABEL, ""), machine):
            continue
        try:
            await container.delete(force=True)
            removed += 1
        except DockerError as exc:
            if exc.status not in (404, 409):  # gone, or being removed already
                raise
    images = await docker.images.list(all=True, filters={"label": [SNAPSHOT_LABEL]})
    for image in sorted(images, key=lambda i: i.get("Created", 0), reverse=True):  # children first
        if not _owner_gone((image.get("Labels") or {}).get(OWNER_LABEL, ""), machine):
            continue
        try:
            await docker.images.delete(image["Id"], force=True)
            removed += 1
        except DockerError as exc:
            if exc.status not in (404, 409):  # gone, or still used
                raise
    return removed
