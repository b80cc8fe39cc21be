"""From a task to the sandbox it runs in: the layout of its environment, its limits, its image.

A :class:`~palaestra.tasks.Task` is data; this module turns it into a :class:`SandboxSpec`:

* :func:`local_plan`: the task's Dockerfile replayed for the local backend (no image build);
* :func:`task_sandbox_spec`: that plan as a spec, with the task's limits and Harbor's
  directories (blocking);
* :func:`prepare_sandbox_spec`: the spec for a named backend, building the task's image with
  Docker when the Dockerfile needs it (async);
* :func:`prepare_verifier_spec`: the same for a separate verifier's sandbox (Harbor's
  ``environment_mode = "separate"``: :mod:`palaestra.tasks.verifier_env`).

Every spec made here carries Harbor's layout: the workdir from the task (``[environment]
workdir``, else the Dockerfile's ``WORKDIR``, else ``/app``) and the empty writable directories
Harbor's agent and verifier use (:data:`~palaestra.tasks.paths.HARBOR_DIRS`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from palaestra.sandbox.base import SandboxSpec
from palaestra.sandbox.docker import docker_unavailable
from palaestra.sandbox.dockerfile import DockerfileError
from palaestra.sandbox.dockerfile_replay import (
    DEFAULT_WORKDIR,
    LocalEnvironmentPlan,
    needs_image_build,
    plan_local_environment,
)
from palaestra.sandbox.images import (
    LOCAL_ROOTFS_LABEL,
    BuildError,
    build_image,
    export_rootfs,
    image_config,
    local_image_labels,
)
from palaestra.tasks import Task, TaskError
from palaestra.tasks.config import EnvironmentConfig
from palaestra.tasks.paths import HARBOR_DIRS, TESTS_DIR

#: The writable directories of a task's sandbox: ``/tmp`` and Harbor's.
TASK_WRITABLE_DIRS = ("/tmp", *HARBOR_DIRS)


def local_plan(task: Task) -> LocalEnvironmentPlan:
    """The local sandbox backend's layout of the task's environment.

    See :mod:`palaestra.sandbox.dockerfile_replay`; raises :class:`TaskError` for what the local
    backend cannot replay (RUN, multi-stage builds, docker-compose...).
    """
    return _local_plan(_Definition.agent(task))


@dataclass(frozen=True)
class _Definition:
    """What one of a task's sandboxes is made from: the agent's, or a separate verifier's."""

    task: Task
    directory: Path
    """environment/, or tests/ for a verifier image the task defines there."""
    environment: EnvironmentConfig
    network: Literal["none", "public"]
    bundled_tests: bool = False

    @classmethod
    def agent(cls, task: Task) -> _Definition:
        return cls(task, task.environment_dir, task.config.environment, task.network)

    @classmethod
    def verifier(cls, task: Task) -> _Definition:
        found = task.verifier_environment
        if found is None:
            raise ValueError(f"task {task.id} has no separate verifier environment")
        return cls(task, found.directory, found.config, task.verifier_network, found.bundled_tests)


def _local_plan(definition: _Definition) -> LocalEnvironmentPlan:
    compose = definition.directory / "docker-compose.yaml"
    if compose.exists():
        raise TaskError(
            compose,
            "docker-compose environments are not supported by the local sandbox backend",
            fix='run this task with sandbox="docker"',
        )
    environment = definition.environment
    try:
        plan = plan_local_environment(
            definition.directory,
            docker_image=environment.docker_image,
            workdir=environment.workdir,
        )
    except DockerfileError as e:
        path = definition.directory / "Dockerfile"
        raise TaskError(path, e.problem, fix=e.fix, line=e.line) from e
    if definition.bundled_tests and environment.docker_image:  # tests/ is not copied in
        return dataclasses.replace(plan, files={})
    return plan


def _check_networks(task: Task) -> None:
    """A shared verifier runs in the agent's sandbox: both phases must share one network."""
    if task.verifier_environment is None and task.verifier_network != task.network:
        raise TaskError(
            task.path / "task.toml",
            f"the agent's network ({task.network}) and the verifier's ({task.verifier_network}) "
            "differ, but the verifier runs in the agent's sandbox",
            field="verifier.network_mode",
            fix="give [agent] and [verifier] the same network_mode, set it once in "
            '[environment], or run the verifier apart (environment_mode = "separate")',
        )


def _limits(definition: _Definition) -> dict[str, Any]:
    """What every spec of the task shares: Harbor's directories, network, resources, labels."""
    environment = definition.environment
    return {
        "writable_dirs": TASK_WRITABLE_DIRS,
        "network": definition.network,
        "cpus": None if environment.cpus is None else float(environment.cpus),
        "memory_mb": environment.memory_mb,
        "storage_mb": environment.storage_mb,
        "labels": {"palaestra.task_id": definition.task.id},
    }


def task_sandbox_spec(task: Task) -> SandboxSpec:
    """The local sandbox a task asks for: its Dockerfile's workdir, env and files, its limits.

    Blocking (reads the task's files); for Dockerfiles with ``RUN`` steps and for the docker
    backend, use :func:`prepare_sandbox_spec`.
    """
    _check_networks(task)
    return _replayed_spec(_Definition.agent(task))


def _replayed_spec(definition: _Definition) -> SandboxSpec:
    plan = _local_plan(definition)
    return SandboxSpec(
        workdir=plan.workdir, env=dict(plan.env), files=dict(plan.files), **_limits(definition)
    )


async def prepare_sandbox_spec(task: Task, backend: str) -> SandboxSpec:
    """The sandbox a task asks for on the backend named ``backend``; may build an image.

    * ``docker``: the task's ``docker_image``, or its Dockerfile built (cached by the content of
      ``environment/``, within ``[environment] build_timeout_sec``) into ``palaestra/task-<hash>``.
    * any other backend: the Dockerfile replayed (:func:`task_sandbox_spec`), unless it has
      ``RUN`` steps; then Docker builds the image and the sandbox runs on its exported root
      filesystem (``spec.rootfs``), with the image's WORKDIR and ENV. A prebuilt
      ``docker_image`` labelled ``palaestra.local-rootfs=1`` (``tasks synth``'s) runs on its
      exported root filesystem too, ``environment/`` copied into the workdir.

    Slow work runs in threads or on the engine, never blocking the event loop.
    """
    _check_networks(task)
    return await _prepare(_Definition.agent(task), backend)


async def prepare_verifier_spec(task: Task, backend: str) -> SandboxSpec:
    """The sandbox of the task's separate verifier (:attr:`Task.verifier_environment`), made
    as :func:`prepare_sandbox_spec` makes the agent's: from ``tests/Dockerfile`` (its build
    context ``tests/``), ``[verifier.environment] docker_image``, or the agent's environment
    afresh. An image that holds its own ``/tests`` keeps it on the local backend too."""
    definition = _Definition.verifier(task)
    spec = await _prepare(definition, backend)
    if definition.bundled_tests and spec.rootfs is not None:
        tests = spec.rootfs / TESTS_DIR.lstrip("/")
        if await asyncio.to_thread(tests.is_dir):  # /tests is a fresh writable directory
            spec = dataclasses.replace(spec, files={**spec.files, TESTS_DIR: tests})
    return spec


async def _prepare(definition: _Definition, backend: str) -> SandboxSpec:
    environment = definition.environment
    directory = definition.directory
    build = await asyncio.to_thread(needs_image_build, directory)
    if backend == "docker":
        if await asyncio.to_thread((directory / "Dockerfile").is_file):
            image = await _build_image(definition)
            files: dict[str, Path] = {}
        else:  # a prebuilt image; environment/ goes into the workdir, as Harbor does
            plan = await asyncio.to_thread(_local_plan, definition)
            image, files = plan.base_image or "", dict(plan.files)
        config = await image_config(image)
        workdir = environment.workdir or config.workdir or DEFAULT_WORKDIR
        if files:
            files = {workdir: next(iter(files.values()))}
        return SandboxSpec(workdir=workdir, image=image, files=files, **_limits(definition))
    image = environment.docker_image
    if not build and image and not await asyncio.to_thread((directory / "Dockerfile").is_file):
        labels = await local_image_labels(image)
        if labels is not None and labels.get(LOCAL_ROOTFS_LABEL) == "1":
            return await _prebuilt_rootfs_spec(definition, image)
    if not build:
        return await asyncio.to_thread(_replayed_spec, definition)
    dockerfile = directory / "Dockerfile"
    reason = await docker_unavailable()
    if reason is not None:
        raise TaskError(
            dockerfile,
            "this Dockerfile has RUN steps (or several stages): the local backend runs it from "
            f"an image Docker builds, but Docker is not available ({reason})",
            fix='enable Docker as said, or run this task with sandbox="docker"',
        )
    rootfs = await export_rootfs(await _build_image(definition))
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
        workdir=workdir,
        env=dict(rootfs.config.env),
        files=files,
        rootfs=rootfs.path,
        **_limits(definition),
    )


async def _prebuilt_rootfs_spec(definition: _Definition, image: str) -> SandboxSpec:
    """A prebuilt image that asks for it (:data:`LOCAL_ROOTFS_LABEL`) runs on its exported root
    filesystem, shared read-only by its sandboxes, with ``environment/`` copied into the
    workdir as Harbor does for a prebuilt image."""
    plan = await asyncio.to_thread(_local_plan, definition)
    rootfs = await export_rootfs(image)
    workdir = definition.environment.workdir or rootfs.config.workdir or DEFAULT_WORKDIR
    files = {workdir: next(iter(plan.files.values()))} if plan.files else {}
    return SandboxSpec(
        workdir=workdir,
        env=dict(rootfs.config.env),
        files=files,
        rootfs=rootfs.path,
        **_limits(definition),
    )


async def _build_image(definition: _Definition) -> str:
    """The image of the definition's Dockerfile; a failed build is the task's error."""
    try:
        return await build_image(
            definition.directory, timeout=definition.environment.build_timeout_sec
        )
    except BuildError as e:
        raise TaskError(
            definition.directory / "Dockerfile",
            str(e),
            fix="correct the step the build log shows failing (or raise build_timeout_sec "
            "if it timed out)",
        ) from e


class TaskSpecs(Mapping[str, SandboxSpec]):
    """Each task's sandbox spec, prepared (off the loop) once per task, and a separate
    verifier's with it, so that a task whose tests image does not build fails before its agent
    runs. As a mapping: task id -> the agent's spec, for the tasks prepared so far."""

    def __init__(self) -> None:
        self._agent: dict[str, SandboxSpec] = {}
        self._verifier: dict[str, SandboxSpec] = {}

    async def agent(self, task: Task, backend: str) -> SandboxSpec:
        """The agent's sandbox spec for ``task`` on the ``backend`` named."""
        if task.id not in self._agent:
            self._agent[task.id] = await prepare_sandbox_spec(task, backend)
            if task.verifier_environment is not None:
                self._verifier[task.id] = await prepare_verifier_spec(task, backend)
        return self._agent[task.id]

    def verifier(self, task_id: str) -> SandboxSpec | None:
        """The separate verifier's spec (None: the task verifies in the agent's sandbox)."""
        return self._verifier.get(task_id)

    def __getitem__(self, task_id: str) -> SandboxSpec:
        return self._agent[task_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._agent)

    def __len__(self) -> int:
        return len(self._agent)
