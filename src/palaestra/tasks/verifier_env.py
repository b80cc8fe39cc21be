"""Where a task's verifier runs: Harbor's shared and separate verifier modes, as data.

Harbor 0.26's rules (``harbor/models/task/verifier_mode.py``), for a single-step task:

* the mode is ``[verifier] environment_mode`` when set, else ``separate`` when
  ``[verifier.environment]`` is set, else ``shared`` (the agent's own sandbox);
* in separate mode the environment's settings (resources, network, workdir) are
  ``[verifier.environment]``, else a fresh copy of ``[environment]``;
* its image, first match: ``[verifier.environment] docker_image``, or ``tests/Dockerfile`` built
  with ``tests/`` as the build context (in both cases the image holds ``/tests/test.sh`` itself:
  the tests are *bundled*, not uploaded), else the agent's environment (``environment/`` or its
  ``docker_image``) started afresh, and ``tests/`` uploaded as in shared mode;
* what reaches it from the agent are the *artifacts* only (:func:`artifact_sources`):
  ``/logs/artifacts`` and every ``artifacts = [...]`` entry of ``task.toml``, put back at the
  same paths. Nothing else of the agent's sandbox does: not its processes, not its changes to
  the system.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from palaestra.tasks.config import ArtifactConfig, EnvironmentConfig, StepConfig, TaskConfig
from palaestra.tasks.paths import ARTIFACTS_DIR

VerifierMode = Literal["shared", "separate"]


@dataclass(frozen=True)
class VerifierEnvironment:
    """The sandbox a separate verifier runs in.

    ``config``: its ``[environment]`` settings (``docker_image`` is the image to run, if any).
    ``directory``: where its image is defined: ``tests/`` when ``bundled_tests``, else
    ``environment/``. ``bundled_tests``: the image holds ``/tests`` itself; nothing is uploaded.
    """

    config: EnvironmentConfig
    directory: Path
    bundled_tests: bool


def verifier_mode(config: TaskConfig) -> VerifierMode:
    """``shared`` or ``separate``, as Harbor resolves it."""
    verifier = config.verifier
    if verifier.environment_mode is not None:
        return verifier.environment_mode
    return "separate" if verifier.environment is not None else "shared"


def step_verifier_mode(config: TaskConfig, step: StepConfig) -> VerifierMode:
    """A step's mode: its own ``[steps.verifier]`` first, else the task's (Harbor's
    ``resolve_step_verifier_mode``)."""
    own = step.verifier
    if own.environment_mode is not None:
        return own.environment_mode
    return "separate" if own.environment is not None else verifier_mode(config)


def verifier_environment(config: TaskConfig, task_dir: Path) -> VerifierEnvironment | None:
    """The separate verifier's environment, or None in shared mode (see the module doc)."""
    if verifier_mode(config) != "separate":
        return None
    own = config.verifier.environment
    settings = own if own is not None else config.environment.model_copy(deep=True)
    tests_dir = task_dir / "tests"
    if own is not None and own.docker_image:
        return VerifierEnvironment(settings, tests_dir, bundled_tests=True)
    if (tests_dir / "Dockerfile").is_file() or (tests_dir / "docker-compose.yaml").is_file():
        return VerifierEnvironment(
            settings.model_copy(update={"docker_image": None}), tests_dir, bundled_tests=True
        )
    return VerifierEnvironment(
        settings.model_copy(update={"docker_image": config.environment.docker_image}),
        task_dir / "environment",
        bundled_tests=False,
    )


def artifact_sources(config: TaskConfig, workdir: str) -> list[ArtifactConfig]:
    """What a separate verifier receives from the agent's sandbox: ``/logs/artifacts`` first
    (unless an entry names it), then the ``artifacts`` entries; a relative ``source`` is taken
    from the agent's ``workdir``."""
    entries = [
        ArtifactConfig(source=entry) if isinstance(entry, str) else entry
        for entry in config.artifacts
    ]
    entries = [
        entry.model_copy(update={"source": posixpath.join(workdir, entry.source)})
        for entry in entries
    ]
    if not any(entry.source.rstrip("/") == ARTIFACTS_DIR for entry in entries):
        entries.insert(0, ArtifactConfig(source=ARTIFACTS_DIR))
    return entries
