"""A policy behind any Anthropic-compatible ``/v1/messages`` endpoint: our requests converted
by :mod:`palaestra.llm.anthropic`, sent over httpx, the answers converted back."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from palaestra.llm.anthropic import (
    ANTHROPIC_VERSION,
    DEFAULT_MAX_TOKENS,
    anthropic_response_to_llm,
    llm_request_to_anthropic,
)
from palaestra.llm.types import LLMRequest, LLMResponse, SamplingParams


class AnthropicPolicy:
    """Answers observations from any Anthropic-compatible ``/v1/messages`` endpoint.

    ``base_url`` (default ``ANTHROPIC_BASE_URL`` or Anthropic's) is the URL without ``/v1``;
    ``api_key`` defaults to ``ANTHROPIC_API_KEY``. Transient failures (connection errors,
    429, 5xx, 529) are retried with exponential backoff; bad requests and auth errors are not.
    ``transport``: an ``httpx`` transport for custom networking (a unix socket, say). Each
    response carries the sampling parameters it was sent with (``LLMResponse.sampling``;
    None where the server's default applied).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        max_retries: int = 2,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        backoff_s: float = 0.5,
        transport: Any = None,
    ) -> None:
        import httpx

        self.model = model
        self.name = f"anthropic:{model}"
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.backoff_s = backoff_s
        base = base_url or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
        self._http = httpx.AsyncClient(
            base_url=base.rstrip("/"),
            timeout=timeout,
            transport=transport,
            headers={
                "x-api-key": api_key or os.environ.get("ANTHROPIC_API_KEY") or "",
                "anthropic-version": ANTHROPIC_VERSION,
                "content-type": "application/json",
            },
        )

    async def complete(self, request: LLMRequest) -> LLMResponse:
        import httpx

        body = llm_request_to_anthropic(request, self.model, default_max_tokens=self.max_tokens)
        for attempt in range(self.max_retries + 1):
            try:
                r = await self._http.post("/v1/messages", json=body)
            except httpx.TransportError:
                if attempt == self.max_retries:
                    raise
            else:
                if r.status_code < 400:
                    response = anthropic_response_to_llm(r.json())
                    update = {"model": response.model or self.model, "sampling": _sent(body)}
                    return response.model_copy(update=update)
                transient = r.status_code in (408, 409, 429, 529) or r.status_code >= 500
                if not transient or attempt == self.max_retries:
                    raise AnthropicAPIError(r.status_code, r.text)
            await asyncio.sleep(self.backoff_s * 2**attempt)
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        await self._http.aclose()


def _sent(body: dict[str, Any]) -> SamplingParams:
    """The sampling parameters a request was sent with (None where the server's default
    applied: the server, not this client, knows it)."""
    return SamplingParams(
        **{k: body.get(k) for k in ("temperature", "top_p", "top_k")},
        max_tokens=body.get("max_tokens"),
    )


class AnthropicAPIError(RuntimeError):
    """An error answer from an Anthropic-compatible endpoint."""

    def __init__(self, status: int, body: str) -> None:
        try:
            message = json.loads(body)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = body[:500]
        super().__init__(f"HTTP {status} from /v1/messages: {message}")
        self.status = status
