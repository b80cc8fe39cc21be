"""OpenAI's Responses API, the answer side: the policy's :class:`LLMResponse` as a ``response``
object (its ``output`` items: ``reasoning``, ``message``, ``function_call`` or
``custom_tool_call``) and as the server-sent events of a stream, in OpenAI's order."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

from palaestra.llm.types import LLMResponse
from palaestra.scaffolds.proxy.responses_input import CUSTOM_INPUT, ResponsesCall

_ECHOED = (
    "instructions",
    "max_output_tokens",
    "metadata",
    "parallel_tool_calls",
    "previous_response_id",
    "reasoning",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_p",
    "truncation",
    "user",
)
_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _logprobs(response: LLMResponse, call: ResponsesCall) -> list[dict[str, Any]]:
    """Per-token logprobs when the request includes ``message.output_text.logprobs``; tokens
    are named ``token_id:<id>`` (the policy returns ids, not token strings)."""
    if "message.output_text.logprobs" not in (call.body.get("include") or []):
        return []
    ids = response.completion_token_ids or []
    return [
        {
            "token": f"token_id:{ids[i]}" if i < len(ids) else "",
            "bytes": [],
            "logprob": lp,
            "top_logprobs": [],
        }
        for i, lp in enumerate(response.logprobs or [])
    ]


def _custom_input(arguments: str) -> str:
    """A custom tool's free text from the policy's arguments (the raw string when they are
    not the ``{"input": ...}`` object)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(value, dict) and isinstance(value.get(CUSTOM_INPUT), str):
        return value[CUSTOM_INPUT]
    return arguments


def output_items(response: LLMResponse, call: ResponsesCall) -> list[dict[str, Any]]:
    """The response's ``output``, completed: reasoning, the message, then the tool calls."""
    items: list[dict[str, Any]] = []
    if response.reasoning:
        content = [{"type": "reasoning_text", "text": response.reasoning}]
        items.append({"type": "reasoning", "id": new_id("rs"), "summary": [], "content": content})
    if response.content:
        part = {
            "type": "output_text",
            "text": response.content,
            "annotations": [],
            "logprobs": _logprobs(response, call),
        }
        items.append(
            {
                "type": "message",
                "id": new_id("msg"),
                "role": "assistant",
                "status": "completed",
                "content": [part],
            }
        )
    for tc in response.tool_calls:
        call_id = tc.id or new_id("call")
        item: dict[str, Any] = {"call_id": call_id, "name": tc.name, "status": "completed"}
        if tc.name in call.custom_tools:
            item.update(type="custom_tool_call", id=new_id("ctc"))
            item["input"] = _custom_input(tc.arguments)
        else:
            item.update(type="function_call", id=new_id("fc"), arguments=tc.arguments)
        if tc.name in call.namespaces:
            item["namespace"] = call.namespaces[tc.name]
        items.append(item)
    return items


def _usage(response: LLMResponse) -> dict[str, Any]:
    u = response.usage
    return {
        "input_tokens": u.prompt_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": u.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.total_tokens,
    }


def response_object(
    call: ResponsesCall,
    response_id: str,
    model: str,
    *,
    response: LLMResponse | None = None,
    items: list[dict[str, Any]] | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """The ``response`` object: in progress (no ``response``), completed or incomplete (with
    the policy's ``response`` and its ``items``), or failed (``error``)."""
    body = call.body
    out: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": items or [],
        "usage": None,
        "store": body.get("store") is not False,
        **{k: body.get(k) for k in _ECHOED},
    }
    out["parallel_tool_calls"] = body.get("parallel_tool_calls") is not False
    out["tool_choice"] = body.get("tool_choice") or "auto"
    out["tools"] = body.get("tools") or []
    if error is not None:
        out["status"] = "failed"
        out["error"] = {"code": "server_error", "message": error}
    elif response is not None:
        reason = _INCOMPLETE.get(response.finish_reason)
        out["status"] = "incomplete" if reason else "completed"
        out["incomplete_details"] = {"reason": reason} if reason else None
        out["usage"] = _usage(response)
        if response.prompt_token_ids is not None and body.get("return_token_ids"):
            out["prompt_token_ids"] = response.prompt_token_ids
            out["completion_token_ids"] = response.completion_token_ids
    return out


def responses_stream_events(
    call: ResponsesCall,
    response: LLMResponse,
    items: list[dict[str, Any]],
    response_id: str,
    model: str,
) -> Iterator[dict[str, Any]]:
    """The events of a streamed response (its ``items``: :func:`output_items`), numbered by
    ``sequence_number``: created, in_progress, per output item its added / content / done
    events, then completed (or incomplete, when the policy hit its length limit)."""
    seq = 0

    def event(kind: str, **fields: Any) -> dict[str, Any]:
        nonlocal seq
        seq += 1
        return {"type": f"response.{kind}", "sequence_number": seq - 1, **fields}

    start = response_object(call, response_id, model)
    yield event("created", response=start)
    yield event("in_progress", response=start)
    for index, item in enumerate(items):
        at = {"item_id": item["id"], "output_index": index}
        if item["type"] == "reasoning":
            yield event("output_item.added", output_index=index, item={**item, "content": []})
            text = item["content"][0]["text"]
            part = {"type": "reasoning_text", "text": ""}
            yield event("content_part.added", **at, content_index=0, part=part)
            yield event("reasoning_text.delta", **at, content_index=0, delta=text)
            yield event("reasoning_text.done", **at, content_index=0, text=text)
            yield event("content_part.done", **at, content_index=0, part=item["content"][0])
        elif item["type"] == "message":
            added = {**item, "status": "in_progress", "content": []}
            yield event("output_item.added", output_index=index, item=added)
            full = item["content"][0]
            part = {**full, "text": "", "logprobs": []}
            yield event("content_part.added", **at, content_index=0, part=part)
            text, logprobs = full["text"], full["logprobs"]
            yield event("output_text.delta", **at, content_index=0, delta=text, logprobs=logprobs)
            yield event("output_text.done", **at, content_index=0, text=text, logprobs=logprobs)
            yield event("content_part.done", **at, content_index=0, part=full)
        elif item["type"] == "function_call":
            added = {**item, "status": "in_progress", "arguments": ""}
            yield event("output_item.added", output_index=index, item=added)
            yield event("function_call_arguments.delta", **at, delta=item["arguments"])
            yield event(
                "function_call_arguments.done", **at, name=item["name"], arguments=item["arguments"]
            )
        else:
            added = {**item, "status": "in_progress", "input": ""}
            yield event("output_item.added", output_index=index, item=added)
            yield event("custom_tool_call_input.delta", **at, delta=item["input"])
            yield event("custom_tool_call_input.done", **at, input=item["input"])
        yield event("output_item.done", output_index=index, item=item)
    final = response_object(call, response_id, model, response=response, items=items)
    yield event("completed" if final["status"] == "completed" else "incomplete", response=final)
