"""The loaded task: its identity, configuration and instruction, and what they say.

A :class:`Task` is data: where its files are and what its ``task.toml`` asks for. How its
environment becomes a sandbox is the environment layer's business
(:mod:`palaestra.env.sandbox_spec`).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Literal

from palaestra.tasks.config import HealthcheckConfig, StepConfig, TaskConfig
from palaestra.tasks.verifier_env import VerifierEnvironment, verifier_environment

_SANDBOX_NETWORK: dict[str, Literal["none", "public"]] = {"public": "public", "no-network": "none"}


@dataclasses.dataclass(frozen=True)
class Task:
    """A loaded Harbor task. Make one with :func:`load_task`, which checks everything below."""

    id: str
    path: Path
    """The task directory, absolute."""
    config: TaskConfig = dataclasses.field(repr=False, compare=False)
    instruction: str = dataclasses.field(repr=False, compare=False)
    """instruction.md without its leading canary lines: what the agent is given."""
    steps: tuple[Task, ...] = dataclasses.field(default=(), repr=False, compare=False)
    """A multi-step task's steps (``[[steps]]``), in order, each a :class:`Task` whose
    :attr:`step` names it; empty for a single-step task."""
    step: str | None = None
    """The name of the step this is (its files are under ``steps/<step>/``), or None."""

    def with_step(self, name: str, instruction: str) -> Task:
        """Step ``name`` of this task: id ``<task id>/steps/<name>``, the step's instruction."""
        return dataclasses.replace(
            self, id=f"{self.id}/steps/{name}", instruction=instruction, steps=(), step=name
        )

    def with_note(self, note: str) -> Task:
        """This task with ``note`` added to its instruction, and to each step's."""
        return dataclasses.replace(
            self,
            instruction=self.instruction.rstrip("\n") + note,
            steps=tuple(step.with_note(note) for step in self.steps),
        )

    @property
    def step_config(self) -> StepConfig | None:
        """The ``[[steps]]`` entry of this step (None for a task that is not a step)."""
        return next((s for s in self.config.steps or () if s.name == self.step), None)

    @property
    def step_dir(self) -> Path | None:
        return None if self.step is None else self.path / "steps" / self.step

    @property
    def test_dirs(self) -> tuple[Path, ...]:
        """What the verifier uploads to ``/tests``, in order: ``tests/``, then a step's own
        ``steps/<name>/tests/`` over it (its ``test.sh``, when it has one, is the one run)."""
        dirs = [self.tests_dir]
        if self.step_dir is not None:
            dirs.append(self.step_dir / "tests")
        return tuple(d for d in dirs if d.is_dir())

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path:
        """``solution/``; a step's own ``steps/<name>/solution/`` when it has one (Harbor's
        oracle falls back to the task's)."""
        if self.step_dir is not None and (self.step_dir / "solution").is_dir():
            return self.step_dir / "solution"
        return self.path / "solution"

    @property
    def test_script(self) -> Path:
        return self.tests_dir / "test.sh"

    @property
    def solve_script(self) -> Path | None:
        """solution/solve.sh, or None when the task ships no reference solution. A multi-step
        task has one when each of its steps has one (its own or the task's): its first step's."""
        if self.steps:
            scripts = [step.solve_script for step in self.steps]
            return scripts[0] if all(scripts) else None
        script = self.solution_dir / "solve.sh"
        return script if script.is_file() else None

    @property
    def category(self) -> str | None:
        return self.config.metadata.get("category")

    @property
    def difficulty(self) -> str | None:
        """Lower-cased, as given (Harbor's values are easy, medium, hard and unknown)."""
        difficulty = self.config.metadata.get("difficulty")
        return difficulty.strip().lower() if difficulty is not None else None

    @property
    def tags(self) -> list[str]:
        return list(self.config.metadata.get("tags", []))

    @property
    def reward_outcomes(self) -> frozenset[str]:
        """The outcome keys its ``test.sh`` reports (``[metadata] reward_outcomes``; see
        :mod:`palaestra.tasks.outcomes`); empty when it declares none."""
        declared = self.config.metadata.get("reward_outcomes", [])
        if isinstance(declared, str):
            declared = [declared]
        return frozenset(str(key) for key in declared)

    @property
    def sealed_system(self) -> bool:
        """``[metadata] sealed_system = true``: the agent may change only its workspace and the
        writable directories, never the system's (interpreters, ``PATH`` directories, site
        packages, ``/etc``); the verifier refuses to run the tests when it did."""
        return self.config.metadata.get("sealed_system") is True

    @property
    def agent_timeout_sec(self) -> float:
        """``[agent] timeout_sec`` (a step's own first); ``math.inf`` when unset (Harbor then
        sets no limit)."""
        step = self.step_config
        timeout = step.agent.timeout_sec if step is not None else None
        timeout = self.config.agent.timeout_sec if timeout is None else timeout
        return math.inf if timeout is None else timeout

    @property
    def verifier_timeout_sec(self) -> float:
        """``[verifier] timeout_sec``; a step's own ``verifier.timeout_sec`` (whose default,
        600, wins over the task's, as in Harbor)."""
        step = self.step_config
        return (step or self.config).verifier.timeout_sec

    @property
    def verifier_env(self) -> dict[str, str]:
        """``[verifier] env``, a step's own entries over it (unresolved ``${VAR}`` forms)."""
        step = self.step_config
        return {**self.config.verifier.env, **(step.verifier.env if step is not None else {})}

    @property
    def network(self) -> Literal["none", "public"]:
        """The agent's network: ``[agent] network_mode``, else ``[environment]``'s."""
        config = self.config
        return _SANDBOX_NETWORK[config.agent.network_mode or config.environment.network_mode]

    @property
    def verifier_network(self) -> Literal["none", "public"]:
        """The verifier's network: ``[verifier] network_mode``, else that of the environment it
        runs in (``[environment]``, or a separate verifier's own)."""
        config = self.config
        separate = self.verifier_environment
        environment = separate.config if separate is not None else config.environment
        return _SANDBOX_NETWORK[config.verifier.network_mode or environment.network_mode]

    @property
    def verifier_environment(self) -> VerifierEnvironment | None:
        """Where a separate verifier runs (Harbor's ``environment_mode = "separate"``), or None
        when the verifier runs in the agent's sandbox: :mod:`palaestra.tasks.verifier_env`."""
        return verifier_environment(self.config, self.path)

    @property
    def healthcheck(self) -> HealthcheckConfig | None:
        """``[environment.healthcheck]``: must pass before the agent starts. For a step, its
        own ``healthcheck``, run after its set-up (besides the task's, run once at the start)."""
        if self.step is not None:
            step = self.step_config
            return step.healthcheck if step is not None else None
        return self.config.environment.healthcheck

    @property
    def agent_user(self) -> str | int | None:
        """``[agent] user`` (a step's own first): who the agent's commands run as (None: the
        image's user, root)."""
        step = self.step_config
        if step is not None and step.agent.user is not None:
            return step.agent.user
        return self.config.agent.user

    @property
    def cpus(self) -> float | None:
        cpus = self.config.environment.cpus
        return None if cpus is None else float(cpus)

    @property
    def memory_mb(self) -> int | None:
        return self.config.environment.memory_mb

    @property
    def storage_mb(self) -> int | None:
        return self.config.environment.storage_mb

    @property
    def docker_image(self) -> str | None:
        return self.config.environment.docker_image
