"""GRPO for the local Hugging Face policy: groups in, weights updated in process.

:class:`GRPOTrainer` keeps its own copy of the policy's model (float32, in ``eval`` mode: no
dropout, so a token the current weights sampled has ratio 1) and an AdamW optimiser.
:meth:`GRPOTrainer.step` takes finished :class:`~palaestra.rl.stream.Group` s, turns each
episode into token-exact samples (:func:`~palaestra.rl.trajectory.to_trajectories`: the ids the
policy saw and wrote, the loss mask, the logprobs it sampled with, the sampling parameters it
used), gives every sample its group-relative advantage
(:func:`~palaestra.rl.advantages.group_advantages`) and takes one optimiser step on the clipped
surrogate (:mod:`palaestra.rl.loss`)

    loss = - sum_t mask_t * min(r_t A, clip(r_t, 1 - eps, 1 + eps) A) / sum_t mask_t,
    r_t = exp(logp_now(t) - logp_rollout(t))

(token-level normalisation over the whole step, as DAPO). The rollout's logprobs are the
behaviour policy's, so an episode sampled a few versions ago is corrected by the ratio and
bounded by the clip. The new weights go to the policy with
:meth:`~palaestra.llm.local_hf.HFLocalPolicy.load_weights`, which bumps its version.

Two checks keep the ratio honest: every sample trained on must have been drawn at the
trainer's temperature with no top_p or top_k (:mod:`palaestra.rl.behaviour`, one line naming
the turn and the fix), and on the first update the tokens the current weights sampled must have
a ratio of 1 within ``ratio_tolerance`` (mean ``|log r|``): another model, dtype or template
fails there, before any weight moves. Each step logs the clip fraction (TRL's count), the mean
token entropy and a KL estimate to the initial weights; a step whose groups carry no signal
makes no update, so ``updates`` are counted apart from steps.

The backward pass runs in a thread (:meth:`GRPOTrainer.astep`), off the event loop, so the
stream keeps running episodes while the trainer learns: rollouts overlap training, and the
stream's ``max_staleness`` bounds how many versions old a group may be when it is trained on
(:mod:`palaestra.rl.admission`). :func:`train` runs the whole loop, async (one stream,
overlapping) or sync (a stream per step, no overlap).

LoRA (``lora_rank``) needs ``peft``; the adapter is merged into the weights sent to the policy.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from palaestra.llm.local_hf import HFLocalPolicy
from palaestra.llm.local_hf.loading import default_device, load_model
from palaestra.rl.advantages import Estimator, group_advantages
from palaestra.rl.behaviour import RatioCheckFailed, check_ratio, check_sampling
from palaestra.rl.loss import LossParts, micro_batches, surrogate_backward
from palaestra.rl.sampler import TaskSampler, has_reward_variance
from palaestra.rl.stream import Group, RolloutStream, StreamStats
from palaestra.rl.trajectory import Trajectory, to_trajectories

Mode = Literal["async", "sync"]


@dataclass(frozen=True)
class GRPOConfig:
    """The trainer's knobs. ``temperature`` must be the one the policy sampled with, and the
    policy must sample with ``top_p`` 1 and no ``top_k`` (the defaults): the ratio compares
    logprobs of the same distribution (the trainer checks, :mod:`palaestra.rl.behaviour`).
    ``ratio_tolerance``: the mean ``|log r|`` over the tokens the current weights sampled that
    the first update accepts. ``log_kl``: keep a frozen copy of the initial weights and log a KL
    estimate to it (one more forward pass per micro batch, no gradient).
    ``micro_batch_tokens`` bounds the padded tokens of one forward and backward pass (memory),
    not the step's size: the pass keeps the logits' log-softmax (tokens x vocabulary floats,
    200 MB per 1,024 tokens of a 49k vocabulary) and every layer's activations, so a 135M model
    peaks near 2 GB at 1,024."""

    lr: float = 1e-5
    advantage: Estimator = "grpo"
    clip: float = 0.2
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    temperature: float = 1.0
    micro_batch_tokens: int = 1024
    lora_rank: int | None = None
    lora_alpha: float = 16.0
    ratio_tolerance: float = 0.05
    log_kl: bool = True


@dataclass
class StepStats:
    """What one step did. ``updated`` is False when no group had any signal (all rewards of
    each group equal): no optimiser step, no new version; ``updates`` counts the trainer's
    updates so far (steps with signal), ``step`` its steps."""

    step: int
    version: int
    updated: bool
    groups: int
    samples: int
    generated_tokens: int  # every completion token of the step's episodes, signal or not
    completion_tokens: int  # the policy's tokens trained on
    tokens: int  # every token of the samples trained on (prompts and observations too)
    mean_reward: float
    loss: float
    grad_norm: float
    clip_fraction: float
    """Trained tokens whose ratio the clip cut off the gradient (TRL's and verl's count)."""
    train_s: float
    lag: int = 0
    """How many versions the oldest turn trained on was behind the weights trained (0:
    on-policy); at most the stream's ``max_staleness``."""
    updates: int = 0
    entropy: float = 0.0
    """Mean entropy (nats) of the weights' next-token distribution at each trained token,
    before this step's update (for lag-0 tokens, the distribution they were drawn from)."""
    kl: float | None = None
    """Mean k3 estimate of KL(policy || initial weights) per trained token (``log_kl``), of
    the weights this step starts from (0 on the first update)."""
    lag0_log_ratio: float | None = None
    """Mean ``|log r|`` over trained tokens the current weights sampled (None: none did)."""
    stream: StreamStats | None = None
    """A copy of the stream's counters after this step (set by :func:`train`)."""

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.train_s if self.train_s > 0 else 0.0


class GRPOTrainer:
    """GRPO on ``policy``'s model; see the module docstring. Call :meth:`load` (or use
    :func:`train`) before the first step."""

    def __init__(self, policy: HFLocalPolicy, config: GRPOConfig | None = None) -> None:
        if not isinstance(policy, HFLocalPolicy):
            raise TypeError(
                f"GRPOTrainer trains a local model in process, not {type(policy).__name__}: "
                "pass an HFLocalPolicy (make_policy('hf:<dir|file.gguf|name>'))"
            )
        self.policy = policy
        self.config = config or GRPOConfig()
        if self.config.temperature <= 0:
            raise ValueError("GRPOConfig.temperature must be > 0 (the sampling temperature)")
        self.steps = 0
        self.updates = 0
        self.model: Any = None
        self.reference: Any = None
        self._optimizer: Any = None
        self._ratio_checked = False

    async def load(self) -> None:
        """Load the trainer's copy of the model (off the event loop)."""
        if self.model is None:
            await asyncio.to_thread(self._load)

    def _load(self) -> None:
        import torch

        device = self.policy.device or default_device()
        model = load_model(self.policy.source, dtype="float32", device=device)
        if self.config.log_kl:
            self.reference = copy.deepcopy(model).eval().requires_grad_(False)
        if self.config.lora_rank is not None:
            model = _with_lora(model, self.config)
        model.eval()  # no dropout: the loss's forward pass is the sampler's distribution
        params = [p for p in model.parameters() if p.requires_grad]
        self._optimizer = torch.optim.AdamW(
            params, lr=self.config.lr, weight_decay=self.config.weight_decay
        )
        self.model = model

    # -- one step ------------------------------------------------------------------------------

    async def astep(self, groups: Sequence[Group]) -> StepStats:
        """:meth:`step` in a thread, then the new weights to the policy (a new version)."""
        await self.load()
        stats = await asyncio.to_thread(self.step, groups)
        if stats.updated:
            stats.version = await self.policy.load_weights(self.policy_state())
        return stats

    def step(self, groups: Sequence[Group]) -> StepStats:
        """One optimiser step on ``groups`` (blocking: run it off the event loop). Does not
        touch the policy; :meth:`astep` does. Raises
        :class:`~palaestra.rl.behaviour.SamplingMismatch` for a sample drawn with other
        sampling parameters, :class:`RatioCheckFailed` when the first update's ratio check
        fails (no weight moves in either case)."""
        import torch

        if self.model is None:
            self._load()
        started = time.perf_counter()
        samples, rows, rewards = self._samples(groups)
        version = self.policy.policy_version
        self.steps += 1
        stats = StepStats(
            step=self.steps,
            version=version,
            updated=False,
            groups=len(groups),
            samples=len(samples),
            generated_tokens=sum(e.usage.completion_tokens for g in groups for e in g.episodes),
            completion_tokens=sum(s.completion_tokens for s in samples),
            tokens=sum(len(s) for s in samples),
            mean_reward=sum(rewards) / len(rewards) if rewards else 0.0,
            loss=0.0,
            grad_norm=0.0,
            clip_fraction=0.0,
            train_s=0.0,
            lag=max((version - v for s in samples for v in s.versions if v is not None), default=0),
            updates=self.updates,
        )
        if not samples:
            stats.train_s = time.perf_counter() - started
            return stats
        self._optimizer.zero_grad(set_to_none=True)
        parts = LossParts()
        for chunk in micro_batches(samples, rows, self.config.micro_batch_tokens):
            parts += surrogate_backward(
                self.model,
                chunk,
                temperature=self.config.temperature,
                clip=self.config.clip,
                total_tokens=stats.completion_tokens,
                version=version,
                reference=self.reference,
            )
        if parts.lag0_tokens:
            stats.lag0_log_ratio = parts.lag0_abs_log_ratio / parts.lag0_tokens
            self._check_ratio(stats.lag0_log_ratio, parts.lag0_tokens)
        params = [p for p in self.model.parameters() if p.requires_grad]
        norm = torch.nn.utils.clip_grad_norm_(params, self.config.max_grad_norm)
        self._optimizer.step()
        self.updates += 1
        n = stats.completion_tokens
        stats.updated, stats.updates = True, self.updates
        stats.loss, stats.grad_norm = parts.loss, float(norm)
        stats.clip_fraction, stats.entropy = parts.clipped / n, parts.entropy / n
        stats.kl = parts.kl / n if self.reference is not None else None
        stats.train_s = time.perf_counter() - started
        return stats

    def _samples(
        self, groups: Sequence[Group]
    ) -> tuple[list[Trajectory], list[list[float]], list[float]]:
        """The samples with signal, their advantage rows, and every episode's reward."""
        samples: list[Trajectory] = []
        rows: list[list[float]] = []
        rewards: list[float] = []
        for group in groups:
            attempts = [to_trajectories(e) for e in group.episodes]
            rewards += [a.reward for a in attempts]
            for attempt in attempts:  # every sample, signal or not: a wrong set-up shows at once
                check_sampling(attempt, self.config.temperature)
            if not has_reward_variance(group.outcome):
                continue  # equal rewards: zero advantage everywhere, nothing to learn
            for sample, row in zip(
                [s for a in attempts for s in a],
                group_advantages(attempts, self.config.advantage),
                strict=True,
            ):
                if sample.completion_tokens:
                    samples.append(sample)
                    rows.append(row)
        return samples, rows, rewards

    def _check_ratio(self, mean_abs_log_ratio: float, tokens: int) -> None:
        """On the first update: the tokens the current weights sampled must have ratio 1."""
        if self._ratio_checked:
            return
        try:
            check_ratio(mean_abs_log_ratio, tokens, self.config.ratio_tolerance)
        except RatioCheckFailed:
            self._optimizer.zero_grad(set_to_none=True)
            raise
        self._ratio_checked = True

    def policy_state(self) -> dict[str, Any]:
        """The weights the policy serves: the model's state dict (LoRA merged in)."""
        if self.config.lora_rank is None:
            return {k: v.detach() for k, v in self.model.state_dict().items()}
        return _merged_lora_state(self.model)


def _with_lora(model: Any, config: GRPOConfig) -> Any:
    import importlib.util

    if importlib.util.find_spec("peft") is None:
        raise ImportError("GRPOConfig(lora_rank=...) needs peft: pip install 'palaestra[lora]'")
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def _merged_lora_state(model: Any) -> dict[str, Any]:
    """The base model's state dict with every LoRA delta added in (the peft model is kept)."""
    import torch

    with torch.no_grad():
        model.merge_adapter()
        try:
            base = model.get_base_model()
            state = {
                k.replace(".base_layer", ""): v.detach().clone()
                for k, v in base.state_dict().items()
                if "lora_" not in k
            }
        finally:
            model.unmerge_adapter()
    return state


# -- the loop -----------------------------------------------------------------------------------


async def train(
    trainer: GRPOTrainer,
    env: str,
    *,
    steps: int,
    group_size: int = 8,
    groups_per_step: int = 4,
    mode: Mode = "async",
    max_staleness: int = 1,
    sampler: TaskSampler | None = None,
    concurrency: int | None = None,
    seed: int = 0,
    time_limit_s: float | None = None,
    on_step: Callable[[StepStats], Awaitable[None] | None] | None = None,
    **stream_kwargs: Any,
) -> list[StepStats]:
    """Train for ``steps`` steps of ``groups_per_step`` groups of ``group_size`` attempts.

    ``mode="async"``: one stream runs episodes all along, also while a step trains; no group
    is trained on weights more than ``max_staleness`` versions newer than its first turn's
    (the stream drops it when it would be, and holds back draws that would be:
    :mod:`palaestra.rl.admission`). ``mode="sync"``: each
    step runs its groups to the end, then trains, with no episode in flight (on-policy, no
    overlap). With ``time_limit_s`` training also stops after the first step that ends past
    that many seconds. ``on_step`` is called (and awaited when it returns an awaitable) after each step,
    e.g. to evaluate. Other keywords go to :class:`RolloutStream` (``scaffold=``,
    ``sandbox=``, ``group_filter=``...).
    """
    if mode not in ("async", "sync"):
        raise ValueError(f"mode={mode!r}: choose 'async' or 'sync'")
    if steps < 1 or group_size < 2 or groups_per_step < 1:
        raise ValueError(
            f"steps={steps} and groups_per_step={groups_per_step} must be >= 1 and "
            f"group_size={group_size} >= 2 (GRPO compares attempts)"
        )
    await trainer.load()
    width = concurrency or group_size * groups_per_step
    history: list[StepStats] = []
    started = time.perf_counter()

    def done() -> bool:
        late = time_limit_s is not None and time.perf_counter() - started >= time_limit_s
        return late or len(history) >= steps

    async def record(stats: StepStats, stream: RolloutStream) -> None:
        stats.stream = copy.deepcopy(stream.stats)
        history.append(stats)
        if on_step is not None:
            result = on_step(stats)
            if isinstance(result, Awaitable):
                await result

    def stream(step_seed: int, staleness: int | None) -> RolloutStream:
        return RolloutStream(
            env,
            trainer.policy,
            concurrency=width,
            sampler=sampler,
            seed=step_seed,
            max_staleness=staleness,
            update_every=None if staleness is None else groups_per_step,
            **stream_kwargs,
        )

    if mode == "sync":
        while not done():
            async with stream(seed + len(history) * 1_000_003, None) as s:
                groups = [g async for g in s.groups(group_size, draws=groups_per_step)]
            await record(await trainer.astep(groups), s)
        return history
    async with stream(seed, max_staleness) as s:
        pending: list[Group] = []
        async for group in s.groups(group_size):
            pending.append(group)
            if len(pending) < groups_per_step:
                continue
            await record(await trainer.astep(pending), s)
            pending = []
            if done():
                break
    return history
