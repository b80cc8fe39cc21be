"""The policy boundary's types, clients and built-in policies."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from palaestra.llm.client import LLMClient, MediatedClient
from palaestra.llm.local_hf import HFLocalPolicy
from palaestra.llm.policies import NopPolicy, OraclePolicy, ScriptedPolicy
from palaestra.llm.pricing import Pricing, cost_usd, lookup_pricing, register_pricing
from palaestra.llm.types import LLMRequest, LLMResponse, Message, SamplingParams, ToolCall, Usage

if TYPE_CHECKING:
    from palaestra.llm.openai_client import LLMAPIError, OpenAIChatPolicy
    from palaestra.tasks import Task

POLICIES = ("oracle", "nop", "openai:<model>", "hf:<model-dir>")


def make_policy(name: str, tasks: Iterable[Task] = ()) -> LLMClient:
    """A policy by name: ``oracle`` (needs ``tasks``), ``nop``, ``openai:<model>`` (an
    OpenAI-compatible endpoint from ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``), or
    ``hf:<model-dir>`` (a local Hugging Face model directory; needs the ``local`` extra)."""
    if name == "oracle":
        return OraclePolicy(tasks)
    if name == "nop":
        return NopPolicy()
    if name.startswith("openai:") and len(name) > len("openai:"):
        from palaestra.llm.openai_client import OpenAIChatPolicy

        return OpenAIChatPolicy(name.removeprefix("openai:"))
    if name.startswith("hf:") and len(name) > len("hf:"):
        return HFLocalPolicy(name.removeprefix("hf:"))
    raise ValueError(f"unknown policy {name!r}; choose one of: {', '.join(POLICIES)}")


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
    "NopPolicy",
    "OpenAIChatPolicy",
    "OraclePolicy",
    "POLICIES",
    "Pricing",
    "SamplingParams",
    "ScriptedPolicy",
    "ToolCall",
    "Usage",
    "cost_usd",
    "lookup_pricing",
    "make_policy",
    "register_pricing",
]
