"""Token-exact trajectories: an episode's turns as the one token sequence the policy saw and wrote.

A multi-turn episode is, to the model, one growing sequence: turn ``t``'s prompt is turn
``t-1``'s prompt, its completion, and then the template's tokens for the new messages (tool
output, the next user message, the next generation prompt). :func:`to_trajectories` rebuilds
that sequence from the ids the policy *returned* (``LLMResponse.prompt_token_ids`` and
``completion_token_ids``) and never re-encodes text, since re-tokenising a decoded completion
need not give the ids that were sampled (the classic multi-turn RL drift).

Per sample:

* ``token_ids``: the whole sequence; ``loss_mask``: 1 on the policy's own completion tokens,
  0 on everything else (the first prompt, template markers, tool output, user messages);
* ``logprobs``: aligned with ``token_ids``, the policy's log-probability on mask-1 tokens and
  ``0.0`` on mask-0 tokens (a float everywhere, so the list converts to a tensor as is; multiply
  by the mask, never trust a prompt position). ``None`` when the policy reported no logprobs;
* ``spans``: per turn, where its prompt extension and its completion lie, its policy
  version and the sampling parameters its completion was drawn with; :meth:`Trajectory.token_versions` gives the version per token (-1 off the mask).

**Breaks.** When turn ``t``'s prompt ids do not start with the sequence so far, the template or
server re-rendered history (templates that drop earlier ``<think>`` blocks, truncated tool
output, a server that re-templates and re-tokenises). ``on_break="error"`` raises
:class:`TrajectoryError` naming the turn and the first differing position; ``on_break="split"``
(the default) starts a new sample at that turn, so an episode gives several samples, each
self-consistent, all carrying the episode's reward. Breaks are counted on the result
(:attr:`Trajectories.breaks`), so a trainer can watch for a template that drifts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from palaestra.llm.types import LLMResponse, SamplingParams
from palaestra.run.rollout import Episode

BreakMode = Literal["split", "error"]

#: What a policy must be asked for so that its responses carry token ids.
TOKEN_IDS_HINT = (
    "use a policy that returns token ids: HFLocalPolicy does always; OpenAIChatPolicy needs "
    "return_token_ids=True (and logprobs=True for logprobs) against a server that honours it, "
    "such as vLLM >= 0.10.2"
)


class TrajectoryError(ValueError):
    """An episode's turns cannot be made into a token-exact trajectory (the message says why)."""


@dataclass(frozen=True, slots=True)
class TurnSpan:
    """Where one turn lies in a sample's ``token_ids``.

    ``token_ids[prompt_start:completion_start]`` is what the turn's prompt added to the
    sequence (the whole first prompt on a sample's first turn), and
    ``token_ids[completion_start:completion_end]`` the policy's completion (mask 1).
    """

    turn: int  # the turn's index in the episode
    prompt_start: int
    completion_start: int
    completion_end: int
    version: int | None  # the policy version that wrote the completion, when reported
    sampling: SamplingParams | None = None  # what the completion was drawn with, when reported


@dataclass(frozen=True, slots=True)
class Break:
    """Turn ``turn``'s prompt did not extend the sequence so far.

    ``position`` is the first index where they differ; ``expected`` is the sequence's token
    there and ``found`` the prompt's (None where one of them has ended).
    """

    turn: int
    position: int
    expected: int | None
    found: int | None


@dataclass(slots=True)
class Trajectory:
    """One self-consistent token sequence of an episode (see the module docstring)."""

    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float] | None
    spans: list[TurnSpan]
    reward: float
    rewards: dict[str, float] = field(default_factory=dict)
    episode_id: str | None = None
    task_id: str | None = None
    status: str | None = None
    #: This sample's index among the episode's samples (0 unless the episode was split).
    sample: int = 0

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def versions(self) -> list[int | None]:
        """The policy version of each turn of this sample."""
        return [s.version for s in self.spans]

    @property
    def samplings(self) -> list[SamplingParams | None]:
        """The sampling parameters of each turn of this sample (None where not reported)."""
        return [s.sampling for s in self.spans]

    @property
    def prompt_length(self) -> int:
        """The first prompt's length: the tokens before the first completion."""
        return self.spans[0].completion_start if self.spans else 0

    @property
    def completion_tokens(self) -> int:
        """How many tokens the policy wrote in this sample (the mask's sum)."""
        return sum(s.completion_end - s.completion_start for s in self.spans)

    def token_versions(self, *, unknown: int = -1) -> list[int]:
        """The policy version per token, ``unknown`` off the mask or where none was reported
        (AReaL's convention: prompt tokens carry -1)."""
        out = [unknown] * len(self.token_ids)
        for s in self.spans:
            if s.version is not None:
                out[s.completion_start : s.completion_end] = [s.version] * (
                    s.completion_end - s.completion_start
                )
        return out


@dataclass(slots=True)
class Trajectories:
    """The samples of one episode, the breaks that split it, and the episode's reward (also on
    every sample; here too for an episode with no turns, hence no sample)."""

    samples: list[Trajectory]
    breaks: list[Break]
    reward: float

    def __iter__(self) -> Iterator[Trajectory]:
        return iter(self.samples)

    def __len__(self) -> int:
        return len(self.samples)


def to_trajectories(episode: Episode, *, on_break: BreakMode = "split") -> Trajectories:
    """The token-exact samples of ``episode``: one, or one per self-consistent stretch of turns
    under ``on_break="split"``. Raises :class:`TrajectoryError` when a turn has no token ids,
    its logprobs do not match its completion, or (``on_break="error"``) a turn breaks."""
    if on_break not in ("split", "error"):
        raise ValueError(f"on_break={on_break!r} must be 'split' or 'error'")
    episode_id = episode.episode_id
    if episode_id is None and episode.turns:
        episode_id = episode.turns[0].observation.metadata.get("episode_id")
    where = f"episode {episode_id}" if episode_id else "the episode"
    has_logprobs = _logprobs_reported(episode, where)
    common: dict[str, Any] = {
        "reward": episode.reward,
        "rewards": dict(episode.end.rewards),
        "episode_id": episode_id,
        "task_id": episode.task_id,
        "status": episode.status,
    }
    samples: list[Trajectory] = []
    breaks: list[Break] = []
    current: Trajectory | None = None
    for t, turn in enumerate(episode.turns):
        prompt, completion = _ids(turn.action, t, where)
        if current is not None and not _extends(prompt, current.token_ids):
            brk = _first_difference(t, prompt, current.token_ids)
            if on_break == "error":
                raise TrajectoryError(_break_message(brk, where))
            breaks.append(brk)
            current = None
        if current is None:
            current = Trajectory(
                [], [], [] if has_logprobs else None, [], sample=len(samples), **common
            )
            samples.append(current)
        _append_turn(current, t, turn.action, prompt, completion)
    return Trajectories(samples, breaks, episode.reward)


def to_trajectory(episode: Episode) -> Trajectory:
    """The one token-exact trajectory of ``episode``; raises :class:`TrajectoryError` on a
    break or when the episode has no turns."""
    samples = to_trajectories(episode, on_break="error").samples
    if not samples:
        raise TrajectoryError("the episode has no turns (it ended before the first action)")
    return samples[0]


def _ids(action: LLMResponse, t: int, where: str) -> tuple[list[int], list[int]]:
    missing = [
        name
        for name in ("prompt_token_ids", "completion_token_ids")
        if getattr(action, name) is None
    ]
    if missing:
        raise TrajectoryError(
            f"turn {t} of {where} has no {' and no '.join(missing)}: {TOKEN_IDS_HINT}"
        )
    return action.prompt_token_ids, action.completion_token_ids  # type: ignore[return-value]


def _logprobs_reported(episode: Episode, where: str) -> bool:
    """True when every turn has logprobs, one per completion token; False when none has."""
    reported = [turn.action.logprobs is not None for turn in episode.turns]
    if not any(reported):
        return False
    if not all(reported):
        t = reported.index(False)
        raise TrajectoryError(
            f"turn {t} of {where} has no logprobs while other turns have: ask the policy for "
            "logprobs on every request (OpenAIChatPolicy(logprobs=True))"
        )
    for t, turn in enumerate(episode.turns):
        a = turn.action
        if a.completion_token_ids is not None and len(a.logprobs) != len(a.completion_token_ids):  # type: ignore[arg-type]
            raise TrajectoryError(
                f"turn {t} of {where} has {len(a.logprobs)} logprobs for "  # type: ignore[arg-type]
                f"{len(a.completion_token_ids)} completion tokens; they must be one per token"
            )
    return True


def _extends(prompt: list[int], sequence: list[int]) -> bool:
    n = len(sequence)
    return len(prompt) >= n and prompt[:n] == sequence


def _first_difference(t: int, prompt: list[int], sequence: list[int]) -> Break:
    n = min(len(prompt), len(sequence))
    i = next((i for i in range(n) if prompt[i] != sequence[i]), n)
    return Break(
        turn=t,
        position=i,
        expected=sequence[i] if i < len(sequence) else None,
        found=prompt[i] if i < len(prompt) else None,
    )


def _break_message(brk: Break, where: str) -> str:
    return (
        f"turn {brk.turn} of {where}: its prompt ids do not extend the previous turn's prompt "
        f"+ completion ids; first difference at position {brk.position} (expected token "
        f"{brk.expected}, got {brk.found}). The chat template or server re-renders earlier "
        "turns (dropped reasoning, truncated tool output, re-tokenised history); use "
        "on_break='split' to train on the self-consistent parts, or an append-only template"
    )


def _append_turn(
    sample: Trajectory, t: int, action: LLMResponse, prompt: list[int], completion: list[int]
) -> None:
    start = len(sample.token_ids)
    extension = prompt[start:]
    sample.token_ids += extension
    sample.token_ids += completion
    sample.loss_mask += [0] * len(extension)
    sample.loss_mask += [1] * len(completion)
    if sample.logprobs is not None:
        sample.logprobs += [0.0] * len(extension)
        sample.logprobs += action.logprobs  # type: ignore[arg-type]
    completion_start = start + len(extension)
    sample.spans.append(
        TurnSpan(
            turn=t,
            prompt_start=start,
            completion_start=completion_start,
            completion_end=completion_start + len(completion),
            version=action.policy_version,
            sampling=action.sampling,
        )
    )


@dataclass(slots=True)
class Batch:
    """Right-padded rows for a trainer: plain lists, ``torch.tensor(batch.input_ids)`` away.

    ``attention_mask`` is 1 on real tokens; ``loss_mask``, ``logprobs`` and ``advantages`` are
    0 on padding. ``logprobs`` is None when any sample has none; ``advantages`` when none were
    given.
    """

    input_ids: list[list[int]]
    attention_mask: list[list[int]]
    loss_mask: list[list[int]]
    logprobs: list[list[float]] | None
    advantages: list[list[float]] | None
    lengths: list[int]


def collate(
    samples: Sequence[Trajectory],
    *,
    pad_id: int,
    advantages: Sequence[Sequence[float]] | None = None,
    pad_to_multiple_of: int = 1,
) -> Batch:
    """Right-pad ``samples`` to the longest (rounded up to ``pad_to_multiple_of``).

    ``advantages``, one per-token list per sample (as :mod:`palaestra.rl.advantages` returns
    them), are padded alongside.
    """
    if not samples:
        raise ValueError("collate needs at least one trajectory")
    if pad_to_multiple_of < 1:
        raise ValueError(f"pad_to_multiple_of={pad_to_multiple_of} must be >= 1")
    if advantages is not None and len(advantages) != len(samples):
        raise ValueError(f"{len(advantages)} advantage rows for {len(samples)} trajectories")
    lengths = [len(s) for s in samples]
    width = -(-max(lengths) // pad_to_multiple_of) * pad_to_multiple_of
    with_logprobs = all(s.logprobs is not None for s in samples)
    batch = Batch(
        [], [], [], [] if with_logprobs else None, None if advantages is None else [], lengths
    )
    for i, (s, n) in enumerate(zip(samples, lengths, strict=True)):
        pad = width - n
        batch.input_ids.append(s.token_ids + [pad_id] * pad)
        batch.attention_mask.append([1] * n + [0] * pad)
        batch.loss_mask.append(s.loss_mask + [0] * pad)
        if batch.logprobs is not None:
            batch.logprobs.append(s.logprobs + [0.0] * pad)  # type: ignore[operator]
        if batch.advantages is not None:
            row = list(advantages[i])  # type: ignore[index]
            if len(row) != n:
                raise ValueError(f"advantages row {i} has {len(row)} values for {n} tokens")
            batch.advantages.append(row + [0.0] * pad)
    return batch
