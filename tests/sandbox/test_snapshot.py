"""Sandbox snapshots: restored sandboxes hold the snapshot's files, each its own copy; the
original goes on untouched; nothing is left once released (local copies, Docker images)."""

from __future__ import annotations

import asyncio
import json

import aiodocker
import pytest

from palaestra.sandbox import SandboxBackend, SandboxSpec
from palaestra.sandbox.base import SandboxError
from palaestra.sandbox.docker import DockerBackend
from palaestra.sandbox.docker_janitor import (
    OWNER_LABEL,
    SNAPSHOT_LABEL,
    owner_label,
    reclaim_docker_leftovers,
)
from palaestra.sandbox.docker_snapshot import SNAPSHOT_REPOSITORY
from palaestra.sandbox.janitor import reclaim_leftovers
from palaestra.sandbox.local import LocalBackend
from tests.sandbox.conftest import new_run_id
from tests.sandbox.docker_support import needs_docker


async def snapshot_gone(backend: SandboxBackend, snapshot) -> bool:
    """Whether the snapshot's storage is gone: its directory, or its image."""
    if isinstance(backend, LocalBackend):
        return not snapshot.directory.exists()
    async with aiodocker.Docker() as docker:
        try:
            await docker.images.inspect(snapshot.image)
        except aiodocker.DockerError as exc:
            return exc.status == 404
    return False


async def test_restored_sandboxes_diverge_from_the_snapshot(backend: SandboxBackend):
    spec = SandboxSpec(workdir="/app", writable_dirs=("/tmp", "/logs"))
    async with await backend.create(spec) as original:
        await original.exec("echo base > /app/base.txt && mkdir /tmp/d && echo t > /tmp/d/t")
        snapshot = await original.snapshot()
        assert snapshot.spec == spec
        await original.exec("echo after > /app/after.txt && rm /app/base.txt")
        restored = await asyncio.gather(*(backend.restore(snapshot) for _ in range(2)))
        try:
            for i, sandbox in enumerate(restored):
                await sandbox.exec(f"echo {i} > /app/mine{i}.txt")
            listings = [(await s.exec("ls /app; cat /tmp/d/t")).stdout.split() for s in restored]
            assert listings == [["base.txt", "mine0.txt", "t"], ["base.txt", "mine1.txt", "t"]]
            assert (await original.exec("ls /app")).stdout.split() == ["after.txt"]
            await snapshot.release()
            with pytest.raises(SandboxError, match="released"):
                await backend.restore(snapshot)
            assert (await restored[0].exec("cat /app/base.txt")).stdout == "base\n"
        finally:
            await asyncio.gather(*(s.close() for s in restored))
    assert await snapshot_gone(backend, snapshot)


async def test_a_local_snapshot_keeps_the_root_filesystems_changes(test_rootfs, state_dir):
    backend = LocalBackend(run_id=new_run_id(), state_dir=state_dir)
    try:
        sandbox = await backend.create(SandboxSpec(rootfs=test_rootfs))
        planted = await sandbox.exec(
            "rm /etc/os-release && mkdir -p /opt/new && echo n > /opt/new/f && python3 -c "
            '\'import os; os.symlink("/etc/passwd", "/workspace/link")\''
        )
        assert planted.ok, planted.output
        snapshot = await sandbox.snapshot()
        assert (snapshot.files / "workspace" / "link").is_symlink()  # copied, never followed
        await sandbox.close()
        restored = await backend.restore(snapshot, labels={"k": "v"})
        shown = await restored.exec("ls /etc; cat /opt/new/f")
        assert "os-release" not in shown.stdout.split() and "passwd" in shown.stdout.split()
        assert shown.stdout.endswith("n\n") and restored.spec.labels == {"k": "v"}
        # The janitor reclaims a dead owner's snapshot as it reclaims its sandboxes.
        meta = json.loads((snapshot.directory / "meta.json").read_text())
        meta.update(owner_start=1)  # this pid, started at another time: a process now gone
        (snapshot.directory / "meta.json").write_text(json.dumps(meta))
        assert await asyncio.to_thread(reclaim_leftovers, state_dir) == 1
        assert not snapshot.directory.exists() and not restored.closed
        await restored.close()
    finally:
        await backend.aclose()


@needs_docker
async def test_the_janitor_removes_a_dead_owners_snapshot_images():
    backend = DockerBackend(run_id=new_run_id())
    try:
        async with await backend.create(SandboxSpec()) as sandbox, aiodocker.Docker() as docker:
            # An image as a snapshot of a process that has ended leaves it.
            dead = f"{owner_label().rsplit('/', 2)[0]}/1/1"
            await docker.containers.container(sandbox.container_id).commit(
                repository=SNAPSHOT_REPOSITORY,
                tag="dead-owner",
                changes=[f"LABEL {OWNER_LABEL}={dead}", f"LABEL {SNAPSHOT_LABEL}=dead-owner"],
            )
            assert await reclaim_docker_leftovers(docker) >= 1  # other runs may have some too
            with pytest.raises(aiodocker.DockerError):
                await docker.images.inspect(f"{SNAPSHOT_REPOSITORY}:dead-owner")
    finally:
        await backend.aclose()
