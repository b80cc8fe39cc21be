"""Anthropic Messages format: conversions to and from our OpenAI-format types (the wire
format only; the client that sends it is :mod:`palaestra.llm.anthropic_policy`).

* ``anthropic_request_to_llm`` / ``llm_response_to_anthropic`` / ``anthropic_stream_events``
  serve the proxy's ``/v1/messages`` route: harnesses that speak Anthropic's API become
  environments too.
* ``llm_request_to_anthropic`` / ``anthropic_response_to_llm`` are what
  :class:`~palaestra.llm.anthropic_policy.AnthropicPolicy` sends and reads: a policy behind any
  Anthropic-compatible ``/v1/messages`` endpoint answers observations.

The mapping: the top-level ``system`` is our first (system) message, a ``system`` turn among
the messages a system message in its place; ``tool_use`` blocks are
``tool_calls`` (``input`` object <-> ``arguments`` JSON string); ``tool_result`` blocks in a
user turn are ``tool`` messages; ``stop_reason`` <-> ``finish_reason``
(``end_turn``/``stop_sequence`` -> ``stop``, ``max_tokens`` -> ``length``, ``tool_use`` ->
``tool_calls``, ``refusal`` -> ``content_filter``). Usage: Anthropic's ``input_tokens`` exclude
cache reads and writes, OpenAI's ``prompt_tokens`` include them, so ``prompt_tokens =
input_tokens + cache_read_input_tokens + cache_creation_input_tokens`` and ``cached_tokens =
cache_read_input_tokens``. Thinking blocks are dropped (not mapped to
``LLMResponse.reasoning`` yet).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

from palaestra.llm.types import LLMRequest, LLMResponse, Message, SamplingParams, ToolCall, Usage

ANTHROPIC_VERSION = "2023-06-01"
#: Anthropic requires ``max_tokens``; used when the request does not set one.
DEFAULT_MAX_TOKENS = 4096

_STOP_TO_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_FINISH_TO_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
    "error": "end_turn",
}


class AnthropicFormatError(ValueError):
    """A body that is not valid Anthropic Messages format; the message names the field."""


# -- Anthropic -> ours -------------------------------------------------------------------------


def _text_of(content: Any, where: str) -> str:
    """The text of a string or a list of text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if not isinstance(block, dict) or "type" not in block:
                raise AnthropicFormatError(f"{where}: every content block needs a 'type'")
            if block["type"] == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    if content is None:
        return ""
    raise AnthropicFormatError(f"{where}: content must be a string or a list of blocks")


def _image_to_openai(block: dict[str, Any]) -> dict[str, Any]:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    else:
        url = source.get("url", "")
    return {"type": "image_url", "image_url": {"url": url}}


def _user_blocks_to_messages(content: list[Any], where: str) -> list[Message]:
    """A user turn: tool results become ``tool`` messages (first, answering the preceding
    assistant turn), the rest one user message."""
    tool_msgs: list[Message] = []
    parts: list[dict[str, Any]] = []
    for i, block in enumerate(content):
        if not isinstance(block, dict) or "type" not in block:
            raise AnthropicFormatError(f"{where}.content[{i}]: a content block needs a 'type'")
        kind = block["type"]
        if kind == "tool_result":
            if "tool_use_id" not in block:
                raise AnthropicFormatError(f"{where}.content[{i}]: tool_result needs tool_use_id")
            text = _text_of(block.get("content"), f"{where}.content[{i}]")
            if block.get("is_error"):
                text = f"Error: {text}" if text else "Error"
            tool_msgs.append(
                {"role": "tool", "tool_call_id": block["tool_use_id"], "content": text}
            )
        elif kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            parts.append(_image_to_openai(block))
    messages = list(tool_msgs)
    if parts:
        if all(p["type"] == "text" for p in parts):
            messages.append({"role": "user", "content": "".join(p["text"] for p in parts)})
        else:
            messages.append({"role": "user", "content": parts})
    return messages


def _assistant_blocks_to_message(content: list[Any], where: str) -> Message:
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    for i, block in enumerate(content):
        if not isinstance(block, dict) or "type" not in block:
            raise AnthropicFormatError(f"{where}.content[{i}]: a content block needs a 'type'")
        if block["type"] == "text":
            text.append(str(block.get("text", "")))
        elif block["type"] == "tool_use":
            if "id" not in block or "name" not in block:
                raise AnthropicFormatError(f"{where}.content[{i}]: tool_use needs id and name")
            calls.append(
                ToolCall(
                    id=block["id"], name=block["name"], arguments=json.dumps(block.get("input", {}))
                ).to_openai()
            )
    msg: Message = {"role": "assistant", "content": "".join(text) if text else None}
    if calls:
        msg["tool_calls"] = calls
    return msg


def _tool_choice_to_openai(choice: Any) -> Any:
    if not isinstance(choice, dict):
        return None
    kind = choice.get("type")
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return {"auto": "auto", "any": "required", "none": "none"}.get(kind)


def anthropic_request_to_llm(body: Any) -> LLMRequest:
    """An Anthropic ``/v1/messages`` request body as an :class:`LLMRequest`."""
    if not isinstance(body, dict):
        raise AnthropicFormatError("the request body must be a JSON object")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise AnthropicFormatError("'messages' must be a non-empty list")
    messages: list[Message] = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": _text_of(system, "system")})
    for i, m in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant", "system"):
            raise AnthropicFormatError(f"{where}: role must be 'user', 'assistant' or 'system'")
        content = m.get("content")
        if m["role"] == "system":  # a mid-conversation system turn (Claude Code sends them)
            messages.append({"role": "system", "content": _text_of(content, where)})
        elif isinstance(content, str):
            messages.append({"role": m["role"], "content": content})
        elif not isinstance(content, list):
            raise AnthropicFormatError(f"{where}: content must be a string or a list of blocks")
        elif m["role"] == "user":
            messages += _user_blocks_to_messages(content, where)
        else:
            messages.append(_assistant_blocks_to_message(content, where))
    tools = None
    if body.get("tools"):
        tools = []
        for i, t in enumerate(body["tools"]):
            if not isinstance(t, dict) or "name" not in t:
                raise AnthropicFormatError(f"tools[{i}]: a tool needs a 'name'")
            fn: dict[str, Any] = {
                "name": t["name"],
                "parameters": t.get("input_schema", {"type": "object"}),
            }
            if t.get("description"):
                fn["description"] = t["description"]
            tools.append({"type": "function", "function": fn})
    sampling: dict[str, Any] = {
        k: body[k] for k in ("temperature", "top_p", "top_k", "max_tokens") if k in body
    }
    if body.get("stop_sequences"):
        sampling["stop"] = list(body["stop_sequences"])
    if (choice := _tool_choice_to_openai(body.get("tool_choice"))) is not None:
        sampling["tool_choice"] = choice
    metadata: dict[str, Any] = {}
    if isinstance(body.get("model"), str):
        metadata["requested_model"] = body["model"]
    return LLMRequest(
        messages=messages, tools=tools, sampling=SamplingParams(**sampling), metadata=metadata
    )


def anthropic_usage_to_llm(usage: dict[str, Any] | None) -> Usage:
    usage = usage or {}
    cache_read = int(usage.get("cache_read_input_tokens") or 0)
    cache_write = int(usage.get("cache_creation_input_tokens") or 0)
    return Usage(
        prompt_tokens=int(usage.get("input_tokens") or 0) + cache_read + cache_write,
        completion_tokens=int(usage.get("output_tokens") or 0),
        cached_tokens=cache_read,
    )


def anthropic_response_to_llm(body: dict[str, Any]) -> LLMResponse:
    """An Anthropic ``message`` object as an :class:`LLMResponse`."""
    if not isinstance(body, dict) or not isinstance(body.get("content"), list):
        raise AnthropicFormatError("an Anthropic message needs a 'content' list")
    msg = _assistant_blocks_to_message(body["content"], "content")
    return LLMResponse(
        content=msg["content"],
        tool_calls=[
            ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
            for c in msg.get("tool_calls", [])
        ],
        finish_reason=_STOP_TO_FINISH.get(body.get("stop_reason") or "end_turn", "stop"),  # type: ignore[arg-type]
        usage=anthropic_usage_to_llm(body.get("usage")),
        model=body.get("model"),
    )


# -- ours -> Anthropic -------------------------------------------------------------------------


def _arguments(tc: dict[str, Any]) -> dict[str, Any]:
    raw = tc.get("function", {}).get("arguments") or "{}"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"_raw_arguments": raw}
    return value if isinstance(value, dict) else {"_value": value}


def _openai_content_to_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = []
    for part in content:
        if part.get("type") == "text":
            blocks.append({"type": "text", "text": part.get("text", "")})
        elif part.get("type") == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            if url.startswith("data:") and ";base64," in url:
                media, data = url[5:].split(";base64,", 1)
                source = {"type": "base64", "media_type": media, "data": data}
            else:
                source = {"type": "url", "url": url}
            blocks.append({"type": "image", "source": source})
    return blocks


def llm_request_to_anthropic(
    request: LLMRequest, model: str | None = None, *, default_max_tokens: int = DEFAULT_MAX_TOKENS
) -> dict[str, Any]:
    """An :class:`LLMRequest` as an Anthropic ``/v1/messages`` body. System messages become
    the top-level ``system``; consecutive tool (and user) messages merge into one user turn of
    ``tool_result`` (and text) blocks, as Anthropic requires alternating turns."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})

    for m in request.messages:
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(m["content"] if isinstance(m.get("content"), str) else "")
        elif role == "user":
            add("user", _openai_content_to_blocks(m.get("content")))
        elif role == "tool":
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": m.get("tool_call_id", ""),
                        "content": m.get("content") or "",
                    }
                ],
            )
        elif role == "assistant":
            blocks = _openai_content_to_blocks(m.get("content"))
            for tc in m.get("tool_calls") or []:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": tc.get("id", ""),
                        "name": tc.get("function", {}).get("name", ""),
                        "input": _arguments(tc),
                    }
                )
            add("assistant", blocks)
    s = request.sampling
    body: dict[str, Any] = {
        "model": model or request.metadata.get("requested_model") or "",
        "max_tokens": s.max_tokens or default_max_tokens,
        "messages": turns,
    }
    if system:
        body["system"] = "\n\n".join(system)
    for key in ("temperature", "top_p", "top_k"):
        if getattr(s, key) is not None:
            body[key] = getattr(s, key)
    extra = s.model_extra or {}
    if s.stop:
        body["stop_sequences"] = list(s.stop)
    if request.tools:
        body["tools"] = [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description", ""),
                "input_schema": t["function"].get("parameters", {"type": "object"}),
            }
            for t in request.tools
            if t.get("type", "function") == "function" and "function" in t
        ]
    choice = extra.get("tool_choice")
    if choice == "auto":
        body["tool_choice"] = {"type": "auto"}
    elif choice == "required":
        body["tool_choice"] = {"type": "any"}
    elif choice == "none":
        body["tool_choice"] = {"type": "none"}
    elif isinstance(choice, dict) and choice.get("function"):
        body["tool_choice"] = {"type": "tool", "name": choice["function"].get("name")}
    return body


def _anthropic_usage(response: LLMResponse) -> dict[str, int]:
    u = response.usage
    return {
        "input_tokens": max(u.prompt_tokens - u.cached_tokens, 0),
        "output_tokens": u.completion_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": u.cached_tokens,
    }


def _content_blocks(response: LLMResponse) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if response.content:
        blocks.append({"type": "text", "text": response.content})
    for tc in response.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": tc.id or f"toolu_{secrets.token_hex(12)}",
                "name": tc.name,
                "input": _arguments({"function": {"arguments": tc.arguments}}),
            }
        )
    return blocks


def llm_response_to_anthropic(response: LLMResponse, model: str) -> dict[str, Any]:
    """An :class:`LLMResponse` as an Anthropic ``message`` object."""
    return {
        "id": f"msg_{secrets.token_hex(12)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _content_blocks(response),
        "stop_reason": _FINISH_TO_STOP[response.finish_reason],
        "stop_sequence": None,
        "usage": _anthropic_usage(response),
    }


def anthropic_stream_events(response: LLMResponse, model: str) -> Iterator[dict[str, Any]]:
    """The stream events of a response, in Anthropic's order: ``message_start``, per block
    ``content_block_start`` / ``content_block_delta`` (``text_delta`` or ``input_json_delta``)
    / ``content_block_stop``, then ``message_delta`` (stop reason, output tokens) and
    ``message_stop``."""
    message = llm_response_to_anthropic(response, model)
    usage = message["usage"]
    yield {
        "type": "message_start",
        "message": {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {**usage, "output_tokens": 0},
        },
    }
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            yield {
                "type": "content_block_start",
                "index": index,
                "content_block": {**block, "input": {}},
            }
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": usage["output_tokens"]},
    }
    yield {"type": "message_stop"}
