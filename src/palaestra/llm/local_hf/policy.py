"""The local policy as an :class:`~palaestra.llm.client.LLMClient`: requests in, batches run in
one worker thread, responses with token ids, logprobs and ``policy_version`` out (see
:mod:`palaestra.llm.local_hf`)."""

from __future__ import annotations

import asyncio
import random
import threading
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from palaestra.llm.local_hf.activations import ActivationTokens, check_modules
from palaestra.llm.local_hf.batching import Batcher
from palaestra.llm.local_hf.chat import Conversations, Turn, parse_tool_calls, prefix_keys
from palaestra.llm.local_hf.generation import Row, generate
from palaestra.llm.local_hf.loading import (
    default_device,
    load_checkpoint,
    load_model,
    model_source,
    require_local_extra,
)
from palaestra.llm.types import LLMRequest, LLMResponse, SamplingParams, Usage

#: Open policies: their batches in flight are stopped when the interpreter exits, before its
#: executors' threads are joined (else a SIGTERM-ed eval waits for a whole completion).
_live: weakref.WeakSet[HFLocalPolicy] = weakref.WeakSet()


def _abort_all() -> None:
    for policy in list(_live):
        policy._abort.set()


threading._register_atexit(_abort_all)  # runs before the executors' threads are joined


class HFLocalPolicy:
    """Serves requests from a local model directory; see :mod:`palaestra.llm.local_hf`.

    ``model`` is a directory holding ``config.json``, the weights and a tokenizer with a chat
    template (or pass ``chat_template``), a ``.gguf`` file, or a short name such as
    ``smollm2-135m`` (:data:`~palaestra.llm.local_hf.loading.SHORT_NAMES`). ``device`` defaults to ``cuda`` when available, else ``cpu``;
    ``dtype`` (``"bfloat16"``, ...) to the checkpoint's. ``default_max_tokens`` applies when a
    request sets no ``max_tokens``. ``seed`` seeds requests that carry none. The model loads on
    the first request (off the event loop), or on :meth:`load`. Use ``async with`` or
    :meth:`aclose` to stop the worker.
    """

    def __init__(
        self,
        model: str | Path,
        *,
        device: str | None = None,
        dtype: str | None = None,
        max_batch_size: int = 8,
        batch_window_s: float = 0.005,
        default_max_tokens: int = 1024,
        chat_template: str | None = None,
        seed: int | None = None,
        policy_version: int = 0,
        max_conversations: int = 4096,
        record_activations: Sequence[str] = (),
        activation_tokens: ActivationTokens = "last",
    ) -> None:
        require_local_extra()
        if activation_tokens not in ("last", "all"):
            raise ValueError(f"activation_tokens={activation_tokens!r}: choose 'last' or 'all'")
        self.source = model_source(model)
        self.name = f"hf:{self.source.name}"
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="palaestra-hf")
        self._batcher = Batcher(
            self._run_batch,
            self._executor,
            max_batch_size=max_batch_size,
            batch_window_s=batch_window_s,
            name=self.name,
        )
        self.device = device
        self.dtype = dtype
        self.default_max_tokens = default_max_tokens
        self.chat_template = chat_template
        self.policy_version = policy_version
        self.record_activations = list(record_activations)
        self.activation_tokens: ActivationTokens = activation_tokens
        self._rng = random.Random(seed)
        self._conversations = Conversations(max_conversations)
        self._model: Any = None
        self._tokenizer: Any = None
        self._closed = False
        # Set on close (and at interpreter exit): a batch in flight stops at its next token.
        self._abort = threading.Event()
        _live.add(self)

    # -- loading (worker thread) -----------------------------------------------------------

    def _ensure_loaded(self) -> None:
        if self._model is not None:
            return
        if self.device is None:
            self.device = default_device()
        checkpoint = load_checkpoint(
            self.source, device=self.device, dtype=self.dtype, chat_template=self.chat_template
        )
        self._eos_ids = checkpoint.eos_ids
        self._pad_id = checkpoint.pad_id
        self._context = checkpoint.context
        check_modules(checkpoint.model, self.record_activations)
        self._tokenizer, self._model = checkpoint.tokenizer, checkpoint.model

    async def load(self) -> None:
        """Load the tokenizer and model now rather than on the first request."""
        await self._in_worker(self._ensure_loaded)

    async def load_weights(
        self, weights: str | Path | Mapping[str, Any], *, version: int | None = None
    ) -> int:
        """Swap in new weights between batches; returns the new ``policy_version``.

        ``weights``: a model directory (same tokenizer and architecture) or a state dict (all
        keys of the model, strictly). ``version`` defaults to the current one plus 1.
        """

        def swap() -> int:
            self._ensure_loaded()
            if isinstance(weights, Mapping):
                self._model.load_state_dict(weights, strict=True)
            else:
                source = model_source(weights)
                self._model = load_model(source, dtype=self.dtype, device=self.device)
            self.policy_version = self.policy_version + 1 if version is None else version
            return self.policy_version

        return await self._in_worker(swap)

    async def _in_worker(self, fn: Any, *args: Any) -> Any:
        if self._closed:
            raise RuntimeError(f"{self.name} is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # -- the request path (event loop) -----------------------------------------------------

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if self._closed:
            raise RuntimeError(f"{self.name} is closed; create a new policy")
        return await self._batcher.submit(request)

    async def aclose(self) -> None:
        """Stop the batcher and the worker thread (waits for a running batch to finish)."""
        if self._closed:
            return
        self._closed = True
        self._abort.set()
        await self._batcher.aclose()
        await asyncio.to_thread(self._executor.shutdown, True)

    async def __aenter__(self) -> HFLocalPolicy:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- batches (worker thread) -----------------------------------------------------------

    def _run_batch(self, requests: list[LLMRequest]) -> list[LLMResponse | Exception]:
        self._ensure_loaded()
        version = self.policy_version
        prepared: list[Row | Exception] = []
        for request in requests:
            try:
                prepared.append(self._prepare(request))
            except Exception as e:  # this request's fault only: fail it, serve the others
                prepared.append(e)
        rows = [p for p in prepared if isinstance(p, Row)]
        if rows:
            self._generate(rows)
        return [
            p if isinstance(p, Exception) else self._finish(p, version, bool(request.tools))
            for p, request in zip(prepared, requests, strict=True)
        ]

    def _prepare(self, request: LLMRequest) -> Row:
        import torch

        keys = prefix_keys(request)
        prompt_ids, rendered, used_key = self._conversations.prompt(self._tokenizer, request, keys)
        s = request.sampling
        room = None if self._context is None else self._context - len(prompt_ids)
        if room is not None and room <= 0:
            raise ValueError(
                f"the prompt is {len(prompt_ids)} tokens but {self.name} has a context of "
                f"{self._context}; shorten the conversation (fewer turns, shorter observations)"
            )
        max_new = s.max_tokens if s.max_tokens is not None else self.default_max_tokens
        if max_new < 1:
            raise ValueError(f"max_tokens={max_new} must be >= 1")
        temperature = 1.0 if s.temperature is None else s.temperature
        top_p = 1.0 if s.top_p is None else s.top_p
        top_k = s.top_k or 0
        if temperature < 0 or not 0 < top_p <= 1 or top_k < 0:
            raise ValueError(
                f"temperature={temperature} must be >= 0, top_p={top_p} in (0, 1] and "
                f"top_k={top_k} >= 0"
            )
        generator = torch.Generator(device=self.device)
        generator.manual_seed(s.seed if s.seed is not None else self._rng.getrandbits(63))
        return Row(
            prompt_ids=prompt_ids,
            rendered=rendered,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            max_new=max_new if room is None else min(max_new, room),
            stop=list(s.stop or []),
            generator=generator,
            key=keys[-1],
            used_key=used_key,
        )

    def _generate(self, rows: list[Row]) -> None:
        generate(
            self._model,
            self._tokenizer,
            rows,
            device=self.device,
            pad_id=self._pad_id,
            eos_ids=self._eos_ids,
            record=self.record_activations,
            record_tokens=self.activation_tokens,
            abort=self._abort.is_set,
        )

    def _finish(self, row: Row, version: int, tools: bool) -> LLMResponse:
        text = self._tokenizer.decode(row.tokens, skip_special_tokens=True)
        cuts = [text.find(s) for s in row.stop if s in text]
        if cuts:
            text = text[: min(cuts)]
        eos_text = ""
        body = row.tokens
        if row.tokens and row.tokens[-1] in self._eos_ids:
            eos_text = self._tokenizer.decode(row.tokens[-1:], skip_special_tokens=False)
            body = row.tokens[:-1]
        content, tool_calls = parse_tool_calls(text) if tools else (text, [])
        turn = Turn(
            rendered=row.rendered,
            prompt_ids=row.prompt_ids,
            completion_ids=row.tokens,
            generated=self._tokenizer.decode(body, skip_special_tokens=False),
            content=content or "",
            tool_calls=[tc.to_openai() for tc in tool_calls],
            eos_text=eos_text,
        )
        # The entry it extended is superseded by the longer conversation.
        self._conversations.remember(row.key, turn, extended=row.used_key)
        return LLMResponse(
            content=content,
            tool_calls=tool_calls,
            finish_reason="tool_calls" if tool_calls and row.finish == "stop" else row.finish,
            usage=Usage(prompt_tokens=len(row.prompt_ids), completion_tokens=len(row.tokens)),
            model=self.name,
            prompt_token_ids=row.prompt_ids,
            completion_token_ids=row.tokens,
            logprobs=row.logprobs,
            policy_version=version,
            sampling=SamplingParams(
                temperature=row.temperature,
                top_p=row.top_p,
                top_k=row.top_k or None,
                max_tokens=row.max_new,
            ),
            activations=row.activations,
        )
