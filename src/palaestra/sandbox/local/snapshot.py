"""Snapshots of local sandboxes: a copy of the sandbox's ``fs/`` taken while it is frozen.

A sandbox's ``fs/`` holds everything its processes can write: the host directories behind its
writable directories and, on a root filesystem, the overlay's writable layer (see
:mod:`.layout`). A snapshot copies it, but for the overlay's work directory, while the
sandbox's cgroups are frozen (nothing inside can change or swap a file under the copy), into
``<state_dir>/<run_id>/snap-<id>/fs`` beside the run's sandboxes, with a ``meta.json`` naming its
owner: the janitor reclaims a dead run's snapshots as it reclaims its sandboxes. Restoring copies
it into the new sandbox's ``fs/`` before the sandbox starts (:func:`.layout.fill`). Copies are
``cp -a --reflink=auto``: a reflink where the file system has them (btrfs, xfs), a copy
elsewhere; owners, modes, links, extended attributes and the overlay's whiteouts kept.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import subprocess
from pathlib import Path

from palaestra.sandbox.base import SandboxError, SandboxSnapshot, SandboxSpec, await_to_the_end
from palaestra.sandbox.janitor import SandboxMeta, remove_sandbox_dir
from palaestra.sandbox.limits import freeze

#: Where a sandbox's overlay keeps its work directory, inside ``fs/`` (never copied).
OVERLAY_DIR = ".overlay"


class LocalSnapshot(SandboxSnapshot):
    """A local sandbox's files in ``directory/fs``; made by :meth:`LocalSandbox.snapshot`.

    ``registry`` is the set of open snapshots it belongs to (its backend's), left once freed.
    """

    def __init__(
        self, snapshot_id: str, spec: SandboxSpec, directory: Path, registry: set[LocalSnapshot]
    ) -> None:
        super().__init__(snapshot_id, spec)
        self.directory = directory
        self.owner_pid = os.getpid()
        self._registry = registry
        registry.add(self)
        live.add(self)

    @property
    def files(self) -> Path:
        """The copy of the sandbox's ``fs/``."""
        return self.directory / "fs"

    async def _free(self) -> None:
        await await_to_the_end(asyncio.ensure_future(asyncio.to_thread(self.remove_now)))

    def remove_now(self) -> None:
        """Remove the snapshot's directory. Blocking (for a thread, or process exit)."""
        self._released = True
        remove_sandbox_dir(self.directory)
        self._registry.discard(self)
        live.discard(self)


#: Every local snapshot of this process not yet freed: what process exit removes.
live: set[LocalSnapshot] = set()


def take_snapshot(
    sandbox_dir: Path,
    meta: SandboxMeta,
    spec: SandboxSpec,
    cgroups: list[str],
    registry: set[LocalSnapshot],
) -> LocalSnapshot:
    """Copy the files of the sandbox in ``sandbox_dir`` (whose record is ``meta``) while its
    ``cgroups`` are frozen. Blocking."""
    snapshot_id = f"snap-{secrets.token_hex(6)}"
    directory = sandbox_dir.parent / snapshot_id
    directory.mkdir()
    snap_meta = dataclasses.replace(
        meta, sandbox_id=snapshot_id, bwrap_pid=None, cgroups=[], mounts=[]
    )
    snap_meta.write(directory)  # from here on the janitor knows it
    snapshot = LocalSnapshot(snapshot_id, spec, directory, registry)
    try:
        freeze(cgroups, True)
        try:
            _copy_fs(sandbox_dir / "fs", snapshot.files)
        finally:
            freeze(cgroups, False)
    except BaseException:
        snapshot.remove_now()
        raise
    return snapshot


def _copy_fs(fs: Path, dest: Path) -> None:
    """``cp -a`` of a sandbox's ``fs/`` to the new directory ``dest``, but for the overlay's
    work directory (its writable layer, ``upper/``, is copied). ``dest`` is root's alone, as a
    sandbox's ``fs/`` is its root's: the copy keeps the set-id files the sandbox made."""
    dest.mkdir(mode=0o700)
    sources = [fs / name for name in os.listdir(fs) if name != OVERLAY_DIR]
    copy_into(sources, dest)
    upper = fs / OVERLAY_DIR / "upper"
    if upper.is_dir():
        (dest / OVERLAY_DIR).mkdir()
        copy_into([upper], dest / OVERLAY_DIR)


def copy_into(sources: list[Path], dest: Path) -> None:
    """``cp -a --reflink=auto`` of ``sources`` into the directory ``dest``. Blocking."""
    if not sources:
        return
    proc = subprocess.run(
        ["cp", "-a", "--reflink=auto", "--", *map(str, sources), str(dest)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SandboxError(f"cannot copy a sandbox's files to {dest}: {proc.stderr.strip()}")
