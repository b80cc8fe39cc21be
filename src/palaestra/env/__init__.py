"""The policy boundary: time steps, the environment protocol, CodeEnv and the registry."""

from palaestra.env.checker import ConformanceError, check_env
from palaestra.env.code_env import CodeEnv
from palaestra.env.registry import EnvSpec, list_envs, load_tasks, make, register
from palaestra.env.types import Environment, EpisodeError, EpisodeStatus, StepType, TimeStep

__all__ = [
    "CodeEnv",
    "ConformanceError",
    "EnvSpec",
    "Environment",
    "EpisodeError",
    "EpisodeStatus",
    "StepType",
    "TimeStep",
    "check_env",
    "list_envs",
    "load_tasks",
    "make",
    "register",
]
