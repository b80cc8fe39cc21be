"""Checking a function call's arguments against its tool's schema (OpenAI function calling).

The ``tools`` scaffold and ``ToolEnv`` check every call of the policy with :func:`check_call`:
an unknown tool, arguments that are not a JSON object, missing, extra or mistyped arguments
raise :class:`ToolCallError`, whose message is the guidance the agent reads (what is wrong, and
the tool's schema). The schemas are the scaffolds' own: each property has a ``type`` (``enum``,
and an array's ``items``, ``minItems`` and ``maxItems`` are checked too).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from palaestra.llm.types import ToolCall

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def _fits(value: Any, schema: dict[str, Any]) -> bool:
    """Does ``value`` have the JSON type ``schema`` names (a bool is no number), its ``enum``
    and, for an array, its item count and item type?"""
    expected = schema["type"]
    if not isinstance(value, _JSON_TYPES[expected]) or (
        isinstance(value, bool) and expected != "boolean"
    ):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    if expected != "array":
        return True
    items = schema.get("items")
    return schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)) and (
        items is None or all(_fits(v, items) for v in value)
    )


def _described(schema: dict[str, Any]) -> str:
    """``schema``'s type in words: ``array of 2 integer values``, ``string (one of: a, b)``."""
    if "enum" in schema:
        return f"{schema['type']} (one of: {', '.join(map(str, schema['enum']))})"
    if schema["type"] == "array" and "items" in schema:
        low, high = schema.get("minItems"), schema.get("maxItems")
        count = f"{low} " if low is not None and low == high else ""
        return f"array of {count}{_described(schema['items'])} values"
    return str(schema["type"])


class ToolCallError(ValueError):
    """A tool call the scaffold cannot run; the message is guidance for the agent."""


def check_call(call: ToolCall, specs: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The call's arguments, checked against its tool's schema in ``specs`` (function specs by
    name).

    Raises :class:`ToolCallError` naming the problem and showing the right schema.
    """
    spec = specs.get(call.name)
    if spec is None:
        raise ToolCallError(
            f"Error: there is no tool named {call.name!r}. The tools are: {', '.join(specs)}."
        )
    params = spec["parameters"]
    schema = json.dumps(params)
    try:
        args = call.parsed_arguments()
    except ValueError as e:
        raise ToolCallError(
            f"Error: {e}. Arguments must be a JSON object matching: {schema}"
        ) from None
    problems = []
    missing = [k for k in params.get("required", []) if k not in args]
    if missing:
        problems.append(f"missing argument(s): {', '.join(missing)}")
    extra = [k for k in args if k not in params["properties"]]
    if extra:
        problems.append(f"unknown argument(s): {', '.join(extra)}")
    for key, value in args.items():
        prop = params["properties"].get(key)
        if prop is None:
            continue
        if not _fits(value, prop):
            problems.append(f"argument {key!r} must be {_described(prop)}, got {json.dumps(value)}")
    if problems:
        raise ToolCallError(
            f"Error: malformed call of {call.name!r}: {'; '.join(problems)}. "
            f"Its arguments must match: {schema}"
        )
    return args


__all__ = ["ToolCallError", "check_call"]
