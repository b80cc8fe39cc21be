"""The chat side of the local policy: prompts from the chat template without retokenisation
drift (the memory of the conversations answered), and Hermes-style tool calls out of a
completion."""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from palaestra.llm.types import LLMRequest, ToolCall


@dataclass
class Turn:
    """What the policy remembers of a conversation it answered, to extend it exactly."""

    rendered: str  # the template's text for the prompt
    prompt_ids: list[int]
    completion_ids: list[int]
    generated: str  # the completion's text, special tokens kept, the final eos left out
    content: str
    tool_calls: list[dict[str, Any]]  # as the scaffold's assistant message carries them
    eos_text: str  # the text of the end-of-sequence token the completion ended on, or ""


def prefix_keys(request: LLMRequest) -> list[str]:
    """keys[k] identifies the episode, the tools and ``messages[:k]``."""
    h = hashlib.sha256(
        json.dumps([request.metadata.get("episode_id"), request.tools], default=str).encode()
    )
    keys = [h.hexdigest()]
    for message in request.messages:
        h.update(json.dumps(message, sort_keys=True, default=str).encode())
        keys.append(h.hexdigest())
    return keys


class Conversations:
    """The last ``max_conversations`` conversations answered, each under the key of its
    messages (:func:`prefix_keys`), to build the next prompt of each from its token ids."""

    def __init__(self, max_conversations: int) -> None:
        self.max_conversations = max_conversations
        self._memory: OrderedDict[str, Turn] = OrderedDict()

    def prompt(
        self, tokenizer: Any, request: LLMRequest, keys: list[str]
    ) -> tuple[list[int], str, str | None]:
        """The prompt ids, the template's text, and the memory entry extended (if any)."""
        messages, tools = request.messages, request.tools
        full = _render(tokenizer, messages, tools, True)
        for j in range(len(messages) - 1, 0, -1):
            message = messages[j]
            if message.get("role") != "assistant":
                continue
            turn = self._memory.get(keys[j])
            if (
                turn is None
                or (message.get("content") or "") != (turn.content or "")
                or (message.get("tool_calls") or []) != turn.tool_calls
            ):
                continue
            # The text the template adds after the earlier prompt: the assistant turn (what
            # the model wrote, then a closing marker) and then the new messages.
            through = _render(tokenizer, messages[: j + 1], tools, False)
            if not (full.startswith(through) and through.startswith(turn.rendered)):
                break
            assistant = through[len(turn.rendered) :]
            if assistant.startswith(turn.generated):
                closing = assistant[len(turn.generated) :]
            elif not turn.tool_calls and assistant.startswith(turn.content):
                # Generation ended on a stop string, cut from the content: keep what the model
                # wrote and close its turn after it.
                closing = assistant[len(turn.content) :]
            else:
                break
            if turn.eos_text and closing.startswith(turn.eos_text):
                closing = closing[len(turn.eos_text) :]  # the model already generated it
            delta = _encode(tokenizer, closing + full[len(through) :])
            return turn.prompt_ids + turn.completion_ids + delta, full, keys[j]
        return _encode(tokenizer, full), full, None

    def remember(self, key: str, turn: Turn, *, extended: str | None) -> None:
        """Keep ``turn`` under ``key``; the entry it ``extended`` is superseded."""
        if extended is not None:
            self._memory.pop(extended, None)
        self._memory[key] = turn
        self._memory.move_to_end(key)
        while len(self._memory) > self.max_conversations:
            self._memory.popitem(last=False)


def _render(tokenizer: Any, messages: list[dict[str, Any]], tools: Any, generation: bool) -> str:
    return tokenizer.apply_chat_template(
        messages, tools=tools or None, tokenize=False, add_generation_prompt=generation
    )


def _encode(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def parse_tool_calls(text: str) -> tuple[str | None, list[ToolCall]]:
    """Split Hermes-style calls (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
    the format of Qwen2.5/3, Hermes and many open models) out of a completion.

    Returns the remaining text (None when nothing but calls) and the calls, ids ``call_<i>``.
    A block that is not such a JSON object stays in the text, for the scaffold to answer.
    """
    calls: list[ToolCall] = []
    kept: list[str] = []
    last = 0
    for match in _TOOL_CALL.finditer(text):
        try:
            spec = json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            continue
        arguments = spec.get("arguments", {})
        calls.append(
            ToolCall(
                id=f"call_{len(calls)}",
                name=spec["name"],
                arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
            )
        )
        kept.append(text[last : match.start()])
        last = match.end()
    if not calls:
        return text, []
    rest = "".join([*kept, text[last:]]).strip()
    return rest or None, calls
