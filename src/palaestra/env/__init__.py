"""The policy boundary: time steps, the environment protocol, CodeEnv and the registry (of
environments and of policies by name)."""

from palaestra.env.checker import ConformanceError, check_env
from palaestra.env.code_env import CodeEnv
from palaestra.env.end import EpisodeEnd
from palaestra.env.registry import (
    POLICIES,
    EnvSpec,
    list_envs,
    load_tasks,
    make,
    make_policy,
    register,
)
from palaestra.env.shaping import TurnInfo, format_error_penalty
from palaestra.env.types import Environment, EpisodeError, EpisodeStatus, StepType, TimeStep

__all__ = [
    "CodeEnv",
    "ConformanceError",
    "EnvSpec",
    "Environment",
    "EpisodeEnd",
    "EpisodeError",
    "EpisodeStatus",
    "POLICIES",
    "StepType",
    "TimeStep",
    "TurnInfo",
    "check_env",
    "format_error_penalty",
    "list_envs",
    "load_tasks",
    "make",
    "make_policy",
    "register",
]
