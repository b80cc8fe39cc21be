"""OpenAI's chat-completions wire format: a request body as an :class:`LLMRequest`, and an
:class:`LLMResponse` as a ``chat.completion`` or as the chunks of a stream."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

from palaestra.llm.types import LLMRequest, LLMResponse, SamplingParams
from palaestra.scaffolds.proxy.episodes import ProxyRequestError

_SAMPLING_KEYS = ("temperature", "top_p", "seed")


def openai_request_to_llm(body: Any, metadata: dict[str, Any] | None = None) -> LLMRequest:
    """A chat-completions request body as an :class:`LLMRequest` (one choice only)."""
    if not isinstance(body, dict):
        raise ProxyRequestError("the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ProxyRequestError("'messages' must be a non-empty list of chat messages")
    if any(not isinstance(m, dict) or "role" not in m for m in messages):
        raise ProxyRequestError("every message must be an object with a 'role'")
    if body.get("n", 1) not in (1, None):
        raise ProxyRequestError("the proxy serves one choice per call; drop 'n' or set it to 1")
    tools = body.get("tools") or None
    if tools is not None and not isinstance(tools, list):
        raise ProxyRequestError("'tools' must be a list of function specs")
    sampling: dict[str, Any] = {k: body[k] for k in _SAMPLING_KEYS if body.get(k) is not None}
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    if max_tokens is not None:
        sampling["max_tokens"] = max_tokens
    stop = body.get("stop")
    if stop is not None:
        sampling["stop"] = [stop] if isinstance(stop, str) else list(stop)
    for key in (
        "tool_choice",
        "parallel_tool_calls",
        "frequency_penalty",
        "presence_penalty",
        "response_format",
        "reasoning_effort",
        "top_k",
    ):
        if body.get(key) is not None:
            sampling[key] = body[key]
    meta = dict(metadata or {})
    if isinstance(body.get("model"), str):
        meta["requested_model"] = body["model"]
    return LLMRequest(
        messages=messages, tools=tools, sampling=SamplingParams(**sampling), metadata=meta
    )


def _finish_reason(response: LLMResponse) -> str:
    return "stop" if response.finish_reason == "error" else response.finish_reason


def _usage(response: LLMResponse) -> dict[str, Any]:
    u = response.usage
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
    }


def _logprobs(response: LLMResponse) -> dict[str, Any] | None:
    """OpenAI's ``logprobs.content``; tokens are named ``token_id:<id>`` as vLLM does when it
    knows ids but no strings (the policy returns ids and logprobs, not token texts)."""
    if response.logprobs is None:
        return None
    ids = response.completion_token_ids or []
    return {
        "content": [
            {
                "token": f"token_id:{ids[i]}" if i < len(ids) else "",
                "logprob": lp,
                "bytes": None,
                "top_logprobs": [],
            }
            for i, lp in enumerate(response.logprobs)
        ],
        "refusal": None,
    }


def _tool_calls(response: LLMResponse) -> list[dict[str, Any]]:
    return [
        {**tc.to_openai(), "id": tc.id or f"call_{secrets.token_hex(8)}"}
        for tc in response.tool_calls
    ]


def llm_response_to_openai(
    response: LLMResponse, model: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ``chat.completion`` object. With ``logprobs`` in the request, per-token logprobs;
    with vLLM's ``return_token_ids``, ``prompt_token_ids`` and the choice's ``token_ids``."""
    body = body or {}
    message: dict[str, Any] = {"role": "assistant", "content": response.content, "refusal": None}
    if response.tool_calls:
        message["tool_calls"] = _tool_calls(response)
    choice: dict[str, Any] = {
        "index": 0,
        "message": message,
        "logprobs": _logprobs(response) if body.get("logprobs") else None,
        "finish_reason": _finish_reason(response),
    }
    out: dict[str, Any] = {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": _usage(response),
    }
    if body.get("return_token_ids"):
        out["prompt_token_ids"] = response.prompt_token_ids
        choice["token_ids"] = response.completion_token_ids
    return out


def openai_stream_chunks(
    response: LLMResponse, model: str, body: dict[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed response, in OpenAI's order: the
    role, the content, one delta per tool call (id, name, then arguments), the finish reason,
    and with ``stream_options.include_usage`` a last chunk with empty choices and the usage."""
    body = body or {}
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    base: dict[str, Any] = {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> dict:
        c = {
            **base,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
            ],
        }
        if include_usage:
            c["usage"] = None
        return c

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    if response.content:
        logprobs = _logprobs(response) if body.get("logprobs") else None
        yield chunk({"content": response.content}, logprobs=logprobs)
    for index, tc in enumerate(_tool_calls(response)):
        fn = tc["function"]
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": tc["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": ""},
                    }
                ]
            }
        )
        if fn["arguments"]:
            yield chunk(
                {"tool_calls": [{"index": index, "function": {"arguments": fn["arguments"]}}]}
            )
    yield chunk({}, finish=_finish_reason(response))
    if include_usage:
        yield {**base, "choices": [], "usage": _usage(response)}
