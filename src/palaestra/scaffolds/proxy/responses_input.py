"""OpenAI's Responses API, the request side: a ``POST /v1/responses`` body (its ``input``
items, ``instructions``, ``tools``, sampling) as one :class:`LLMRequest` in chat format.

Items map to chat messages as the policy would have written and read them:

* ``instructions`` and the ``system``/``developer`` messages that open the input become one
  first ``system`` message (joined by blank lines); later ones stay ``system`` messages in place;
* a ``reasoning`` item, an assistant ``message`` and ``function_call`` / ``custom_tool_call``
  items in a row are one assistant message (``reasoning_content``, ``content``,
  ``tool_calls``): one policy response, as the proxy answered it;
* ``function_call_output`` / ``custom_tool_call_output`` become ``tool`` messages.

Tools: ``function`` tools map to chat function tools; a ``namespace``'s function tools are
listed under their own names (a call of one is answered with its ``namespace``); a ``custom``
(freeform) tool becomes a function with one string parameter, ``input``. Hosted tools
(``web_search``, ``file_search``, ``code_interpreter``, ``mcp``, ...) are not offered to the
policy: nothing here would run them; their types are listed in the request's metadata as
``dropped_tools``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from palaestra.llm.types import LLMRequest, Message, SamplingParams
from palaestra.scaffolds.proxy.episodes import ProxyRequestError

#: A custom tool's single parameter, as the policy sees it.
CUSTOM_INPUT = "input"
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal")
_REFUSED = {
    "background": "background responses are not served: the proxy answers while the call waits",
    "conversation": "conversations are not stored: send the history as 'input' items",
    "prompt": "stored prompt templates are not available: send 'instructions' and 'input'",
}


@dataclass
class ResponsesCall:
    """One Responses call: the policy's request, and what answering it needs (which tool
    names are custom tools or sit in a namespace; the items that make the call's history)."""

    request: LLMRequest
    body: dict[str, Any]
    items: list[dict[str, Any]]
    custom_tools: set[str] = field(default_factory=set)
    namespaces: dict[str, str] = field(default_factory=dict)


def responses_request_to_llm(
    body: Any,
    history: list[dict[str, Any]] | None = None,
    custom_arguments: Mapping[str, str] | None = None,
) -> ResponsesCall:
    """The call a Responses request body makes. ``history``: the items of the response named by
    ``previous_response_id`` (its own history, input and output), which come before ``input``.
    ``custom_arguments``: call id -> the arguments the policy wrote for a custom tool call, so
    that the call's echo comes back to the policy as it wrote it, byte for byte."""
    if not isinstance(body, dict):
        raise ProxyRequestError("the request body must be a JSON object")
    for key, why in _REFUSED.items():
        if body.get(key):
            raise ProxyRequestError(f"'{key}' is not supported by this proxy: {why}")
    raw = body.get("input")
    if isinstance(raw, str):
        new_items: list[Any] = [{"type": "message", "role": "user", "content": raw}]
    elif isinstance(raw, list):
        new_items = raw
    else:
        raise ProxyRequestError("'input' must be a string or a list of input items")
    if any(not isinstance(item, dict) for item in new_items):
        raise ProxyRequestError("every 'input' item must be a JSON object")
    items = [*(history or []), *new_items]
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise ProxyRequestError("'instructions' must be a string")
    tools, custom, namespaces, dropped = _tools(body.get("tools"))
    messages = _messages(items, instructions, custom_arguments or {})
    if not messages:
        raise ProxyRequestError("the request has no input: give 'input' (a string or items)")
    metadata: dict[str, Any] = {"api": "responses"}
    if isinstance(body.get("model"), str):
        metadata["requested_model"] = body["model"]
    if dropped:
        metadata["dropped_tools"] = dropped
    request = LLMRequest(
        messages=messages, tools=tools or None, sampling=_sampling(body), metadata=metadata
    )
    return ResponsesCall(request, body, items, custom, namespaces)


def _sampling(body: dict[str, Any]) -> SamplingParams:
    sampling: dict[str, Any] = {
        k: body[k] for k in ("temperature", "top_p") if body.get(k) is not None
    }
    if body.get("max_output_tokens") is not None:
        sampling["max_tokens"] = body["max_output_tokens"]
    if body.get("parallel_tool_calls") is not None:
        sampling["parallel_tool_calls"] = body["parallel_tool_calls"]
    choice = body.get("tool_choice")
    if isinstance(choice, str):
        sampling["tool_choice"] = choice
    elif isinstance(choice, dict) and choice.get("type") in ("function", "custom"):
        sampling["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    effort = (body.get("reasoning") or {}).get("effort")
    if effort is not None:
        sampling["reasoning_effort"] = effort
    fmt = (body.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        sampling["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif fmt.get("type") == "json_object":
        sampling["response_format"] = {"type": "json_object"}
    return SamplingParams(**sampling)


def _function(spec: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(spec.get("name"), str):
        raise ProxyRequestError("every function tool needs a string 'name'")
    fn = {k: spec[k] for k in ("name", "description", "parameters", "strict") if k in spec}
    return {"type": "function", "function": fn}


def _tools(
    raw: Any,
) -> tuple[list[dict[str, Any]], set[str], dict[str, str], list[str]]:
    """Chat function tools; the custom tools' names; tool name -> namespace; dropped types."""
    if raw is None:
        return [], set(), {}, []
    if not isinstance(raw, list) or any(not isinstance(t, dict) for t in raw):
        raise ProxyRequestError("'tools' must be a list of tool objects")
    tools: list[dict[str, Any]] = []
    custom: set[str] = set()
    namespaces: dict[str, str] = {}
    dropped: list[str] = []
    for spec in raw:
        kind = spec.get("type")
        if kind == "function":
            tools.append(_function(spec))
        elif kind == "namespace":
            for inner in spec.get("tools") or []:
                if isinstance(inner, dict) and inner.get("type") == "function":
                    tools.append(_function(inner))
                    namespaces[inner["name"]] = str(spec.get("name"))
        elif kind == "custom":
            name = spec.get("name")
            if not isinstance(name, str):
                raise ProxyRequestError("every custom tool needs a string 'name'")
            custom.add(name)
            text = f"The tool's {CUSTOM_INPUT}, free text"
            fmt = spec.get("format") or {}
            if fmt.get("type") == "grammar":
                text += f" in this {fmt.get('syntax')} grammar:\n{fmt.get('definition')}"
            parameters = {
                "type": "object",
                "properties": {CUSTOM_INPUT: {"type": "string", "description": text}},
                "required": [CUSTOM_INPUT],
            }
            tools.append(_function({**spec, "parameters": parameters}))
        else:
            dropped.append(str(kind))
    return tools, custom, namespaces, dropped


def _text(content: Any, where: str) -> str | list[dict[str, Any]]:
    """A message's content: a string, or chat content parts when there are images."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise ProxyRequestError(f"{where}: 'content' must be a string or a list of parts")
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _TEXT_PARTS:
            parts.append({"type": "text", "text": str(part.get("text") or part.get("refusal"))})
        elif kind == "input_image" and part.get("image_url"):
            url = {"url": part["image_url"], "detail": part.get("detail") or "auto"}
            parts.append({"type": "image_url", "image_url": url})
        else:
            raise ProxyRequestError(
                f"{where}: content part type {kind!r} is not supported (use input_text parts, "
                "or input_image with an image_url)"
            )
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _reasoning_text(item: dict[str, Any]) -> str:
    parts = item.get("content") or item.get("summary") or []
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


def _custom_arguments(item: dict[str, Any], written: Mapping[str, str]) -> str:
    """A custom tool call's arguments: as the policy wrote them when the echo is unchanged."""
    original = written.get(item["call_id"])
    if original is not None:
        try:
            if json.loads(original).get(CUSTOM_INPUT) == item.get("input"):
                return original
        except (ValueError, AttributeError):
            pass
    return json.dumps({CUSTOM_INPUT: item.get("input", "")})


def _messages(
    items: list[dict[str, Any]], instructions: str | None, written: Mapping[str, str]
) -> list[Message]:
    system: list[str] = [instructions] if instructions else []
    messages: list[Message] = []
    turn: Message | None = None  # the assistant message being assembled

    def assistant(starts: bool) -> Message:
        nonlocal turn
        if turn is None or starts:
            turn = {"role": "assistant", "content": None}
            messages.append(turn)
        return turn

    for i, item in enumerate(items):
        kind = item.get("type") or ("message" if "role" in item else None)
        where = f"input item {i} ({kind})"
        role = item.get("role")
        if kind == "message" and role == "assistant":
            msg = assistant(starts=turn is not None and "tool_calls" in turn)
            text = _text(item.get("content"), where)
            if not isinstance(text, str):
                raise ProxyRequestError(f"{where}: an assistant message holds text parts only")
            msg["content"] = text if msg["content"] is None else f"{msg['content']}\n{text}"
            continue
        if kind == "reasoning":
            started = turn is not None and (turn["content"] is not None or "tool_calls" in turn)
            msg = assistant(starts=started)
            msg["reasoning_content"] = msg.get("reasoning_content", "") + _reasoning_text(item)
            continue
        if kind in ("function_call", "custom_tool_call"):
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not isinstance(item.get("name"), str):
                raise ProxyRequestError(f"{where}: needs a string 'call_id' and 'name'")
            if kind == "function_call":
                arguments = item.get("arguments")
                arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
            else:
                arguments = _custom_arguments(item, written)
            fn = {"name": item["name"], "arguments": arguments}
            call = {"id": call_id, "type": "function", "function": fn}
            assistant(starts=False).setdefault("tool_calls", []).append(call)
            continue
        turn = None
        if kind in ("function_call_output", "custom_tool_call_output"):
            if not isinstance(item.get("call_id"), str):
                raise ProxyRequestError(f"{where}: needs a string 'call_id'")
            content = _text(item.get("output"), where)
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": content})
        elif kind == "message" and role in ("system", "developer", "user"):
            content = _text(item.get("content"), where)
            if role == "user":
                messages.append({"role": "user", "content": content})
            elif not messages and isinstance(content, str):
                system.append(content)
            else:
                messages.append({"role": "system", "content": content})
        elif kind == "message":
            raise ProxyRequestError(f"{where}: unknown role {role!r}")
        else:
            raise ProxyRequestError(
                f"{where}: item type {kind!r} is not supported (the proxy serves messages, "
                "function_call, function_call_output, custom_tool_call(_output) and reasoning)"
            )
    if system:
        messages.insert(0, {"role": "system", "content": "\n\n".join(system)})
    return messages
