"""From a task to the sandbox it runs in: the layout of its environment, its limits, its image.

A :class:`~palaestra.tasks.Task` is data; this module turns it into a :class:`SandboxSpec`:

* :func:`local_plan`: the task's Dockerfile replayed for the local backend (no image build);
* :func:`task_sandbox_spec`: that plan as a spec, with the task's limits and Harbor's
  directories (blocking);
* :func:`prepare_sandbox_spec`: the spec for a named backend, building the task's image with
  Docker when the Dockerfile needs it (async).

Every spec made here carries Harbor's layout: the workdir from the task (``[environment]
workdir``, else the Dockerfile's ``WORKDIR``, else ``/app``) and the empty writable directories
Harbor's agent and verifier use (:data:`~palaestra.tasks.paths.HARBOR_DIRS`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from palaestra.sandbox.base import SandboxSpec
from palaestra.sandbox.docker import docker_unavailable
from palaestra.sandbox.dockerfile import DockerfileError
from palaestra.sandbox.dockerfile_replay import (
    DEFAULT_WORKDIR,
    LocalEnvironmentPlan,
    needs_image_build,
    plan_local_environment,
)
from palaestra.sandbox.images import BuildError, build_image, export_rootfs, image_config
from palaestra.tasks import Task, TaskError
from palaestra.tasks.paths import HARBOR_DIRS

#: The writable directories of a task's sandbox: ``/tmp`` and Harbor's.
TASK_WRITABLE_DIRS = ("/tmp", *HARBOR_DIRS)


def local_plan(task: Task) -> LocalEnvironmentPlan:
    """The local sandbox backend's layout of the task's environment.

    See :mod:`palaestra.sandbox.dockerfile_replay`; raises :class:`TaskError` for what the local
    backend cannot replay (RUN, multi-stage builds, docker-compose...).
    """
    compose = task.environment_dir / "docker-compose.yaml"
    if compose.exists():
        raise TaskError(
            compose,
            "docker-compose environments are not supported by the local sandbox backend",
            fix='run this task with sandbox="docker"',
        )
    environment = task.config.environment
    try:
        return plan_local_environment(
            task.environment_dir,
            docker_image=environment.docker_image,
            workdir=environment.workdir,
        )
    except DockerfileError as e:
        path = task.environment_dir / "Dockerfile"
        raise TaskError(path, e.problem, fix=e.fix, line=e.line) from e


def _check_networks(task: Task) -> None:
    """The verifier runs in the agent's sandbox, so both phases must share one network policy."""
    if task.verifier_network != task.network:
        raise TaskError(
            task.path / "task.toml",
            f"the agent's network ({task.network}) and the verifier's ({task.verifier_network}) "
            "differ, but the verifier runs in the agent's sandbox",
            field="verifier.network_mode",
            fix="give [agent] and [verifier] the same network_mode, or set it once in "
            "[environment]",
        )


def _limits(task: Task) -> dict[str, Any]:
    """What every spec of the task shares: Harbor's directories, network, resources, labels."""
    return {
        "writable_dirs": TASK_WRITABLE_DIRS,
        "network": task.network,
        "cpus": task.cpus,
        "memory_mb": task.memory_mb,
        "storage_mb": task.storage_mb,
        "labels": {"palaestra.task_id": task.id},
    }


def task_sandbox_spec(task: Task) -> SandboxSpec:
    """The local sandbox a task asks for: its Dockerfile's workdir, env and files, its limits.

    Blocking (reads the task's files); for Dockerfiles with ``RUN`` steps and for the docker
    backend, use :func:`prepare_sandbox_spec`.
    """
    _check_networks(task)
    plan = local_plan(task)
    return SandboxSpec(
        workdir=plan.workdir, env=dict(plan.env), files=dict(plan.files), **_limits(task)
    )


async def prepare_sandbox_spec(task: Task, backend: str) -> SandboxSpec:
    """The sandbox a task asks for on the backend named ``backend``; may build an image.

    * ``docker``: the task's ``docker_image``, or its Dockerfile built (cached by the content of
      ``environment/``, within ``[environment] build_timeout_sec``) into ``palaestra/task-<hash>``.
    * any other backend: the Dockerfile replayed (:func:`task_sandbox_spec`), unless it has
      ``RUN`` steps; then Docker builds the image and the sandbox runs on its exported root
      filesystem (``spec.rootfs``), with the image's WORKDIR and ENV.

    Slow work runs in threads or on the engine, never blocking the event loop.
    """
    _check_networks(task)
    environment = task.config.environment
    build = await asyncio.to_thread(needs_image_build, task.environment_dir)
    if backend == "docker":
        if await asyncio.to_thread((task.environment_dir / "Dockerfile").is_file):
            image = await build_task_image(task)
            files: dict[str, Path] = {}
        else:  # a prebuilt image; environment/ goes into the workdir, as Harbor does
            plan = await asyncio.to_thread(local_plan, task)
            image, files = plan.base_image or "", dict(plan.files)
        config = await image_config(image)
        workdir = environment.workdir or config.workdir or DEFAULT_WORKDIR
        if files:
            files = {workdir: next(iter(files.values()))}
        return SandboxSpec(workdir=workdir, image=image, files=files, **_limits(task))
    if not build:
        return await asyncio.to_thread(task_sandbox_spec, task)
    dockerfile = task.environment_dir / "Dockerfile"
    reason = await docker_unavailable()
    if reason is not None:
        raise TaskError(
            dockerfile,
            "this Dockerfile has RUN steps (or several stages): the local backend runs it from "
            f"an image Docker builds, but Docker is not available ({reason})",
            fix='enable Docker as said, or run this task with sandbox="docker"',
        )
    rootfs = await export_rootfs(await build_task_image(task))
    if rootfs.config.entrypoint:
        raise TaskError(
            dockerfile,
            "the image sets an ENTRYPOINT, which the local backend does not run",
            fix='run this task with sandbox="docker"',
        )
    workdir = environment.workdir or rootfs.config.workdir or DEFAULT_WORKDIR
    # The local backend gives each sandbox a fresh writable workdir; it starts as the image's.
    image_workdir = rootfs.path / workdir.lstrip("/")
    files = {workdir: image_workdir} if await asyncio.to_thread(image_workdir.is_dir) else {}
    return SandboxSpec(
        workdir=workdir, env=dict(rootfs.config.env), files=files, rootfs=rootfs.path,
        **_limits(task),
    )  # fmt: skip


async def build_task_image(task: Task) -> str:
    """The image of the task's Dockerfile; a failed build is the task's error."""
    try:
        return await build_image(
            task.environment_dir, timeout=task.config.environment.build_timeout_sec
        )
    except BuildError as e:
        raise TaskError(
            task.environment_dir / "Dockerfile",
            str(e),
            fix="correct the step the build log shows failing (or raise [environment] "
            "build_timeout_sec if it timed out)",
        ) from e
