"""Curricula: task samplers that follow the policy (see ``docs/rl.md``).

Each is a :class:`~palaestra.rl.sampler.TaskSampler`: the rollout stream asks it for a
:class:`~palaestra.rl.sampler.TaskDraw` before each episode or group and feeds it every
finished group as a :class:`~palaestra.rl.sampler.GroupOutcome`. Each is deterministic given
the ``random.Random`` it draws with, and shows its state as a plain dict (``state()``) for logs.

- :class:`Uniform`: every listed task equally likely (the baseline).
- :class:`AdaRFT`: a target difficulty moved by mean reward against β = 0.5; a freshly
  generated task at that difficulty per draw.
- :class:`DifficultyPools`: INTELLECT-3's easy / normal / hard pools by solve rate, drawn with
  fixed ratios; pair it with the group filter :func:`~palaestra.rl.sampler.has_reward_variance`.
- :class:`AdaCuRL`: difficulty buckets merged one at a time as the policy masters them, earlier
  ones revisited.
- :class:`LearnabilityBand`: only tasks whose solve rate is strictly between 0 and 1.
"""

from palaestra.rl.curricula.adacurl import AdaCuRL
from palaestra.rl.curricula.adarft import AdaRFT
from palaestra.rl.curricula.band import LearnabilityBand
from palaestra.rl.curricula.pools import DifficultyPools
from palaestra.rl.curricula.tally import CurriculumExhausted, difficulty_of
from palaestra.rl.curricula.uniform import Uniform

__all__ = [
    "AdaCuRL",
    "AdaRFT",
    "CurriculumExhausted",
    "DifficultyPools",
    "LearnabilityBand",
    "Uniform",
    "difficulty_of",
]
