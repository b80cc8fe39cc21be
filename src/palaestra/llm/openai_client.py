"""A policy backed by any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, SGLang...).

The base URL and key come from the arguments or from ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``.

Retries are our own loop (the SDK's are switched off, since it also obeys an ``x-should-retry``
header that can make it retry a 400): only transient failures are retried — connection errors,
timeouts, HTTP 408, 409, 429 and 5xx — with exponential backoff and jitter, or exactly the wait a
``Retry-After`` / ``retry-after-ms`` header asks for. A 400, 401, 403, 404 or 422 (any other
4xx) raises :class:`LLMAPIError` at once, naming the status and the server's message.

Each response carries its usage (cached and reasoning tokens included) and its USD cost from
:mod:`palaestra.llm.pricing` (None when the model's price is unknown). Token ids and logprobs are
passed through when the server returns them: OpenAI's ``logprobs.content[]`` when ``logprobs``
is on, vLLM's ``prompt_token_ids`` and per-choice ``token_ids`` when ``return_token_ids`` is on.
A reasoning server's ``reasoning_content`` (or ``reasoning``) becomes ``LLMResponse.reasoning``.

Each response carries ``policy_version``: the version current when the request was sent. An
RL trainer bumps it with :meth:`OpenAIChatPolicy.sync_weights` (which also makes a vLLM server
load the new weights: :mod:`palaestra.llm.vllm_sync`) or sets ``policy.policy_version`` itself
when it updates the server some other way. It also carries ``sampling``: the temperature, top_p,
top_k (sent in the body, as vLLM and SGLang read it) and max_tokens it was sent with, None where
the server's default applied.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import time
from collections.abc import Sequence
from typing import Any

import openai

from palaestra.llm.pricing import cost_usd, file_pricing
from palaestra.llm.types import (
    FinishReason,
    LLMRequest,
    LLMResponse,
    SamplingParams,
    ToolCall,
    Usage,
)
from palaestra.llm.vllm_sync import vllm_reload_weights

RETRYABLE_STATUS = frozenset({408, 409, 429})
_FINISH: dict[str | None, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}
_HINTS = {
    401: "check the API key (api_key= or OPENAI_API_KEY)",
    403: "the key is not allowed to use this model or endpoint",
    404: "check the model name and that the base URL ends in /v1",
}


class LLMAPIError(RuntimeError):
    """The server refused a request, or transient failures outlasted the retries.

    ``status`` is the last HTTP status (None for a connection error or timeout), ``attempts``
    how many requests were sent.
    """

    def __init__(self, message: str, *, status: int | None, attempts: int) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


def _retry_after(headers: Any) -> float | None:
    """Seconds a ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date) header asks for."""
    if headers is None:
        return None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _server_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return error.message


def _sent_sampling(params: dict[str, Any]) -> SamplingParams:
    """The sampling parameters a request was sent with (None where the server's default
    applied: the server, not this client, knows it)."""
    extra = params.get("extra_body", {})
    return SamplingParams(
        temperature=params.get("temperature"),
        top_p=params.get("top_p"),
        top_k=extra.get("top_k"),
        max_tokens=params.get("max_tokens", params.get("max_completion_tokens")),
    )


class OpenAIChatPolicy:
    """Sends each observation to ``/v1/chat/completions`` and returns the first choice.

    ``timeout``: seconds per HTTP request (each retry gets a fresh one). ``max_retries``:
    retries after the first attempt, for transient failures only. Backoff before retry ``n``
    (0-based) is ``min(backoff_max, backoff_base * 2**n)`` scaled by a random factor in
    [0.5, 1] — unless the server sent ``Retry-After``, which is waited out exactly (capped at
    ``retry_after_max``). ``sampling`` overrides what the scaffold asks for. ``logprobs`` asks
    for per-token logprobs; ``return_token_ids`` asks a vLLM server for prompt and completion
    token ids. ``policy_version``: the version of the weights the server holds now.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        max_retries: int = 5,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        retry_after_max: float = 300.0,
        sampling: dict[str, Any] | None = None,
        logprobs: bool = False,
        return_token_ids: bool = False,
        policy_version: int = 0,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries={max_retries} must be >= 0")
        if timeout <= 0:
            raise ValueError(f"timeout={timeout} must be > 0 seconds")
        file_pricing()  # a malformed PALAESTRA_PRICING file fails here, not mid-run
        self.model = model
        self.name = f"openai:{model}"
        self.sampling = sampling or {}
        self.logprobs = logprobs
        self.return_token_ids = return_token_ids
        self.policy_version = policy_version
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_max = retry_after_max
        self._rng = random.Random()
        self._client = openai.AsyncOpenAI(
            base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            timeout=timeout,
            max_retries=0,
        )

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    def _params(self, request: LLMRequest) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": request.messages}
        if request.tools:
            params["tools"] = request.tools
        asked = request.sampling.model_dump(exclude_none=True)
        params.update({**asked, **self.sampling})
        if "top_k" in params:  # not an OpenAI parameter: vLLM and SGLang read it from the body
            params["extra_body"] = {**params.get("extra_body", {}), "top_k": params.pop("top_k")}
        if self.logprobs:
            params["logprobs"] = True
        if self.return_token_ids:
            params["extra_body"] = {**params.get("extra_body", {}), "return_token_ids": True}
        return params

    def _backoff(self, retry: int, error: Exception) -> float:
        response = getattr(error, "response", None)
        asked = _retry_after(getattr(response, "headers", None))
        if asked is not None:
            return min(asked, self.retry_after_max)
        return min(self.backoff_max, self.backoff_base * 2**retry) * self._rng.uniform(0.5, 1.0)

    async def _create(self, params: dict[str, Any]) -> Any:
        attempts = 0
        while True:
            attempts += 1
            try:
                return await self._client.chat.completions.create(**params)
            except openai.APIStatusError as e:
                transient = e.status_code in RETRYABLE_STATUS or e.status_code >= 500
                if not transient:
                    hint = _HINTS.get(
                        e.status_code, "the request was rejected; fix it, not retried"
                    )
                    raise LLMAPIError(
                        f"{self.base_url} answered HTTP {e.status_code} for model "
                        f"{self.model!r}: {_server_message(e)} ({hint})",
                        status=e.status_code,
                        attempts=attempts,
                    ) from e
                error: Exception = e
                what = f"HTTP {e.status_code}: {_server_message(e)}"
                status: int | None = e.status_code
            except openai.APIConnectionError as e:  # APITimeoutError is one too
                error, status = e, None
                what = "timed out" if isinstance(e, openai.APITimeoutError) else f"{e}"
            if attempts > self.max_retries:
                raise LLMAPIError(
                    f"{self.base_url} failed {attempts} times for model {self.model!r}, giving "
                    f"up (max_retries={self.max_retries}); last error: {what}",
                    status=status,
                    attempts=attempts,
                ) from error
            await asyncio.sleep(self._backoff(attempts - 1, error))

    async def sync_weights(
        self,
        *,
        method: str = "reload_weights",
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        pause: bool = True,
        version: int | None = None,
    ) -> int:
        """Make the vLLM server load new weights, then bump ``policy_version`` (to
        ``version``, default the current one plus 1) and return it.

        Calls ``method`` on every worker through vLLM's ``/collective_rpc``, between
        ``/pause?mode=keep`` and ``/resume`` (see :mod:`palaestra.llm.vllm_sync`; the server
        runs with ``VLLM_SERVER_DEV_MODE=1``). Requests sent before the bump keep the old
        version: they were sent to the old weights.
        """
        await vllm_reload_weights(
            self.base_url,
            method=method,
            args=args,
            kwargs=kwargs,
            pause=pause,
            api_key=self._client.api_key,
        )
        self.policy_version = self.policy_version + 1 if version is None else version
        return self.policy_version

    async def complete(self, request: LLMRequest) -> LLMResponse:
        version = self.policy_version
        params = self._params(request)
        completion = await self._create(params)
        if not completion.choices:
            raise LLMAPIError(
                f"{self.base_url} returned no choices for model {self.model!r}",
                status=200,
                attempts=1,
            )
        choice = completion.choices[0]
        message = choice.message
        usage = Usage()
        if completion.usage is not None:
            prompt_details = completion.usage.prompt_tokens_details
            completion_details = completion.usage.completion_tokens_details
            usage = Usage(
                prompt_tokens=completion.usage.prompt_tokens or 0,
                completion_tokens=completion.usage.completion_tokens or 0,
                cached_tokens=(prompt_details and prompt_details.cached_tokens) or 0,
                reasoning_tokens=(completion_details and completion_details.reasoning_tokens) or 0,
            )
        logprobs = None
        if choice.logprobs is not None and choice.logprobs.content:
            logprobs = [t.logprob for t in choice.logprobs.content]
        extra = choice.model_extra or {}
        top_extra = completion.model_extra or {}
        served = completion.model or self.model
        cost = None  # no usage reported: the cost is unknown, not 0
        if completion.usage is not None:
            cost = cost_usd(served, usage)
            if cost is None and served != self.model:
                cost = cost_usd(self.model, usage)
        message_extra = message.model_extra or {}
        reasoning = message_extra.get("reasoning_content") or message_extra.get("reasoning")
        return LLMResponse(
            content=message.content,
            reasoning=reasoning if isinstance(reasoning, str) else None,
            tool_calls=[
                ToolCall(id=tc.id, name=tc.function.name, arguments=tc.function.arguments or "{}")
                for tc in (message.tool_calls or [])
                if getattr(tc, "function", None) is not None
            ],
            finish_reason=_FINISH.get(choice.finish_reason, "stop"),
            usage=usage,
            cost_usd=cost,
            model=served,
            prompt_token_ids=top_extra.get("prompt_token_ids") or extra.get("prompt_token_ids"),
            completion_token_ids=extra.get("token_ids"),
            logprobs=logprobs,
            policy_version=version,
            sampling=_sent_sampling(params),
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> OpenAIChatPolicy:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
