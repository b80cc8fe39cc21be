"""Sampling a batch of completions: left-padded rows, one KV cache, each row with its own
sampling parameters and seeded generator, and the log-probability of every sampled token under
the distribution it was drawn from. Runs in the policy's worker thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from palaestra.llm.local_hf.activations import ActivationRecorder, ActivationTokens
from palaestra.llm.types import FinishReason

if TYPE_CHECKING:
    import torch


@dataclass
class Row:
    """One request of a batch, ready to generate."""

    prompt_ids: list[int]
    rendered: str
    temperature: float
    top_p: float
    top_k: int  # 0: no limit
    max_new: int
    stop: list[str]
    generator: torch.Generator
    key: str  # the memory key of this request's messages
    used_key: str | None  # the memory entry it extended
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: FinishReason = "length"
    activations: dict[str, list[list[float]]] | None = None  # when recording


def sampling_logprobs(logits: torch.Tensor, rows: list[Row]) -> torch.Tensor:
    """Per row, the log-probabilities of the distribution its next token is drawn from."""
    import torch

    temperature = torch.tensor(
        [r.temperature or 1.0 for r in rows], device=logits.device
    ).unsqueeze(1)
    logp = torch.log_softmax(logits / temperature, dim=-1)
    for i, r in enumerate(rows):
        if r.temperature and 0 < r.top_k < logp.shape[-1]:
            kth = torch.topk(logp[i], r.top_k).values[-1]
            logp[i] = torch.log_softmax(logp[i].masked_fill(logp[i] < kth, -torch.inf), dim=-1)
        if r.temperature and r.top_p < 1.0:
            sorted_logp, order = torch.sort(logp[i], descending=True)
            probs = sorted_logp.exp()
            outside = probs.cumsum(-1) - probs >= r.top_p  # the top token always stays in
            nucleus = torch.full_like(sorted_logp, float("-inf"))
            nucleus = nucleus.scatter(0, order, sorted_logp.masked_fill(outside, -torch.inf))
            logp[i] = torch.log_softmax(nucleus, dim=-1)
    return logp


def _stopped(tokenizer: Any, row: Row) -> bool:
    # A stop string of n characters spans at most 4n byte-level tokens.
    window = 4 * max(len(s) for s in row.stop) + 1
    tail = tokenizer.decode(row.tokens[-window:], skip_special_tokens=True)
    return any(s in tail for s in row.stop)


def generate(
    model: Any,
    tokenizer: Any,
    rows: list[Row],
    *,
    device: Any,
    pad_id: int,
    eos_ids: set[int],
    record: Sequence[str] = (),
    record_tokens: ActivationTokens = "last",
    abort: Callable[[], bool] | None = None,
) -> None:
    """Sample every row's completion (its ``tokens``, ``logprobs`` and ``finish``),
    left-padded in one batch with a KV cache; with ``record``, also the activations of those
    modules (:mod:`.activations`) in each row's ``activations``. ``abort`` is asked after each
    token: when it says True the batch ends there (``finish`` "length"), so that closing the
    policy never waits for a long completion on a slow CPU."""
    if not record:
        _generate(
            model, tokenizer, rows, device=device, pad_id=pad_id, eos_ids=eos_ids, abort=abort
        )
        return
    with ActivationRecorder(model, record, record_tokens) as recorder:
        _generate(
            model, tokenizer, rows, device=device, pad_id=pad_id, eos_ids=eos_ids, abort=abort
        )
    per_row = recorder.rows([len(r.prompt_ids) for r in rows], [len(r.tokens) for r in rows])
    for row, activations in zip(rows, per_row, strict=True):
        row.activations = activations


def _generate(
    model: Any,
    tokenizer: Any,
    rows: list[Row],
    *,
    device: Any,
    pad_id: int,
    eos_ids: set[int],
    abort: Callable[[], bool] | None = None,
) -> None:
    import torch

    with torch.inference_mode():
        width = max(len(r.prompt_ids) for r in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, width - len(r.prompt_ids) :] = torch.tensor(r.prompt_ids)
            mask[i, width - len(r.prompt_ids) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
        )
        position = positions[:, -1:]
        done = [False] * len(rows)
        pad = torch.tensor([pad_id], device=device)
        while True:
            logp = sampling_logprobs(out.logits[:, -1, :].float(), rows)
            picks = [
                pad
                if done[i]
                else torch.argmax(logp[i], dim=-1, keepdim=True)
                if r.temperature == 0
                else torch.multinomial(logp[i].exp(), 1, generator=r.generator)
                for i, r in enumerate(rows)
            ]
            chosen = torch.cat(picks).unsqueeze(1)
            # One transfer per step for the whole batch.
            tokens = chosen.squeeze(1).tolist()
            logprobs = logp.gather(1, chosen).squeeze(1).tolist()
            for i, r in enumerate(rows):
                if done[i]:
                    continue
                r.tokens.append(tokens[i])
                r.logprobs.append(logprobs[i])
                if tokens[i] in eos_ids or (r.stop and _stopped(tokenizer, r)):
                    r.finish, done[i] = "stop", True
                elif len(r.tokens) >= r.max_new:
                    r.finish, done[i] = "length", True
            if all(done) or (abort is not None and abort()):
                return
            position = position + 1
            mask = torch.cat([mask, mask.new_ones((len(rows), 1))], dim=1)
            out = model(
                input_ids=chosen,
                attention_mask=mask,
                position_ids=position,
                past_key_values=out.past_key_values,
                use_cache=True,
            )
