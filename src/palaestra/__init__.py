"""palaestra: an RL-first, asyncio-native environment suite for LLM coding agents.

The LLM is the policy: an observation is an :class:`LLMRequest`, an action an
:class:`LLMResponse`; scaffold, sandbox, task and verifier are the environment::

    async with palaestra.make("starter") as env:
        ts = await env.reset(seed=0)
        while not ts.last():
            ts = await env.step(await policy.complete(ts.observation))
"""

from palaestra.env import (
    CodeEnv,
    Environment,
    EpisodeError,
    StepType,
    TimeStep,
    check_env,
    list_envs,
    make,
    make_policy,
    register,
)
from palaestra.llm import LLMRequest, LLMResponse
from palaestra.run import evaluate, rollout

__version__ = "0.1.0"

__all__ = [
    "CodeEnv",
    "Environment",
    "EpisodeError",
    "LLMRequest",
    "LLMResponse",
    "StepType",
    "TimeStep",
    "__version__",
    "check_env",
    "evaluate",
    "list_envs",
    "make",
    "make_policy",
    "register",
    "rollout",
]
