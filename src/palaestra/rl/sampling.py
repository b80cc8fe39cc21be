"""Deprecated: :mod:`palaestra.rl.sampler` (a sampler picks tasks; *sampling* is how a policy
draws tokens, :class:`palaestra.llm.types.SamplingParams`). Kept for one release."""

import warnings

from palaestra.rl.sampler import (
    GroupFilter,
    GroupOutcome,
    TaskDraw,
    TaskSampler,
    has_reward_variance,
)

warnings.warn(
    "palaestra.rl.sampling is deprecated: import from palaestra.rl.sampler",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["GroupFilter", "GroupOutcome", "TaskDraw", "TaskSampler", "has_reward_variance"]
