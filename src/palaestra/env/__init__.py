"""The policy boundary: time steps, the environment protocol, CodeEnv and the registry (of
environments and of policies by name)."""

from palaestra.env.checker import ConformanceError, check_env
from palaestra.env.code_env import CodeEnv
from palaestra.env.registry import (
    POLICIES,
    EnvSpec,
    list_envs,
    load_tasks,
    make,
    make_policy,
    register,
)
from palaestra.env.types import Environment, EpisodeError, EpisodeStatus, StepType, TimeStep

__all__ = [
    "CodeEnv",
    "ConformanceError",
    "EnvSpec",
    "Environment",
    "EpisodeError",
    "EpisodeStatus",
    "POLICIES",
    "StepType",
    "TimeStep",
    "check_env",
    "list_envs",
    "load_tasks",
    "make",
    "make_policy",
    "register",
]
