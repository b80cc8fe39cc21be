"""The trainer-facing half of palaestra: streams of episodes and GRPO groups, token-exact
trajectories, advantages, curricula and policy versions (docs/rl.md)."""

from palaestra.rl.advantages import advantages, dr_grpo, group_advantages, grpo, rloo
from palaestra.rl.curricula import (
    AdaCuRL,
    AdaRFT,
    CurriculumExhausted,
    DifficultyPools,
    LearnabilityBand,
    Uniform,
)
from palaestra.rl.sampler import (
    GroupFilter,
    GroupOutcome,
    TaskDraw,
    TaskSampler,
    has_reward_variance,
)
from palaestra.rl.stream import Group, RolloutStream, StreamStats
from palaestra.rl.trajectory import (
    Batch,
    Trajectories,
    Trajectory,
    TrajectoryError,
    collate,
    to_trajectories,
    to_trajectory,
)

__all__ = [
    "AdaCuRL",
    "AdaRFT",
    "Batch",
    "CurriculumExhausted",
    "DifficultyPools",
    "Group",
    "GroupFilter",
    "GroupOutcome",
    "LearnabilityBand",
    "RolloutStream",
    "StreamStats",
    "TaskDraw",
    "TaskSampler",
    "Trajectories",
    "Trajectory",
    "TrajectoryError",
    "Uniform",
    "advantages",
    "collate",
    "dr_grpo",
    "group_advantages",
    "grpo",
    "has_reward_variance",
    "rloo",
    "to_trajectories",
    "to_trajectory",
]
