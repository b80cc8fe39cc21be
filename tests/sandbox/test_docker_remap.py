"""The docker backend on an engine with user namespace remapping (``dockerd --userns-remap``).

``scripts/provision-docker-remap.sh`` (which ``.ci/run`` calls) starts that engine beside the
main one, on :data:`~tests.procs.REMAPPED_DOCKER_HOST`; these tests point ``DOCKER_HOST`` at
it. Root in its containers is the first uid of the ``dockremap`` user's subordinate range, an
unprivileged host uid. Skipped with the reason where this machine cannot remap (the script
writes it down) or the engine is not provisioned; a failure instead in CI, as every test marked
``docker`` (see tests/sandbox/docker_support.py).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiodocker
import pytest

from palaestra import CodeEnv
from palaestra.run import rollout
from palaestra.sandbox.base import Mount, SandboxSpec
from palaestra.sandbox.docker import DEFAULT_IMAGE, DockerBackend
from palaestra.scaffolds import NopPolicy, OraclePolicy
from palaestra.tasks import load_task
from palaestra.tasks.pack_cache import materialise
from tests.procs import REMAPPED_DOCKER_HOST, new_marker

#: The starter pack as it runs (its cache copy, with the harness runtime).
STARTER = materialise("starter")
#: Where scripts/provision-docker-remap.sh writes why this machine cannot remap.
UNAVAILABLE = Path("/var/log/palaestra/docker-remap.unavailable")
PROVISION = "run `sudo scripts/provision-docker-remap.sh` (after scripts/provision-docker.sh)"
#: The whole-range identity map: root inside would be the host's root.
HOST_IDENTITY_MAP = ["0", "0", "4294967295"]
NOBODY = 65534


async def _engine_reason(socket_path: str) -> str | None:
    """Why the remapped engine answering on ``socket_path`` cannot be used, or None."""
    try:
        async with aiodocker.Docker(url=REMAPPED_DOCKER_HOST) as docker:
            info = await docker.system.info()
            await docker.images.inspect(DEFAULT_IMAGE)
    except (aiodocker.DockerError, OSError) as exc:
        return f"the userns-remap engine at {socket_path} is not ready ({exc}); {PROVISION}"
    if not any("name=userns" in opt for opt in info.get("SecurityOptions") or []):
        return f"the engine at {socket_path} runs without userns-remap; {PROVISION}"
    return None


def _unavailable() -> str | None:
    if UNAVAILABLE.exists():
        return (
            f"this machine cannot run Docker with userns-remap: {UNAVAILABLE.read_text().strip()}"
        )
    socket_path = REMAPPED_DOCKER_HOST.removeprefix("unix://")
    if not os.path.exists(socket_path):
        return f"no userns-remap engine at {socket_path}; {PROVISION}"
    return asyncio.run(_engine_reason(socket_path))


_REASON = _unavailable()
pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(_REASON is not None, reason=f"userns-remap tests skipped: {_REASON}"),
]


def subordinate_start(name: str, file: str) -> int:
    """The first id of ``name``'s subordinate range in /etc/subuid or /etc/subgid."""
    for line in Path(file).read_text().splitlines():
        user, start, _count = line.split(":")
        if user == name:
            return int(start)
    raise AssertionError(f"{name} has no range in {file}")


@pytest.fixture
async def backend(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DockerBackend]:
    """A docker backend on the remapped engine (``DOCKER_HOST`` points at it meanwhile)."""
    monkeypatch.setenv("DOCKER_HOST", REMAPPED_DOCKER_HOST)
    backend = DockerBackend(run_id=f"test-{new_marker()}")
    yield backend
    await backend.aclose()


async def test_root_inside_is_an_unprivileged_uid_outside(
    backend: DockerBackend, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"  # writable by anyone: the remapped root may write here
    guarded = tmp_path / "guarded"  # the host root's, 0755: an escaped root may not
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    guarded.mkdir(mode=0o755)
    spec = SandboxSpec(
        mounts=(
            Mount(shared, "/shared", read_only=False),
            Mount(guarded, "/guarded", read_only=False),
        )
    )
    async with await backend.create(spec) as sandbox:
        uid_map = (await sandbox.exec("cat /proc/self/uid_map")).stdout.split()
        gid_map = (await sandbox.exec("cat /proc/self/gid_map")).stdout.split()
        assert uid_map != HOST_IDENTITY_MAP
        uid_start = subordinate_start("dockremap", "/etc/subuid")
        gid_start = subordinate_start("dockremap", "/etc/subgid")
        assert uid_map == ["0", str(uid_start), "65536"] and uid_start > 0
        assert gid_map == ["0", str(gid_start), "65536"]

        made = await sandbox.exec("id -u && touch /shared/by-root")
        assert made.ok and made.stdout == "0\n", made
        by_root = (shared / "by-root").stat()
        assert (by_root.st_uid, by_root.st_gid) == (uid_start, gid_start)

        made = await sandbox.exec("id -u && touch /shared/by-nobody", user="nobody")
        assert made.ok and made.stdout == f"{NOBODY}\n", made
        assert (shared / "by-nobody").stat().st_uid == uid_start + NOBODY

        denied = await sandbox.exec("touch /guarded/by-root")
        assert not denied.ok and "Permission denied" in denied.stderr, denied
        assert not (guarded / "by-root").exists()
        # the host root's files are nobody's inside, and root there cannot take them
        owner = await sandbox.exec("stat -c %u /guarded; chown 0 /guarded")
        assert owner.stdout == f"{NOBODY}\n" and not owner.ok, owner


async def test_snapshot_keeps_ownership(backend: DockerBackend) -> None:
    async with await backend.create(SandboxSpec(workdir="/app")) as sandbox:
        made = await sandbox.exec(
            "echo kept > /app/root-file && touch /app/nobody-file"
            " && chown nobody /app/nobody-file && chmod 600 /app/root-file"
        )
        assert made.ok, made
        snapshot = await sandbox.snapshot()
    try:
        async with await backend.restore(snapshot) as restored:
            res = await restored.exec("stat -c '%u %a %n' /app/root-file /app/nobody-file")
            assert res.stdout.splitlines() == [
                "0 600 /app/root-file",
                f"{NOBODY} 644 /app/nobody-file",
            ]
            assert (await restored.exec("cat /app/root-file", user="nobody")).exit_code != 0
    finally:
        await snapshot.release()


async def test_starter_task_oracle_and_nop_on_the_remapped_engine(backend: DockerBackend) -> None:
    tasks = [load_task(STARTER / "algorithms-easy-merge-intervals")]
    async with CodeEnv(tasks, sandbox=backend) as env:
        solved = await rollout(env, OraclePolicy.from_tasks(env.tasks))
        nothing = await rollout(env, NopPolicy())
        image = env._specs["algorithms-easy-merge-intervals"].image
    assert solved.terminated and solved.reward == 1.0, solved.info
    assert nothing.terminated and nothing.reward == 0.0, nothing.info
    async with aiodocker.Docker(url=REMAPPED_DOCKER_HOST) as docker:
        assert image is not None
        await docker.images.inspect(image)  # built on the remapped engine, not the main one
