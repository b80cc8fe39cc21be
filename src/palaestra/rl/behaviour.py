"""The behaviour policy's sampling parameters, checked against the trainer's.

A PPO/GRPO ratio ``exp(logp_now - logp_rollout)`` compares two log-probabilities of one token;
they must be of the same distribution. The policy reports the distribution it drew each token
from (``LLMResponse.sampling``: temperature, top_p, top_k, max_tokens), carried per turn into
every trajectory (``TurnSpan.sampling``). A trainer that recomputes ``log_softmax(logits / T)``
over the whole vocabulary matches only samples drawn at temperature ``T`` with no top_p nucleus
and no top_k cut; anything else gives ratios off by up to several nats per token, silently (a
scaffold sampling at 0.3 under a trainer at 1.0: up to 3.4 nats). :func:`check_sampling` refuses
such samples in one line naming the turn and the fix. ``max_tokens`` only truncates: it is
carried, not compared. :func:`check_ratio` is the check behind it: the tokens the trainer's
current weights sampled must have a ratio of 1 (another checkpoint, dtype or chat template
fails it).
"""

from __future__ import annotations

from collections.abc import Iterable

from palaestra.llm.types import SamplingParams
from palaestra.rl.trajectory import Trajectory

#: Temperatures closer than this are the same.
TEMPERATURE_TOLERANCE = 1e-6


class SamplingMismatch(ValueError):
    """A sample was drawn with sampling parameters the trainer does not recompute."""


class RatioCheckFailed(RuntimeError):
    """The trainer's log-probabilities of tokens its own weights sampled are not the policy's."""


def check_ratio(mean_abs_log_ratio: float, tokens: int, tolerance: float) -> None:
    """Raise :class:`RatioCheckFailed` when the tokens the trainer's current weights sampled
    have a mean ``|log r|`` above ``tolerance`` (their ratio should be 1)."""
    if mean_abs_log_ratio > tolerance:
        raise RatioCheckFailed(
            f"the trainer's log-probabilities differ from the policy's by "
            f"{mean_abs_log_ratio:.3g} nats per token on {tokens} tokens the current weights "
            f"sampled (ratio_tolerance {tolerance:g}): the policy and the trainer must run the "
            "same checkpoint and chat template at the same temperature (a lower-precision "
            "policy dtype may need a larger tolerance)"
        )


def sampling_mismatch(
    sampling: SamplingParams | None, temperature: float, setting: str
) -> str | None:
    """Why a turn drawn with ``sampling`` cannot be trained at ``temperature`` (None: it can).
    ``setting`` names the trainer's knob in the hint (``GRPOConfig(temperature=...)``)."""
    if sampling is None:
        return (
            "carries no sampling parameters (LLMResponse.sampling): use a policy that reports "
            "them (HFLocalPolicy does; OpenAIChatPolicy reports what it sent)"
        )
    if sampling.temperature is None:
        return (
            "was sent without a temperature, so the server's default (unknown here) applied: "
            f"set the scaffold's SamplingParams(temperature={temperature:g})"
        )
    if sampling.temperature == 0:
        return (
            "was decoded greedily (temperature 0), not sampled: train on samples drawn at "
            f"temperature {temperature:g} (the scaffold's SamplingParams)"
        )
    if abs(sampling.temperature - temperature) > TEMPERATURE_TOLERANCE:
        return (
            f"was sampled at temperature {sampling.temperature:g} but the trainer computes "
            f"ratios at {temperature:g}: set {setting.format(sampling.temperature)} or sample "
            f"at {temperature:g}"
        )
    if sampling.top_p is not None and sampling.top_p < 1.0:
        return (
            f"was sampled with top_p={sampling.top_p:g}; the trainer recomputes the whole "
            "distribution, not the nucleus: sample with top_p 1"
        )
    if sampling.top_k:
        return (
            f"was sampled with top_k={sampling.top_k}; the trainer recomputes the whole "
            "distribution, not the top k: sample without top_k"
        )
    return None


def check_sampling(
    samples: Iterable[Trajectory],
    temperature: float,
    *,
    setting: str = "GRPOConfig(temperature={:g})",
) -> None:
    """Raise :class:`SamplingMismatch` for the first turn of ``samples`` drawn with other
    sampling parameters than a trainer at ``temperature`` recomputes."""
    for sample in samples:
        for span in sample.spans:
            problem = sampling_mismatch(span.sampling, temperature, setting)
            if problem is not None:
                where = f"episode {sample.episode_id}" if sample.episode_id else "an episode"
                raise SamplingMismatch(f"turn {span.turn} of {where} {problem}")
