"""The clipped surrogate of one micro batch, its backward pass, and what it measures.

Per micro batch (samples grouped by length, :func:`micro_batches`), :func:`surrogate_backward`
runs the model forward on the padded token ids in ``eval`` mode whatever mode the model is in
(no dropout, so the ratio of a token the current weights sampled is 1; the mode is restored
after the forward pass), computes

    r_t = exp(logp_now(t) - logp_rollout(t)),
    loss = - sum_t mask_t * min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t) / total_tokens

and adds its gradient. Alongside, over the mask's tokens (as sums, the trainer divides):

* ``clipped``: tokens whose ratio the clip cut off the gradient, counted as TRL and verl do:
  ``r < 1 - eps`` with a negative advantage or ``r > 1 + eps`` with a positive one;
* ``entropy``: the entropy of the current weights' next-token distribution at each token's
  position (at the trainer's temperature; the behaviour policy's own for lag-0 tokens), nats;
* ``kl``: the k3 estimate ``exp(q - p) - (q - p) - 1`` of KL(policy || reference) per token,
  ``p`` the current weights' log-probability (before this step's update), ``q`` the reference
  model's (the initial weights), when one is given; the tokens are the behaviour policy's
  samples, so at lag > 0 it is an estimate under a slightly different distribution;
* ``lag0_tokens`` / ``lag0_abs_log_ratio``: the tokens the current weights sampled (their
  version is the trainer's) and the sum of ``|log r_t|`` over them, which should be ~0: the
  trainer's first step checks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from palaestra.rl.trajectory import Trajectory, collate


@dataclass
class LossParts:
    """Sums over one micro batch's trained tokens (see the module docstring)."""

    loss: float = 0.0
    clipped: float = 0.0
    entropy: float = 0.0
    kl: float = 0.0
    lag0_tokens: int = 0
    lag0_abs_log_ratio: float = 0.0

    def __iadd__(self, other: LossParts) -> LossParts:
        self.loss += other.loss
        self.clipped += other.clipped
        self.entropy += other.entropy
        self.kl += other.kl
        self.lag0_tokens += other.lag0_tokens
        self.lag0_abs_log_ratio += other.lag0_abs_log_ratio
        return self


Chunk = list[tuple[Trajectory, list[float]]]


def micro_batches(
    samples: Sequence[Trajectory], rows: Sequence[list[float]], budget: int
) -> list[Chunk]:
    """Samples grouped by length so each chunk's padded size stays within ``budget`` tokens
    (a sample longer than the budget is a chunk of its own)."""
    pairs = sorted(zip(samples, rows, strict=True), key=lambda p: len(p[0]))
    chunks: list[Chunk] = []
    for pair in pairs:
        if chunks and len(pair[0]) * (len(chunks[-1]) + 1) <= budget:
            chunks[-1].append(pair)
        else:
            chunks.append([pair])
    return chunks


def surrogate_backward(
    model: Any,
    chunk: Chunk,
    *,
    temperature: float,
    clip: float,
    total_tokens: int,
    version: int,
    reference: Any = None,
) -> LossParts:
    """Forward, loss and backward of one micro batch; returns its :class:`LossParts`."""
    import torch

    device = next(model.parameters()).device
    samples = [s for s, _ in chunk]
    batch = collate(samples, pad_id=0, advantages=[r for _, r in chunk])
    width = max(batch.lengths)
    ids = torch.tensor(batch.input_ids, device=device)
    attention = torch.tensor(batch.attention_mask, device=device)
    mask = torch.tensor(batch.loss_mask, device=device, dtype=torch.float32)[:, 1:]
    adv = torch.tensor(batch.advantages, device=device)[:, 1:]
    versions = torch.tensor(
        [s.token_versions() + [-1] * (width - len(s)) for s in samples], device=device
    )[:, 1:]
    targets = ids[:, 1:].unsqueeze(-1)
    training = model.training
    model.eval()  # no dropout: the distribution the policy sampled from (restored below)
    try:
        logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
    finally:
        model.train(training)
    full = torch.log_softmax(logits / temperature, dim=-1)
    logp = full.gather(-1, targets).squeeze(-1)
    if batch.logprobs is None:  # no behaviour logprobs: on-policy (ratio 1, gradient kept)
        old = logp.detach()
    else:
        old = torch.tensor(batch.logprobs, device=device)[:, 1:]
    ratio = torch.exp(logp - old)
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv)
    loss = -(surrogate * mask).sum() / total_tokens
    loss.backward()
    parts = LossParts(loss=float(loss.detach()))
    with torch.no_grad():
        ratio = ratio.detach()
        clipped = ((ratio < 1 - clip) & (adv < 0)) | ((ratio > 1 + clip) & (adv > 0))
        parts.clipped = float((clipped.float() * mask).sum())
        detached = full.detach()
        parts.entropy = float((-(detached.exp() * detached).sum(-1) * mask).sum())
        del full, detached
        lag0 = (versions == version).float() * mask
        parts.lag0_tokens = int(lag0.sum())
        parts.lag0_abs_log_ratio = float(((logp.detach() - old).abs() * lag0).sum())
        if reference is not None:
            ref_logits = reference(input_ids=ids, attention_mask=attention).logits[:, :-1]
            ref = torch.log_softmax(ref_logits.float() / temperature, dim=-1)
            ref = ref.gather(-1, targets).squeeze(-1)
            delta = ref - logp.detach()
            parts.kl = float(((delta.exp() - delta - 1) * mask).sum())
    return parts


def sample_logprobs(
    model: Any, sample: Trajectory, temperature: float, *, eval_mode: bool = True
) -> list[float]:
    """The log-probability of each token of ``sample`` under ``model`` at ``temperature``
    (aligned with ``token_ids``; 0.0 at position 0), without gradient, in ``eval`` mode (or
    in the model's own mode with ``eval_mode=False``: dropout on if it is training)."""
    import torch

    device = next(model.parameters()).device
    training = model.training
    if eval_mode:
        model.eval()
    try:
        with torch.no_grad():
            ids = torch.tensor([sample.token_ids], device=device)
            logits = model(input_ids=ids).logits[0, :-1].float()
            logp = torch.log_softmax(logits / temperature, dim=-1)
            picked = logp.gather(-1, ids[0, 1:].unsqueeze(-1)).squeeze(-1)
    finally:
        model.train(training)
    return [0.0, *picked.tolist()]
