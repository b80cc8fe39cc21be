"""Harbor tasks: the ``task.toml`` schema, the task directory rules and the loader.

A Harbor task is a directory::

    task.toml          configuration (schema below)
    instruction.md     what the agent is asked to do
    environment/       Dockerfile (or docker-compose.yaml), or task.toml names a docker_image
    tests/test.sh      the verifier: writes /logs/verifier/reward.json or reward.txt
    solution/solve.sh  optional reference solution (what the oracle policy runs)

The schema is Harbor 0.25.0's (PyPI ``harbor==0.25.0``, task schema 1.4:
``harbor/models/task/config.py``), field for field, with its defaults and legacy conversions:
``version`` is read as ``schema_version``; ``[environment] memory``/``storage`` size strings
(``"4G"``, ``"512M"``) become ``memory_mb``/``storage_mb``; ``allow_internet`` becomes
``network_mode`` unless that is set. The directory rules are Harbor's ``Task``/``TaskPaths``:
the task needs ``instruction.md`` and ``tests/test.sh``, an environment definition
(``docker_image``, ``environment/Dockerfile`` or ``environment/docker-compose.yaml``), and
nothing under ``tests/`` or ``solution/`` may link outside the task; the instruction has its
leading canary lines removed, as Harbor shows it to agents.

Where palaestra differs from Harbor, it is stricter and says why:

* Harbor ignores keys it does not know; so do we, but :func:`load_task` warns about them (a typo
  such as ``timout_sec`` would otherwise silently keep the default).
* Timeouts and resources must be positive (Harbor accepts ``timeout_sec = -1`` and fails later),
  ``instruction.md`` must not be empty, ``[environment] memory`` must be a size string (Harbor
  silently drops other values), and ``difficulty``/``category``/``tags`` in ``[metadata]`` must
  be strings (a list of strings for tags).
* Tasks using what palaestra cannot run faithfully are refused at load time rather than run
  differently: multi-step tasks (``[[steps]]``), Windows tasks, network allowlists, and a
  verifier in a separate environment.
* Validation Harbor does for features palaestra does not use is not repeated: the syntax of
  ``allowed_hosts`` entries, step names, artifact paths, MCP header credentials and
  ``.harborignore`` rules.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from palaestra.sandbox.dockerfile import DockerfileError
from palaestra.sandbox.dockerfile_replay import LocalEnvironmentPlan, plan_local_environment

NetworkMode = Literal["public", "no-network", "allowlist"]
"""Harbor's network policies. palaestra sandboxes enforce ``public`` and ``no-network``."""

_Seconds = Annotated[float, Field(gt=0)]


class TaskError(ValueError):
    """A task that cannot be loaded, or cannot run as asked: names the file, the field and the fix.

    ``path`` is the file (or directory) at fault, ``field`` the dotted task.toml field when there
    is one (``verifier.timeout_sec``), ``line`` the line when known, ``fix`` what to do.
    ``str()`` reads ``<path>[ line N]: [<section>] <key>: <problem>. Fix: <fix>``. An error that
    stands for several (all the problems of one task, or every task :func:`load_tasks` could
    not load) lists them in ``errors``.
    """

    def __init__(
        self,
        path: Path,
        problem: str,
        *,
        field: str | None = None,
        fix: str | None = None,
        line: int | None = None,
        errors: Sequence[TaskError] = (),
    ) -> None:
        self.path = path
        self.problem = problem
        self.field = field
        self.fix = fix
        self.line = line
        self.errors = tuple(errors)
        super().__init__(self._render())

    def _render(self) -> str:
        text = f"{self.path}"
        if self.line is not None:
            text += f" line {self.line}"
        text += ": "
        if self.field is not None:
            text += f"{_display(self.field)}: "
        text += self.problem.rstrip(".")
        if self.fix:
            text += f". Fix: {self.fix}"
        for error in self.errors:
            text += "\n  - " + str(error).replace("\n", "\n    ")
        return text


# --------------------------------------------------------------------------------------------
# task.toml (Harbor 0.25.0, schema 1.4)
# --------------------------------------------------------------------------------------------


_PACKAGE_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*")


class Author(BaseModel):
    name: str
    email: str | None = None


class PackageInfo(BaseModel):
    """``[task]``: the task's name in a Harbor registry."""

    name: str
    """``org/name``."""
    version: str | None = Field(default=None, min_length=1)
    description: str = ""
    authors: list[Author] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _org_slash_name(cls, value: str) -> str:
        if not _PACKAGE_NAME.fullmatch(value) or ".." in value:
            raise ValueError(f"must be 'org/name' (letters, digits, '.', '_', '-'), got {value!r}")
        return value


_ONLY_WITH_ALLOWLIST = "only valid when network_mode = 'allowlist'"


class _PhaseNetwork(BaseModel):
    """``[agent]``/``[verifier]`` network override; None keeps the ``[environment]`` policy."""

    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None

    @field_validator("allowed_hosts")
    @classmethod
    def _need_allowlist(cls, hosts: list[str] | None, info: ValidationInfo) -> list[str] | None:
        mode = info.data.get("network_mode")
        if hosts is not None and mode != "allowlist" and (hosts or mode is None):
            raise ValueError(_ONLY_WITH_ALLOWLIST)
        return hosts


class AgentConfig(_PhaseNetwork):
    timeout_sec: _Seconds | None = None
    """None: Harbor sets no agent timeout."""
    user: str | int | None = None


class HealthcheckConfig(BaseModel):
    """Run after the environment starts; all retries must pass before the agent starts."""

    command: str
    interval_sec: float = 5.0
    timeout_sec: _Seconds = 30.0
    start_period_sec: float = 0.0
    start_interval_sec: float = 5.0
    retries: int = 3


class TpuSpec(BaseModel):
    type: str = Field(min_length=1)
    topology: Annotated[
        str, StringConstraints(strip_whitespace=True, pattern=r"^[1-9]\d*(x[1-9]\d*)+$")
    ]


class MCPServerConfig(BaseModel):
    name: str
    transport: Literal["stdio", "sse", "streamable-http"] = "sse"
    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("transport", mode="before")
    @classmethod
    def _http_alias(cls, value: Any) -> Any:
        return "streamable-http" if value == "http" else value

    @model_validator(mode="after")
    def _transport_fields(self) -> MCPServerConfig:
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"'url' is required for transport '{self.transport}'")
        if self.transport == "stdio" and not self.command:
            raise ValueError("'command' is required for transport 'stdio'")
        if self.transport == "stdio" and self.headers:
            raise ValueError("'headers' is only supported for HTTP MCP transports")
        return self


def _size_to_mb(size: str) -> int:
    """Harbor's legacy size strings: ``"4G"`` -> 4096, ``"512M"`` -> 512, ``"2048K"`` -> 2."""
    text = size.strip().upper()
    factors = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}
    try:
        return int(float(text[:-1]) * factors[text[-1:]])
    except (KeyError, ValueError):
        raise ValueError(
            f"invalid size {size!r}; expected a number and G, M or K, like '4G'"
        ) from None


class EnvironmentConfig(BaseModel):
    """``[environment]``: the sandbox the agent works in. None for a resource: no limit set."""

    network_mode: NetworkMode = "public"
    allowed_hosts: list[str] | None = None
    build_timeout_sec: _Seconds = 600.0
    docker_image: str | None = None
    """A prebuilt image; environment/Dockerfile is then optional."""
    os: Literal["linux", "windows"] = "linux"
    cpus: int | float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    storage_mb: int | None = Field(default=None, gt=0)
    gpus: int | None = Field(default=None, ge=0)
    gpu_types: list[str] | None = None
    tpu: TpuSpec | None = None
    mcp_servers: list[MCPServerConfig] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    """Resolved from the host at run time: ``${VAR}`` and ``${VAR:-default}``."""
    skills_dir: str | None = None
    healthcheck: HealthcheckConfig | None = None
    workdir: str | None = None
    """Overrides the Dockerfile's WORKDIR."""
    # Legacy spellings, read and converted; always None once validated (as in Harbor).
    allow_internet: bool | None = Field(default=None, exclude=True)
    memory: str | None = Field(default=None, exclude=True)
    storage: str | None = Field(default=None, exclude=True)

    @field_validator("allowed_hosts")
    @classmethod
    def _need_allowlist(cls, hosts: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if hosts and info.data.get("network_mode", "allowlist") != "allowlist":
            raise ValueError(_ONLY_WITH_ALLOWLIST)
        return hosts

    @field_validator("os", mode="before")
    @classmethod
    def _lower_case_os(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("cpus")
    @classmethod
    def _whole_cpus(cls, value: int | float | None) -> int | float | None:
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"must be a finite number, got {value}")
            if value.is_integer():
                return int(value)
        return value

    @field_validator("allow_internet")
    @classmethod
    def _deprecated_allow_internet(cls, value: bool | None) -> bool | None:
        if value is not None:
            warnings.warn(
                "[environment] allow_internet is deprecated; use network_mode "
                '("public" or "no-network")',
                DeprecationWarning,
                stacklevel=2,
            )
        return value

    @field_validator("memory", "storage")
    @classmethod
    def _legacy_size(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        modern = f"{info.field_name}_mb"
        warnings.warn(
            f"[environment] {info.field_name} is deprecated; use {modern}",
            DeprecationWarning,
            stacklevel=2,
        )
        size_mb = _size_to_mb(value)
        given = info.data.get(modern)
        if given is not None and given != size_mb:
            raise ValueError(f"{value!r} ({size_mb} MB) conflicts with {modern} = {given}")
        return value

    @model_validator(mode="after")
    def _convert_legacy_fields(self) -> EnvironmentConfig:
        if self.memory is not None:
            self.memory_mb = _size_to_mb(self.memory)
            self.memory = None
        if self.storage is not None:
            self.storage_mb = _size_to_mb(self.storage)
            self.storage = None
        if self.allow_internet is not None:
            if "network_mode" not in self.model_fields_set and self.allowed_hosts is None:
                self.network_mode = "public" if self.allow_internet else "no-network"
            self.allow_internet = None
        return self


class VerifierCollectConfig(BaseModel):
    """``[[verifier.collect]]``: a command run in a compose service after the agent phase."""

    command: str
    service: str = "main"
    timeout_sec: _Seconds = 60.0
    user: str | int | None = None


class VerifierConfig(_PhaseNetwork):
    timeout_sec: _Seconds = 600.0
    env: dict[str, str] = Field(default_factory=dict)
    """Resolved from the host at run time, like ``[environment] env``."""
    user: str | int | None = None
    environment_mode: Literal["shared", "separate"] | None = None
    """None: ``separate`` when ``environment`` is set, else ``shared`` (the agent's sandbox)."""
    environment: EnvironmentConfig | None = None
    collect: list[VerifierCollectConfig] = Field(default_factory=list)

    @field_validator("environment")
    @classmethod
    def _not_when_shared(
        cls, environment: EnvironmentConfig | None, info: ValidationInfo
    ) -> EnvironmentConfig | None:
        if environment is not None and info.data.get("environment_mode") == "shared":
            raise ValueError("cannot be combined with environment_mode = 'shared'")
        return environment


class SolutionConfig(BaseModel):
    env: dict[str, str] = Field(default_factory=dict)


class ArtifactConfig(BaseModel):
    source: str
    destination: str | None = None
    exclude: list[str] = Field(default_factory=list)
    service: str | None = None


class StepConfig(BaseModel):
    """One ``[[steps]]`` entry of a multi-step task."""

    name: str
    agent: AgentConfig = Field(default_factory=AgentConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    min_reward: float | dict[str, float] | None = None
    healthcheck: HealthcheckConfig | None = None
    artifacts: list[str | ArtifactConfig] = Field(default_factory=list)


class TaskConfig(BaseModel):
    """A parsed ``task.toml``.

    ``[metadata]`` is free-form; by convention it holds ``author_name``, ``author_email``,
    ``difficulty``, ``category`` and ``tags``.
    """

    schema_version: str = "1.4"
    task: PackageInfo | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    solution: SolutionConfig = Field(default_factory=SolutionConfig)
    source: str | None = None
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    steps: list[StepConfig] | None = None
    artifacts: list[str | ArtifactConfig] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _version_is_schema_version(cls, data: Any) -> Any:
        if isinstance(data, dict) and "version" in data:
            data = dict(data)
            data.setdefault("schema_version", data.pop("version"))
        return data


# --------------------------------------------------------------------------------------------
# Tasks
# --------------------------------------------------------------------------------------------

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

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    @property
    def test_script(self) -> Path:
        return self.tests_dir / "test.sh"

    @property
    def solve_script(self) -> Path | None:
        """solution/solve.sh, or None when the task ships no reference solution."""
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
    def agent_timeout_sec(self) -> float:
        """``[agent] timeout_sec``; ``math.inf`` when unset (Harbor then sets no limit)."""
        timeout = self.config.agent.timeout_sec
        return math.inf if timeout is None else timeout

    @property
    def verifier_timeout_sec(self) -> float:
        return self.config.verifier.timeout_sec

    @property
    def network(self) -> Literal["none", "public"]:
        """The agent's network: ``[agent] network_mode``, else ``[environment]``'s."""
        config = self.config
        return _SANDBOX_NETWORK[config.agent.network_mode or config.environment.network_mode]

    @property
    def verifier_network(self) -> Literal["none", "public"]:
        """The verifier's network: ``[verifier] network_mode``, else ``[environment]``'s."""
        config = self.config
        return _SANDBOX_NETWORK[config.verifier.network_mode or config.environment.network_mode]

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

    def local_plan(self) -> LocalEnvironmentPlan:
        """The local sandbox backend's layout of this task's environment.

        See :mod:`palaestra.sandbox.dockerfile_replay`; raises :class:`TaskError` for what the local
        backend cannot replay (RUN, multi-stage builds, docker-compose...).
        """
        compose = self.environment_dir / "docker-compose.yaml"
        if compose.exists():
            raise TaskError(
                compose,
                "docker-compose environments are not supported by the local sandbox backend",
                fix='run this task with sandbox="docker"',
            )
        environment = self.config.environment
        try:
            return plan_local_environment(
                self.environment_dir,
                docker_image=environment.docker_image,
                workdir=environment.workdir,
            )
        except DockerfileError as e:
            path = self.environment_dir / "Dockerfile"
            raise TaskError(path, e.problem, fix=e.fix, line=e.line) from e


def load_task(path: Path | str, *, task_id: str | None = None) -> Task:
    """Load and check the Harbor task in directory ``path``.

    ``task_id`` defaults to the directory name. Every problem found is reported at once: one
    :class:`TaskError`, listing them in its ``errors`` when there are several. Keys Harbor does
    not know are ignored with a ``UserWarning``; deprecated spellings are converted with a
    ``DeprecationWarning``.
    """
    task_dir = Path(path).expanduser().resolve()
    if not task_dir.is_dir():
        raise TaskError(
            task_dir,
            "is not a directory" if task_dir.exists() else "no such task directory",
            fix="pass a task directory (task.toml, instruction.md, environment/, tests/test.sh)",
        )
    problems: list[TaskError] = []
    config = _load_config(task_dir / "task.toml", problems)
    instruction = _load_instruction(task_dir / "instruction.md", problems)
    if not (task_dir / "tests" / "test.sh").is_file():
        problems.append(
            TaskError(
                task_dir / "tests" / "test.sh",
                "is missing; the verifier runs it to compute the reward",
                fix="add tests/test.sh that writes a number to /logs/verifier/reward.txt (or a JSON "
                "object of numbers to /logs/verifier/reward.json)",
            )
        )
    if config is not None:
        problems += _unsupported(task_dir / "task.toml", config)
        environment_dir = task_dir / "environment"
        if not (
            config.environment.docker_image
            or (environment_dir / "Dockerfile").is_file()
            or (environment_dir / "docker-compose.yaml").is_file()
        ):
            problems.append(
                TaskError(
                    environment_dir / "Dockerfile",
                    "is missing, and [environment] sets no docker_image",
                    fix='add environment/Dockerfile (for example "FROM ubuntu:24.04" then '
                    '"WORKDIR /app"), or set docker_image = "<image>" under [environment]',
                )
            )
    problems += _links_leaving(task_dir, ("tests", "solution"))
    if problems:
        raise _one_error(task_dir, problems)
    assert config is not None and instruction is not None
    return Task(id=task_id or task_dir.name, path=task_dir, config=config, instruction=instruction)


def load_tasks(root: Path | str, *, errors: Literal["raise", "skip"] = "raise") -> list[Task]:
    """Load the task in ``root``, or every task directly under it, sorted by directory name.

    ``root`` is a task when it holds ``task.toml`` or ``instruction.md``; otherwise each such
    subdirectory is one (so a task missing only its task.toml is reported, not passed over), and
    other subdirectories are not tasks. With ``errors="raise"`` every task is checked, then one
    :class:`TaskError` lists all that failed; with ``errors="skip"`` those are left out, each
    with a warning (Harbor passes over invalid task directories silently). A single task that
    fails to load always raises.
    """
    if errors not in ("raise", "skip"):
        raise ValueError(f"errors must be 'raise' or 'skip', got {errors!r}")
    root = Path(root).expanduser().resolve()
    if _looks_like_task(root):
        return [load_task(root)]
    if not root.is_dir():
        raise TaskError(
            root,
            "no such directory",
            fix="pass a task directory or a directory of task directories",
        )
    candidates = sorted(child for child in root.iterdir() if _looks_like_task(child))
    if not candidates:
        raise TaskError(
            root,
            "holds no tasks (no task.toml in it or in its subdirectories)",
            fix="pass a task directory or a directory of task directories",
        )
    tasks: list[Task] = []
    failed: list[TaskError] = []
    for candidate in candidates:
        try:
            tasks.append(load_task(candidate))
        except TaskError as e:
            if errors == "skip":
                warnings.warn(f"skipping task {candidate.name}: {e}", UserWarning, stacklevel=2)
            failed.append(e)
    if failed and errors == "raise":
        raise TaskError(
            root,
            f"{len(failed)} of {len(candidates)} tasks could not be loaded",
            fix='correct them, or pass errors="skip" to load the others',
            errors=failed,
        )
    return tasks


def _looks_like_task(path: Path) -> bool:
    return path.is_dir() and any(
        (path / name).is_file() for name in ("task.toml", "instruction.md")
    )


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------

_CANARY_LINE = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.IGNORECASE)
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def _one_error(path: Path, problems: list[TaskError]) -> TaskError:
    if len(problems) == 1:
        return problems[0]
    return TaskError(path, f"{len(problems)} problems", errors=problems)


def _load_config(path: Path, problems: list[TaskError]) -> TaskConfig | None:
    if not path.is_file():
        problems.append(
            TaskError(
                path,
                "is missing",
                fix="create task.toml; an empty file is valid, and most tasks set [agent] "
                "timeout_sec and [verifier] timeout_sec",
            )
        )
        return None
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        problems.append(TaskError(path, "is not UTF-8 text", fix="save task.toml as UTF-8"))
        return None
    except tomllib.TOMLDecodeError as e:
        message = str(e)
        position = _TOML_POSITION.search(message)
        line = int(position.group(1)) if position else None
        if position:
            message = f"{message[: position.start()]} (column {position.group(2)})"
        problems.append(
            TaskError(
                path,
                f"invalid TOML: {message}",
                line=line,
                fix="correct the TOML syntax (strings need quotes, sections are written [section])",
            )
        )
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            config = TaskConfig.model_validate(raw)
        except ValidationError as e:
            problems.extend(_validation_errors(path, raw, e))
            return None
    for warning in caught:
        warnings.warn(f"{path}: {warning.message}", warning.category, stacklevel=3)
    unknown = _unknown_keys(raw, config)
    if unknown:
        warnings.warn(
            f"{path}: ignoring keys Harbor does not know: {', '.join(unknown)}",
            UserWarning,
            stacklevel=3,
        )
    problems.extend(_metadata_errors(path, config.metadata))
    return config


def _load_instruction(path: Path, problems: list[TaskError]) -> str | None:
    if not path.is_file():
        problems.append(
            TaskError(path, "is missing", fix="write what the agent must do in instruction.md")
        )
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        problems.append(TaskError(path, "is not UTF-8 text", fix="save instruction.md as UTF-8"))
        return None
    instruction = _strip_canary(text)
    if not instruction.strip():
        problems.append(
            TaskError(path, "is empty", fix="write what the agent must do in instruction.md")
        )
        return None
    return instruction


def _strip_canary(text: str) -> str:
    """Harbor's ``strip_canary``: drop leading canary comment lines and the blanks after them."""
    lines = text.split("\n")
    i = 0
    while i < len(lines) and _CANARY_LINE.match(lines[i].strip()):
        i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    return "\n".join(lines[i:])


def _unsupported(path: Path, config: TaskConfig) -> list[TaskError]:
    """What palaestra refuses to run rather than run differently from Harbor."""
    problems = []
    if config.steps:
        problems.append(
            TaskError(
                path,
                "multi-step tasks are not supported by palaestra",
                field="steps",
                fix="split the steps into separate tasks",
            )
        )
    if config.environment.os == "windows":
        problems.append(
            TaskError(
                path,
                "Windows tasks are not supported: palaestra sandboxes run Linux",
                field="environment.os",
                fix='set os = "linux" and provide tests/test.sh',
            )
        )
    for section in ("environment", "agent", "verifier"):
        if getattr(config, section).network_mode == "allowlist":
            problems.append(
                TaskError(
                    path,
                    "network allowlists are not supported: a palaestra sandbox has either no network "
                    "or the public internet",
                    field=f"{section}.network_mode",
                    fix='set network_mode = "no-network", or "public" if the task needs the internet',
                )
            )
    verifier = config.verifier
    if verifier.environment_mode == "separate" or verifier.environment is not None:
        problems.append(
            TaskError(
                path,
                "a separate verifier environment is not supported: palaestra runs tests/test.sh in "
                "the agent's sandbox (Harbor's shared mode)",
                field="verifier.environment_mode",
                fix="remove environment_mode and [verifier.environment] from [verifier]",
            )
        )
    return problems


def _metadata_errors(path: Path, metadata: dict[str, Any]) -> list[TaskError]:
    problems = []
    for key, example in (("difficulty", '"medium"'), ("category", '"debugging"')):
        value = metadata.get(key)
        if value is not None and not isinstance(value, str):
            problems.append(
                TaskError(
                    path,
                    f"must be a string, got {value!r}",
                    field=f"metadata.{key}",
                    fix=f"write {key} = {example}",
                )
            )
    tags = metadata.get("tags")
    if tags is not None and not (
        isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)
    ):
        problems.append(
            TaskError(
                path,
                f"must be a list of strings, got {tags!r}",
                field="metadata.tags",
                fix='write tags = ["python", "sql"]',
            )
        )
    return problems


def _links_leaving(task_dir: Path, names: Sequence[str]) -> list[TaskError]:
    """Harbor's input-tree rule: nothing under these directories may resolve outside the task."""
    problems: list[TaskError] = []

    def visit(path: Path, ancestors: frozenset[Path]) -> None:
        try:
            resolved = path.resolve()
        except RuntimeError:  # a symlink loop
            problems.append(TaskError(path, "is a symbolic link loop", fix="remove the link"))
            return
        if not resolved.is_relative_to(task_dir):
            problems.append(
                TaskError(
                    path,
                    f"links outside the task directory (to {resolved})",
                    fix="replace the link with a copy of what it points to",
                )
            )
        elif path.is_dir() and resolved not in ancestors:
            for child in sorted(path.iterdir()):
                visit(child, ancestors | {resolved})

    for name in names:
        if (task_dir / name).exists() or (task_dir / name).is_symlink():
            visit(task_dir / name, frozenset())
    return problems


def _unknown_keys(raw: dict[str, Any], model: BaseModel, prefix: str = "") -> list[str]:
    """The keys of ``raw`` (one TOML table) that ``model`` has no field for, recursively."""
    known = set(type(model).model_fields)
    if isinstance(model, TaskConfig):
        known.add("version")  # the legacy spelling of schema_version
    unknown = []
    for key, value in raw.items():
        name = f"{prefix}{key}"
        if key not in known:
            unknown.append(_display(name))
            continue
        attribute = getattr(model, key, None)
        if isinstance(attribute, BaseModel) and isinstance(value, dict):
            unknown += _unknown_keys(value, attribute, f"{name}.")
        elif isinstance(attribute, list) and isinstance(value, list):
            for i, (item, item_raw) in enumerate(zip(attribute, value, strict=False)):
                if isinstance(item, BaseModel) and isinstance(item_raw, dict):
                    unknown += _unknown_keys(item_raw, item, f"{name}[{i}].")
    return unknown


def _display(dotted: str) -> str:
    table, _, key = dotted.rpartition(".")
    return f"[{table}] {key}" if table else key


# Field-specific wording for validation errors: (problem, fix). A None problem keeps the
# validator's own message. Looked up by dotted field first, then by the last key.
_FIELD_HINTS: dict[str, tuple[str | None, str]] = {
    "timeout_sec": (
        "must be a positive number",
        "set timeout_sec to seconds, e.g. timeout_sec = 600.0",
    ),
    "build_timeout_sec": (
        "must be a positive number",
        "set build_timeout_sec to seconds, e.g. build_timeout_sec = 600.0",
    ),
    "cpus": ("must be a positive number", "set cpus to a number of CPUs, e.g. cpus = 2"),
    "memory_mb": ("must be a positive whole number of MB", "e.g. memory_mb = 4096"),
    "storage_mb": ("must be a positive whole number of MB", "e.g. storage_mb = 10240"),
    "gpus": ("must be a whole number, 0 or more", "e.g. gpus = 1"),
    "memory": (None, 'use memory_mb = 4096 (the legacy memory takes strings like "4G")'),
    "storage": (None, 'use storage_mb = 10240 (the legacy storage takes strings like "10G")'),
    "network_mode": (
        'must be "public", "no-network" or "allowlist"',
        'set network_mode = "public" or network_mode = "no-network"',
    ),
    "allowed_hosts": (None, 'set network_mode = "allowlist", or remove allowed_hosts'),
    "os": ('must be "linux" or "windows"', 'set os = "linux"'),
    "env": ("must be a table of strings", 'write env = { NAME = "value" }'),
    "schema_version": ("must be a string", 'quote it: schema_version = "1.4"'),
    "version": ("must be a string", 'quote it: schema_version = "1.4"'),
    "task.name": (None, 'name the task "org/name", e.g. name = "my-org/my-task"'),
    "user": ("must be a user name or a numeric UID", 'e.g. user = "root" or user = 1000'),
    "mcp_servers": (None, "give an sse or streamable-http server a url, a stdio server a command"),
    "verifier.environment": (
        None,
        "remove [verifier.environment]: palaestra runs the verifier in the agent's sandbox",
    ),
}

_TYPE_FIXES = {
    "bool_type": "set {key} = true or false",
    "bool_parsing": "set {key} = true or false",
    "string_type": 'quote the value: {key} = "..."',
    "int_type": "set {key} to a whole number",
    "int_parsing": "set {key} to a whole number",
    "int_from_float": "set {key} to a whole number",
    "float_type": "set {key} to a number",
    "float_parsing": "set {key} to a number",
    "list_type": 'set {key} to a list, e.g. {key} = ["..."]',
    "dict_type": "make {key} a table",
    "model_type": "make {key} a table",
    "model_attributes_type": "make {key} a table",
    "missing": "add {key}",
    "string_too_short": "give {key} a non-empty value",
}


def _validation_errors(path: Path, raw: dict[str, Any], error: ValidationError) -> list[TaskError]:
    problems: list[TaskError] = []
    seen: set[str | None] = set()
    for detail in error.errors(include_url=False):
        dotted = _toml_field(raw, detail)
        if dotted in seen:
            continue  # one value failing each member of a union is one problem
        seen.add(dotted)
        key = re.sub(r"\[\d+\]$", "", (dotted or "").rpartition(".")[2])
        kind = detail["type"]
        hint_problem, hint_fix = (
            _FIELD_HINTS.get(dotted or "") or _FIELD_HINTS.get(key) or (None, None)
        )
        if kind == "missing":
            problem = "is required"
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            problem = "must be a table"
        elif hint_problem and kind != "value_error":
            problem = hint_problem
        else:
            problem = detail["msg"].removeprefix("Value error, ")
            problem = problem[:1].lower() + problem[1:]
        if kind not in ("missing", "value_error"):
            shown = repr(detail["input"])
            problem += f", got {shown if len(shown) <= 60 else shown[:57] + '...'}"
        if hint_fix is None and kind == "literal_error":
            hint_fix = f"use one of {detail['ctx']['expected']}"
        elif hint_fix is None:
            hint_fix = _TYPE_FIXES.get(kind, "correct {key}").format(key=key or "the value")
        problems.append(TaskError(path, problem, field=dotted, fix=hint_fix))
    return problems


def _toml_field(raw: dict[str, Any], detail: ErrorDetails) -> str | None:
    """The dotted TOML path of the value a pydantic error is about.

    pydantic's locations also name union members and model internals (``('cpus', 'int')``);
    walking the location through the TOML data keeps only the part the user wrote.
    """
    loc = list(detail["loc"])
    if loc[:1] == ["schema_version"] and "schema_version" not in raw and "version" in raw:
        loc[0] = "version"
    parts: list[str] = []
    node: Any = raw
    for i, item in enumerate(loc):
        if isinstance(node, dict) and isinstance(item, str) and item in node:
            parts.append(item)
            node = node[item]
        elif isinstance(node, list) and isinstance(item, int) and item < len(node):
            parts[-1] += f"[{item}]"
            node = node[item]
        else:
            if detail["type"] == "missing" and i == len(loc) - 1 and isinstance(item, str):
                parts.append(item)
            break
    return ".".join(parts) or None
