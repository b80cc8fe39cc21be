"""The policy boundary's types, clients and built-in policies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from palaestra.llm.client import LLMClient, MediatedClient
from palaestra.llm.local_hf import HFLocalPolicy
from palaestra.llm.policies import ScriptedPolicy
from palaestra.llm.pricing import Pricing, cost_usd, lookup_pricing, register_pricing
from palaestra.llm.types import LLMRequest, LLMResponse, Message, SamplingParams, ToolCall, Usage

if TYPE_CHECKING:
    from palaestra.llm.openai_client import LLMAPIError, OpenAIChatPolicy


def __getattr__(name: str) -> object:
    # The openai SDK is imported only when its client is used.
    if name in ("OpenAIChatPolicy", "LLMAPIError"):
        from palaestra.llm import openai_client

        return getattr(openai_client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "HFLocalPolicy",
    "LLMAPIError",
    "LLMClient",
    "LLMRequest",
    "LLMResponse",
    "MediatedClient",
    "Message",
    "OpenAIChatPolicy",
    "Pricing",
    "SamplingParams",
    "ScriptedPolicy",
    "ToolCall",
    "Usage",
    "cost_usd",
    "lookup_pricing",
    "register_pricing",
]
