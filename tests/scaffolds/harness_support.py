"""What the harness tests share: the installed CLIs, a policy that speaks a harness's tool
protocol turn by turn, and a policy that returns token ids (a byte-level stand-in for a
vLLM server: it renders the whole conversation on every request and "tokenises" it, so a
harness that re-renders earlier turns shows up as a break, as with a real server)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from palaestra import CodeEnv
from palaestra.env.registry import load_tasks
from palaestra.llm.types import LLMRequest, LLMResponse, ToolCall
from palaestra.run import Episode, rollout
from palaestra.scaffolds import NopPolicy, OraclePolicy, Scaffold
from palaestra.scaffolds.harness import HARNESSES, HarnessNotReady, install

CI = os.environ.get("CI", "").lower() == "true"


def installed(name: str) -> None:
    """Install harness ``name`` (kept once made). Without npm the test skips, except in CI
    (CI=true), where it fails: CI's set-up installs npm and the harnesses."""
    if shutil.which("npm") is None:
        reason = f"npm is not installed, so {name} cannot be installed"
        if CI:
            pytest.fail(f"{reason} (CI must run scripts/install-system-deps.sh)")
        pytest.skip(reason)
    try:
        install(HARNESSES[name])
    except HarnessNotReady as e:
        pytest.fail(str(e))


async def oracle_and_nop(scaffold: Scaffold, sandbox: str = "local") -> tuple[Episode, Episode]:
    """The first starter task through ``scaffold``, once with the oracle and once with nop,
    at the same time (one scaffold, so one shared proxy)."""
    tasks = load_tasks("starter:0:1")

    async def episode(policy: Callable[[Any], Any]) -> Episode:
        async with CodeEnv(tasks, sandbox=sandbox, scaffold=scaffold) as env:
            return await rollout(env, policy(env.tasks))

    oracle, nop = await asyncio.gather(
        episode(OraclePolicy.from_tasks), episode(lambda _: NopPolicy())
    )
    return oracle, nop


def call(name: str, turn: int, **arguments: Any) -> LLMResponse:
    """One tool call of the harness's own tools."""
    tc = ToolCall(id=f"call_{turn}", name=name, arguments=json.dumps(arguments))
    return LLMResponse(tool_calls=[tc], finish_reason="tool_calls")


class ProtocolScript:
    """Answers turn ``t`` with ``steps[t](request)`` and records each request."""

    def __init__(self, steps: Sequence[Callable[[LLMRequest], LLMResponse]]) -> None:
        self.steps = list(steps)
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        turn = len(self.requests) - 1
        if turn >= len(self.steps):
            raise RuntimeError(f"the script has no step {turn}")
        return self.steps[turn](request)


def _render(message: dict[str, Any]) -> str:
    calls = [
        {
            "id": c.get("id"),
            "name": c["function"]["name"],
            "arguments": json.loads(c["function"]["arguments"] or "{}"),
        }
        for c in message.get("tool_calls") or ()
    ]
    content = message.get("content") or ""
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    body = {"role": message["role"], "content": content, "tool_calls": calls}
    if message.get("tool_call_id"):
        body["tool_call_id"] = message["tool_call_id"]
    return json.dumps(body, sort_keys=True) + "\n"


def _ids(text: str) -> list[int]:
    return list(text.encode())


class TokenPolicy:
    """Wraps a policy: every response gets ``prompt_token_ids`` (the request's messages,
    rendered and encoded), ``completion_token_ids`` (the response as an assistant message)
    and one logprob per completion token."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def complete(self, request: LLMRequest) -> LLMResponse:
        response = await self.inner.complete(request)
        prompt = _ids("".join(_render(m) for m in request.messages))
        message: dict[str, Any] = {"role": "assistant", "content": response.content}
        if response.tool_calls:
            message["tool_calls"] = [tc.to_openai() for tc in response.tool_calls]
        completion = _ids(_render(message))
        return response.model_copy(
            update={
                "prompt_token_ids": prompt,
                "completion_token_ids": completion,
                "logprobs": [-0.5] * len(completion),
            }
        )
