"""The policy boundary's data: an observation is an :class:`LLMRequest`, an action an
:class:`LLMResponse`.

Both follow the OpenAI chat-completions format so they pass to and from any
OpenAI-compatible server unchanged: ``messages`` is the list of chat messages with the system
prompt as the first message (never a side field), ``tools`` the function specs.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Message = dict[str, Any]
"""One chat message in OpenAI format: ``{"role": ..., "content": ..., ...}``."""


def message_text(message: Message) -> str:
    """A message's content as text (the text parts of a multi-part content; '' for none)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class SamplingParams(BaseModel):
    """Sampling parameters. On a request, what the scaffold asks for (a policy may honour or
    override them); on a response (``LLMResponse.sampling``), what the policy drew it with."""

    model_config = ConfigDict(extra="allow")

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    """Keep only the ``top_k`` likeliest tokens; None or 0: no limit."""
    max_tokens: int | None = None
    stop: list[str] | None = None
    seed: int | None = None


class ToolCall(BaseModel):
    """A function call in OpenAI format; ``arguments`` is the raw JSON string the model wrote."""

    id: str
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ``ValueError`` naming the problem when malformed."""
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError as e:
            raise ValueError(f"arguments of tool call {self.name!r} are not valid JSON: {e}") from e
        except RecursionError:  # hostile nesting, "[[[[..."
            raise ValueError(
                f"arguments of tool call {self.name!r} are nested too deeply"
            ) from None
        if not isinstance(value, dict):
            raise ValueError(f"arguments of tool call {self.name!r} must be a JSON object")
        return value

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


class Usage(BaseModel):
    """Token counts. ``cached_tokens`` is the part of ``prompt_tokens`` served from a prompt
    cache; ``reasoning_tokens`` the part of ``completion_tokens`` spent on hidden reasoning."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class LLMRequest(BaseModel):
    """An observation: what the scaffold asks the policy.

    ``metadata`` carries the task id and turn index (and the episode id, which ``rollout`` adds
    to what the policy gets) so a policy serving many episodes can tell them apart. It is never
    sent to a model.
    """

    messages: list[Message]
    tools: list[dict[str, Any]] | None = None
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def system_prompt(self) -> str | None:
        if self.messages and self.messages[0].get("role") == "system":
            content = self.messages[0].get("content")
            return content if isinstance(content, str) else None
        return None

    @property
    def last_user_text(self) -> str:
        """The text of the latest user or tool message ('' when there is none)."""
        for m in reversed(self.messages):
            if m.get("role") in ("user", "tool"):
                return message_text(m)
        return ""


FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "error"]


class LLMResponse(BaseModel):
    """An action: what the policy answered.

    The token-level fields are optional and filled by policies that know them (a local model,
    a vLLM server returning logprobs); an RL trainer reads them from the trajectory.
    """

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    reasoning: str | None = None
    """The reasoning the policy wrote before its answer, apart from ``content`` (a vLLM
    server's ``reasoning_content``); the proxy's Responses route hands it to the harness as a
    ``reasoning`` item and the harness's echo of that item comes back as the assistant
    message's ``reasoning_content``."""
    finish_reason: FinishReason = "stop"
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    model: str | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    policy_version: int | None = None
    sampling: SamplingParams | None = None
    """The sampling parameters this response was drawn with: the values the policy used (its
    defaults filled in) when it knows them, else what it sent; None when it does not say. A
    trainer compares them with its own (:mod:`palaestra.rl.behaviour`)."""
    activations: dict[str, list[list[float]]] | None = None
    """Recorded activations, module name -> positions x hidden values (a local policy with
    ``record_activations``; :mod:`palaestra.llm.local_hf.activations`)."""

    @classmethod
    def text(cls, content: str, **kw: Any) -> LLMResponse:
        return cls(content=content, **kw)

    def to_message(self) -> Message:
        """The assistant message a scaffold appends to its history."""
        msg: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [tc.to_openai() for tc in self.tool_calls]
        return msg
