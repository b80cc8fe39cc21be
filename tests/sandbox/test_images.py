"""Task images: builds cached by context, rootfs export, and tasks run through them end to end.

On the real engine; skipped (with the how-to) without one, a failure in CI.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiodocker
import pytest

from palaestra import CodeEnv
from palaestra.env.sandbox_spec import prepare_sandbox_spec
from palaestra.run import rollout
from palaestra.sandbox import SandboxSpec
from palaestra.sandbox.base import SandboxError
from palaestra.sandbox.docker import DEFAULT_IMAGE, DockerBackend, docker_socket
from palaestra.sandbox.images import (
    TASK_IMAGE_PREFIX,
    build_image,
    context_hash,
    export_rootfs,
    rootfs_cache_dir,
)
from palaestra.sandbox.local import LocalBackend
from palaestra.scaffolds import OraclePolicy
from palaestra.tasks import TaskError, load_task
from palaestra.tasks.pack_cache import materialise
from tests.sandbox.conftest import new_run_id
from tests.sandbox.docker_support import labelled_containers, needs_docker, unavailable_reason

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

#: The starter pack as it runs (its cache copy, with the harness runtime).
STARTER = materialise("starter")

#: A task whose Dockerfile has RUN steps: the local backend can only run it from the built image.
RUN_STEP_DOCKERFILE = """\
FROM debian:bookworm-slim
ENV GREETING=hello-from-image
WORKDIR /app
COPY seed.txt /app/seed.txt
RUN mkdir -p /opt/tool && printf '#!/bin/sh\\necho tool:$GREETING\\n' > /opt/tool/run \\
    && chmod +x /opt/tool/run && sed -i 's/seed/grown/' /app/seed.txt
"""


@pytest.fixture(autouse=True)
async def no_container_left() -> AsyncIterator[None]:
    if unavailable_reason() is not None:
        yield
        return
    before = set(await labelled_containers())
    yield
    assert set(await labelled_containers()) <= before, "a test left a container behind"


@pytest.fixture
def rootfs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PALAESTRA_ROOTFS_DIR", str(tmp_path / "rootfs-cache"))
    return tmp_path / "rootfs-cache"


def run_step_task(make_task) -> Path:
    return make_task(
        "run-step-task",
        instruction="Write the tool's output to /app/answer.txt.",
        dockerfile=RUN_STEP_DOCKERFILE,
        files={"seed.txt": "seed\n"},
        solve_sh="/opt/tool/run > /app/answer.txt\n",
        test_sh="""\
            if [ "$(cat /app/answer.txt)" = "tool:hello-from-image" ] && \\
               [ "$(cat /app/seed.txt)" = "grown" ]; then echo 1 > /logs/verifier/reward.txt
            else echo 0 > /logs/verifier/reward.txt; fi
            """,
    )


async def image_id(tag: str) -> str:
    async with aiodocker.Docker(url=f"unix://{docker_socket()}") as docker:
        return (await docker.images.inspect(tag))["Id"]


# -- builds --------------------------------------------------------------------------------------


@needs_docker
async def test_build_is_cached_by_context_content(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {DEFAULT_IMAGE}\nCOPY f /f\nRUN cat /f\n")
    (ctx / "f").write_text(f"one {os.getpid()} {tmp_path.name}\n")
    tag = await build_image(ctx, timeout=300)
    assert tag.startswith(TASK_IMAGE_PREFIX)
    first_id = await image_id(tag)
    assert await build_image(ctx, timeout=300) == tag  # same content: not rebuilt
    assert await image_id(tag) == first_id
    (ctx / "f").write_text("two\n")
    changed = await build_image(ctx, timeout=300)
    assert changed != tag and await image_id(changed) != first_id
    before_chmod = context_hash(ctx)
    (ctx / "f").chmod(0o755)  # the executable bit is content too
    assert context_hash(ctx) != before_chmod


@needs_docker
async def test_a_new_base_image_means_a_rebuild(tmp_path: Path) -> None:
    base = f"palaestra/test-base:{os.getpid()}-{tmp_path.name}"
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {base}\nRUN true\n")
    async with aiodocker.Docker(url=f"unix://{docker_socket()}") as docker:
        await docker.images.tag(DEFAULT_IMAGE, repo=base.split(":")[0], tag=base.split(":")[1])
        try:
            first = await build_image(ctx, timeout=300)
            other = tmp_path / "other"
            other.mkdir()
            (other / "Dockerfile").write_text(f"FROM {DEFAULT_IMAGE}\nLABEL x={tmp_path.name}\n")
            await docker.images.tag(
                await build_image(other, timeout=300),
                repo=base.split(":")[0],
                tag=base.split(":")[1],
            )
            assert await build_image(ctx, timeout=300) != first
        finally:
            await docker.images.delete(base)


@needs_docker
async def test_failed_build_reports_the_log(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        f"FROM {DEFAULT_IMAGE}\nRUN echo about-to-fail-{os.getpid()} && exit 7\n"
    )
    with pytest.raises(SandboxError, match=r"(?s)failed.*about-to-fail"):
        await build_image(tmp_path, timeout=300)


@needs_docker
async def test_build_timeout(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(f"FROM {DEFAULT_IMAGE}\nRUN sleep 60 # {tmp_path.name}\n")
    with pytest.raises(SandboxError, match="build_timeout_sec"):
        await build_image(tmp_path, timeout=2)


async def test_missing_dockerfile(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="no Dockerfile"):
        await build_image(tmp_path)


# -- rootfs export -------------------------------------------------------------------------------


@needs_docker
async def test_export_rootfs_is_cached_by_image_id(rootfs_dir: Path) -> None:
    rootfs = await export_rootfs(DEFAULT_IMAGE)
    assert rootfs.path.parent == rootfs_cache_dir() == rootfs_dir
    assert rootfs.path.name == (await image_id(DEFAULT_IMAGE)).removeprefix("sha256:")
    assert (rootfs.path / "usr/bin/python3").exists()
    assert (rootfs.path / "etc/debian_version").read_text().startswith("12")
    assert rootfs.config.env["PATH"].startswith("/usr/local/sbin")
    marker = rootfs.path / ".palaestra-test-marker"
    marker.write_text("x")
    again = await export_rootfs(DEFAULT_IMAGE)
    assert again.path == rootfs.path and marker.exists()  # reused, not exported again
    left = await asyncio.to_thread(lambda: sorted(p.name for p in rootfs_dir.iterdir()))
    assert left == [rootfs.path.name, rootfs.path.name + ".layers"]  # no partial export left


@needs_docker
async def test_exports_on_one_base_store_its_files_once(tmp_path: Path, rootfs_dir: Path) -> None:
    """Two images on one base: the second export's base files are hard links to the first's,
    what its own layer changed is its own, and a sandbox writing over a shared file changes
    neither export."""
    tags = []
    for name, step in (("a", "echo a > /a.txt"), ("b", "echo 99 >> /etc/debian_version")):
        context = tmp_path / name
        context.mkdir()
        (context / "Dockerfile").write_text(f"FROM debian:bookworm-slim\nRUN {step}\n")
        tags.append(await build_image(context))
    first, second = [await export_rootfs(tag) for tag in tags]
    dash = [os.stat(root.path / "usr/bin/dash") for root in (first, second)]
    assert dash[0].st_ino == dash[1].st_ino and dash[0].st_nlink >= 2
    version = [root.path / "etc/debian_version" for root in (first, second)]
    assert os.stat(version[0]).st_ino != os.stat(version[1]).st_ino
    assert version[1].read_text().endswith("99\n") and "99" not in version[0].read_text()
    assert (first.path / "a.txt").exists() and not (second.path / "a.txt").exists()

    def disk(root: Path, without: Path | None = None) -> int:  # hard links counted once
        theirs = (
            {(s.st_dev, s.st_ino) for s in map(os.lstat, without.rglob("*"))} if without else set()
        )
        mine = {(s.st_dev, s.st_ino): s.st_blocks for s in map(os.lstat, root.rglob("*"))}
        return 512 * sum(blocks for key, blocks in mine.items() if key not in theirs)

    # The second export adds only what its layer changed, and its directories.
    assert disk(second.path, without=first.path) * 5 < disk(first.path)
    backend = LocalBackend(run_id=new_run_id(), state_dir=tmp_path / "state")
    try:
        async with await backend.create(SandboxSpec(rootfs=second.path)) as sandbox:
            res = await sandbox.exec("echo planted > /usr/bin/dash && cat /usr/bin/dash")
            assert res.stdout == "planted\n", res
    finally:
        await backend.aclose()
    assert b"planted" not in (first.path / "usr/bin/dash").read_bytes()
    assert os.stat(second.path / "usr/bin/dash").st_ino == dash[0].st_ino


# -- tasks end to end ----------------------------------------------------------------------------


@needs_docker
async def test_starter_task_end_to_end_on_docker() -> None:
    tasks = [load_task(STARTER / "algorithms-easy-merge-intervals")]
    async with CodeEnv(tasks, sandbox=DockerBackend()) as env:
        episode = await rollout(env, OraclePolicy.from_tasks(env.tasks))
        spec = env._specs["algorithms-easy-merge-intervals"]
    assert spec.image is not None and spec.image.startswith(TASK_IMAGE_PREFIX)
    assert episode.terminated and episode.reward == 1.0, episode.info


@needs_docker
async def test_run_step_task_runs_on_the_local_backend_from_its_image(
    make_task, rootfs_dir: Path
) -> None:
    task = load_task(run_step_task(make_task))
    spec = await prepare_sandbox_spec(task, "local")
    assert spec.rootfs is not None and spec.rootfs.parent == rootfs_dir
    assert spec.workdir == "/app" and spec.env["GREETING"] == "hello-from-image"
    async with CodeEnv([task], sandbox="local") as env:
        episode = await rollout(env, OraclePolicy.from_tasks(env.tasks))
    assert episode.terminated and episode.reward == 1.0, episode.info


@needs_docker
async def test_a_failing_build_is_the_tasks_error(make_task) -> None:
    task = load_task(
        make_task(dockerfile=f"FROM {DEFAULT_IMAGE}\nRUN echo no-jq-{os.getpid()}; exit 3\n")
    )
    for backend in ("local", "docker"):
        with pytest.raises(TaskError, match=r"(?s)Dockerfile.*no-jq.*Fix: correct the step"):
            await prepare_sandbox_spec(task, backend)


async def test_run_step_task_without_docker_says_how_to_enable_it(
    make_task, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    task = load_task(run_step_task(make_task))
    with pytest.raises(TaskError, match=r"RUN steps.*provision-docker\.sh"):
        await prepare_sandbox_spec(task, "local")


async def test_tasks_without_run_steps_do_not_need_docker(
    make_task, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    task = load_task(
        make_task(
            files={"a.txt": "a"},
            dockerfile="FROM debian:bookworm-slim\nWORKDIR /app\nCOPY a.txt .\n",
        )
    )
    spec = await prepare_sandbox_spec(task, "local")
    assert spec.rootfs is None and spec.image is None and "/app/a.txt" in spec.files
