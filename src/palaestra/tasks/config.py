"""The ``task.toml`` schema: pydantic models only, read from and written to TOML text.

The schema is Harbor 0.26.0's (PyPI ``harbor==0.26.0``, task schema 1.4:
``harbor/models/task/config.py``), field for field, with its defaults, its checks of artifacts
and collect hooks, and its legacy conversions:
``version`` is read as ``schema_version``; ``[environment] memory``/``storage`` size strings
(``"4G"``, ``"512M"``) become ``memory_mb``/``storage_mb``; ``allow_internet`` becomes
``network_mode`` unless that is set. Where palaestra is stricter than Harbor (timeouts and
resources must be positive, ``memory`` must be a size string), the models say so; the checks of
a whole task directory are :mod:`palaestra.tasks.loader`'s.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
import warnings
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

NetworkMode = Literal["public", "no-network", "allowlist"]
"""Harbor's network policies. palaestra sandboxes enforce ``public`` and ``no-network``."""

_Seconds = Annotated[float, Field(gt=0)]


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


_COMPOSE_SERVICE = r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$"
_Service = Annotated[str, StringConstraints(strip_whitespace=True, pattern=_COMPOSE_SERVICE)]
"""A Docker Compose service name, as Harbor checks it."""


class VerifierCollectConfig(BaseModel):
    """``[[verifier.collect]]``: a command run in a compose service after the agent phase, before
    the artifacts are collected (it can snapshot runtime state into an artifact)."""

    command: str
    service: _Service = "main"
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
    """An ``artifacts`` entry: a path copied out of the agent's sandbox after its run."""

    source: str
    destination: str | None = None
    """Where it goes under the episode's ``artifacts/`` (default: ``source`` without ``/``)."""
    exclude: list[str] = Field(default_factory=list)
    """``tar --exclude`` patterns for a directory."""
    service: _Service | None = None

    @field_validator("source")
    @classmethod
    def _no_parent_parts(cls, value: str) -> str:
        if ".." in PurePosixPath(value).parts:
            raise ValueError(f"must not contain '..' parts, got {value!r}")
        return value

    @field_validator("destination")
    @classmethod
    def _relative_destination(cls, value: str | None) -> str | None:
        """Harbor's rules: a relative path with forward slashes, inside the artifacts
        directory, not its ``manifest.json``; an empty one means the default."""
        if not value:
            return None
        path = PurePosixPath(value)
        if "\\" in value or path.is_absolute() or ".." in path.parts or not path.parts:
            raise ValueError(
                f"must be a relative path with '/' separators and no '..' parts, got {value!r}"
            )
        if value.rstrip("/") == "manifest.json":
            raise ValueError("'manifest.json' is reserved for the collection manifest")
        return value


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

    @classmethod
    def model_validate_toml(cls, text: str) -> TaskConfig:
        """Parse ``task.toml`` text (``tomllib.TOMLDecodeError`` or pydantic's
        ``ValidationError`` when it is not a valid one)."""
        return cls.model_validate(tomllib.loads(text))

    def model_dump_toml(self) -> str:
        """This configuration as ``task.toml`` text; :meth:`model_validate_toml` reads it back
        equal. Unset optional fields (None) are left out: TOML has no null."""
        return _toml_table(self.model_dump(exclude_none=True), ()).lstrip("\n")


# --------------------------------------------------------------------------------------------
# Writing TOML (the standard library only reads it)
# --------------------------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _toml_value(value: Any) -> str:
    """An inline TOML value: JSON's strings are TOML basic strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int | str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    raise TypeError(f"cannot write {value!r} as TOML")


def _toml_table(table: dict[str, Any], path: tuple[str, ...]) -> str:
    """A table's own keys, then its subtables, then its arrays of tables."""
    lines = [
        f"{_toml_key(k)} = {_toml_value(v)}"
        for k, v in table.items()
        if not isinstance(v, dict) and not _is_table_array(v)
    ]
    text = "\n".join(lines) + "\n" if lines else ""
    for key, value in table.items():
        name = ".".join(_toml_key(part) for part in (*path, key))
        if isinstance(value, dict):
            text += f"\n[{name}]\n" + _toml_table(value, (*path, key))
        elif _is_table_array(value):
            for item in value:
                text += f"\n[[{name}]]\n" + _toml_table(item, (*path, key))
    return text
