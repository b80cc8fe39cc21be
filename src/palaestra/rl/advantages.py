"""Group-relative advantages (GRPO, Dr. GRPO, RLOO) as per-token arrays aligned with the masks.

A group is the attempts at one task and seed; each attempt's advantage comes from its reward
against the others' (so the group is the baseline; no value model):

* ``grpo`` (DeepSeekMath): ``(r_i - mean) / (std + eps)``, with the sample standard deviation
  (``ddof=1``, as ``torch.std`` in TRL and verl);
* ``dr_grpo`` (Dr. GRPO, "Understanding R1-Zero-Like Training"): ``r_i - mean``: no division by
  the std, which up-weights groups that are almost all solved or all failed. Its other half, not
  normalising the loss by each response's length, belongs to the trainer's loss;
* ``rloo`` (REINFORCE leave-one-out): ``r_i - mean of the others`` = ``G/(G-1) (r_i - mean)``.

A group of one attempt, or one whose rewards are all equal, has advantage 0 everywhere (never
NaN): it carries no signal (:func:`palaestra.rl.sampler.has_reward_variance` drops such groups
before they reach the trainer).

:func:`group_advantages` spreads each attempt's advantage over its trajectory: the value on
every loss-mask-1 token (the policy's own tokens), 0.0 elsewhere. An episode split at a template
break (:mod:`palaestra.rl.trajectory`) counts once in the group's statistics, and each of its
samples gets its advantage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from palaestra.rl.trajectory import Trajectories, Trajectory

Estimator = Literal["grpo", "dr_grpo", "rloo"]
ESTIMATORS: tuple[Estimator, ...] = ("grpo", "dr_grpo", "rloo")


def _checked(rewards: Sequence[float]) -> list[float]:
    values = [float(r) for r in rewards]
    if not values:
        raise ValueError("a group needs at least one reward")
    bad = [i for i, r in enumerate(values) if not math.isfinite(r)]
    if bad:
        raise ValueError(f"reward {values[bad[0]]} of attempt {bad[0]} is not finite")
    return values


def grpo(rewards: Sequence[float], *, eps: float = 1e-6) -> list[float]:
    """``(r_i - mean) / (std + eps)``, ``std`` the sample standard deviation (0 for one)."""
    r = _checked(rewards)
    mean = math.fsum(r) / len(r)
    if len(r) < 2:
        return [0.0]
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in r) / (len(r) - 1))
    return [(x - mean) / (std + eps) for x in r]


def dr_grpo(rewards: Sequence[float]) -> list[float]:
    """``r_i - mean``."""
    r = _checked(rewards)
    mean = math.fsum(r) / len(r)
    return [x - mean for x in r]


def rloo(rewards: Sequence[float]) -> list[float]:
    """``r_i - mean(r_j, j != i)``; 0 for a group of one (it has no baseline)."""
    r = _checked(rewards)
    n = len(r)
    if n < 2:
        return [0.0]
    total = math.fsum(r)
    return [x - (total - x) / (n - 1) for x in r]


def advantages(
    rewards: Sequence[float], method: Estimator = "grpo", *, eps: float = 1e-6
) -> list[float]:
    """One advantage per attempt, by ``method``."""
    if method == "grpo":
        return grpo(rewards, eps=eps)
    if method == "dr_grpo":
        return dr_grpo(rewards)
    if method == "rloo":
        return rloo(rewards)
    raise ValueError(f"unknown advantage estimator {method!r}; choose one of {ESTIMATORS}")


def token_advantages(sample: Trajectory, advantage: float) -> list[float]:
    """``advantage`` on ``sample``'s loss-mask-1 tokens, 0.0 elsewhere."""
    return [advantage if m else 0.0 for m in sample.loss_mask]


def group_advantages(
    group: Sequence[Trajectories | Trajectory], method: Estimator = "grpo", *, eps: float = 1e-6
) -> list[list[float]]:
    """Per-token advantages for every sample of a group's attempts.

    ``group`` holds one entry per attempt: its :class:`Trajectories` (all its samples) or a
    single :class:`Trajectory`. Returns one row per sample, attempt by attempt and sample by
    sample (the order of ``[s for attempt in group for s in attempt]``), each aligned with that
    sample's ``loss_mask``.
    """
    attempts = [[a] if isinstance(a, Trajectory) else list(a.samples) for a in group]
    rewards = [a.reward for a in group]
    values = advantages(rewards, method, eps=eps)
    return [
        token_advantages(s, v) for samples, v in zip(attempts, values, strict=True) for s in samples
    ]
