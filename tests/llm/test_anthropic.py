"""Anthropic Messages format: conversions, the proxy's /v1/messages route driven by the real
anthropic SDK, and AnthropicPolicy against that route (a real server)."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest

from palaestra.llm import LLMRequest, LLMResponse, SamplingParams, ScriptedPolicy, ToolCall, Usage
from palaestra.llm.anthropic import (
    AnthropicFormatError,
    anthropic_request_to_llm,
    anthropic_response_to_llm,
    anthropic_stream_events,
    llm_request_to_anthropic,
    llm_response_to_anthropic,
)
from palaestra.llm.anthropic_policy import AnthropicAPIError, AnthropicPolicy
from palaestra.scaffolds.proxy import ProxyServer

TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]

CONVERSATION = LLMRequest(
    messages=[
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "List files."},
        {
            "role": "assistant",
            "content": "Listing.",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                },
                {
                    "id": "t2",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "pwd"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "a.py"},
        {"role": "tool", "tool_call_id": "t2", "content": "/app"},
        {"role": "user", "content": "Now read a.py."},
    ],
    tools=TOOLS_OPENAI,
    sampling={"temperature": 0.2, "max_tokens": 100, "stop": ["###"], "tool_choice": "required"},
)


def test_request_to_anthropic_and_back():
    body = llm_request_to_anthropic(CONVERSATION, "claude-x")
    assert body["system"] == "You are terse." and body["model"] == "claude-x"
    assert body["max_tokens"] == 100 and body["stop_sequences"] == ["###"]
    assert body["tool_choice"] == {"type": "any"}
    assert body["tools"] == [
        {
            "name": "bash",
            "description": "Run a command",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
        }
    ]
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user"]  # tool results + next user turn merged
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "text", "text": "Listing."}
    assert assistant[1] == {
        "type": "tool_use",
        "id": "t1",
        "name": "bash",
        "input": {"command": "ls"},
    }
    results = body["messages"][2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]
    assert results[0] == {"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}

    back = anthropic_request_to_llm(body)
    assert back.messages == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "List files."},
        {
            "role": "assistant",
            "content": "Listing.",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                },
                {
                    "id": "t2",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "pwd"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "a.py"},
        {"role": "tool", "tool_call_id": "t2", "content": "/app"},
        {"role": "user", "content": "Now read a.py."},
    ]
    assert back.tools == CONVERSATION.tools
    assert back.sampling.temperature == 0.2 and back.sampling.max_tokens == 100
    assert back.sampling.stop == ["###"] and back.sampling.model_extra["tool_choice"] == "required"


def test_anthropic_request_details():
    req = anthropic_request_to_llm(
        {
            "model": "m",
            "max_tokens": 10,
            "system": [{"type": "text", "text": "part one "}, {"type": "text", "text": "two"}],
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "see"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"},
                        },
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hm", "signature": "s"},
                        {"type": "tool_use", "id": "u1", "name": "f", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "u1",
                            "content": [{"type": "text", "text": "boom"}],
                            "is_error": True,
                        }
                    ],
                },
            ],
            "tool_choice": {"type": "tool", "name": "f"},
        }
    )
    assert req.messages[0] == {"role": "system", "content": "part one two"}
    assert req.messages[1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,QUJD"},
    }
    assert req.messages[2]["content"] is None and req.messages[2]["tool_calls"][0]["id"] == "u1"
    assert req.messages[3] == {"role": "tool", "tool_call_id": "u1", "content": "Error: boom"}
    assert req.sampling.model_extra["tool_choice"] == {
        "type": "function",
        "function": {"name": "f"},
    }
    assert req.metadata["requested_model"] == "m"
    with pytest.raises(AnthropicFormatError, match=r"messages\[0\]: role"):
        anthropic_request_to_llm({"messages": [{"role": "tool", "content": "x"}]})
    with pytest.raises(AnthropicFormatError, match="tool_use_id"):
        anthropic_request_to_llm(
            {"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}
        )


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_use"),
        ("content_filter", "refusal"),
    ],
)
def test_response_round_trip(finish, stop):
    resp = LLMResponse(
        content="hi",
        tool_calls=[ToolCall(id="toolu_1", name="bash", arguments='{"command": "ls"}')],
        finish_reason=finish,
        usage=Usage(prompt_tokens=100, completion_tokens=7, cached_tokens=60),
    )
    body = llm_response_to_anthropic(resp, "m")
    assert body["stop_reason"] == stop and body["type"] == "message"
    assert body["usage"] == {
        "input_tokens": 40,
        "output_tokens": 7,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 60,
    }
    back = anthropic_response_to_llm(body)
    assert back.content == "hi" and back.finish_reason == finish
    assert back.tool_calls == [ToolCall(id="toolu_1", name="bash", arguments='{"command": "ls"}')]
    assert back.usage == Usage(prompt_tokens=100, completion_tokens=7, cached_tokens=60)


def test_usage_counts_cache_writes_as_prompt_tokens():
    resp = anthropic_response_to_llm(
        {
            "content": [{"type": "text", "text": "x"}],
            "stop_reason": "stop_sequence",
            "usage": {
                "input_tokens": 5,
                "output_tokens": 2,
                "cache_creation_input_tokens": 10,
                "cache_read_input_tokens": 20,
            },
        }
    )
    assert resp.usage == Usage(prompt_tokens=35, completion_tokens=2, cached_tokens=20)
    assert resp.finish_reason == "stop"


def test_stream_event_order():
    resp = LLMResponse(
        content="a",
        tool_calls=[ToolCall(id="t", name="f", arguments='{"x": 1}')],
        finish_reason="tool_calls",
    )
    events = list(anthropic_stream_events(resp, "m"))
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[5]["delta"] == {"type": "input_json_delta", "partial_json": '{"x": 1}'}
    assert events[4]["content_block"] == {"type": "tool_use", "id": "t", "name": "f", "input": {}}


@pytest.fixture
async def proxy():
    async with ProxyServer() as p:
        yield p


async def test_anthropic_sdk_against_the_proxy(proxy):
    response = LLMResponse(
        content="Running it.",
        tool_calls=[ToolCall(id="toolu_9", name="bash", arguments='{"command": "ls -la"}')],
        finish_reason="tool_calls",
        usage=Usage(prompt_tokens=30, completion_tokens=4, cached_tokens=10),
    )
    policy = ScriptedPolicy([response, response])
    ep = proxy.register(policy)
    client = anthropic.AsyncAnthropic(base_url=f"{proxy.base_url}/e/{ep.token}", api_key="unused")
    tools = [{"name": "bash", "description": "run", "input_schema": {"type": "object"}}]
    msg = await client.messages.create(
        model="claude-test",
        max_tokens=50,
        system="be brief",
        messages=[{"role": "user", "content": "go"}],
        tools=tools,
    )
    assert msg.stop_reason == "tool_use" and msg.content[0].text == "Running it."
    assert msg.content[1].input == {"command": "ls -la"} and msg.content[1].id == "toolu_9"
    assert msg.usage.input_tokens == 20 and msg.usage.cache_read_input_tokens == 10
    req = policy.requests[0]
    assert req.messages[0] == {"role": "system", "content": "be brief"}
    assert req.tools[0]["function"]["name"] == "bash" and req.sampling.max_tokens == 50
    assert req.metadata["api"] == "anthropic"

    async with client.messages.stream(
        model="claude-test",
        max_tokens=50,
        messages=[{"role": "user", "content": "go"}],
        tools=tools,
    ) as stream:
        text = "".join([t async for t in stream.text_stream])
        final = await stream.get_final_message()
    assert text == "Running it."
    assert final.stop_reason == "tool_use" and final.content[1].input == {"command": "ls -la"}
    assert final.usage.output_tokens == 4


async def test_anthropic_routes_by_x_api_key_and_reports_errors(proxy):
    ep = proxy.register(ScriptedPolicy(["pong"]))
    client = anthropic.AsyncAnthropic(base_url=proxy.base_url, api_key=ep.token, max_retries=0)
    msg = await client.messages.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "ping"}]
    )
    assert msg.content[0].text == "pong" and msg.stop_reason == "end_turn"
    bad = anthropic.AsyncAnthropic(base_url=proxy.base_url, api_key="nope", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError, match="unknown episode token"):
        await bad.messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    with pytest.raises(anthropic.BadRequestError, match="role must be"):
        await client.messages.create(
            model="m", max_tokens=5, messages=[{"role": "tool", "content": "x"}]
        )


async def test_anthropic_policy_through_the_proxy(proxy):
    """AnthropicPolicy (our client) -> the proxy's /v1/messages -> a scripted policy: the
    request and the response survive both conversions."""
    inner = ScriptedPolicy(
        [
            LLMResponse(
                content="done",
                tool_calls=[ToolCall(id="toolu_2", name="bash", arguments='{"command": "pwd"}')],
                finish_reason="tool_calls",
                usage=Usage(prompt_tokens=9, completion_tokens=2, cached_tokens=4),
            )
        ]
    )
    ep = proxy.register(inner)
    policy = AnthropicPolicy("claude-test", base_url=f"{proxy.base_url}/e/{ep.token}", api_key="k")
    try:
        out = await policy.complete(CONVERSATION)
    finally:
        await policy.aclose()
    assert out.content == "done" and out.finish_reason == "tool_calls"
    assert out.tool_calls == [ToolCall(id="toolu_2", name="bash", arguments='{"command": "pwd"}')]
    assert out.usage == Usage(prompt_tokens=9, completion_tokens=2, cached_tokens=4)
    assert out.model == "claude-test"
    seen = inner.requests[0]
    assert seen.messages == CONVERSATION.messages
    assert seen.tools == CONVERSATION.tools


async def test_anthropic_policy_says_which_sampling_parameters_it_sent(proxy):
    """top_k reaches the server (Anthropic's body has it) and every response carries what it
    was sent with; None where the server's default applied."""
    inner = ScriptedPolicy(["one", "two"])
    ep = proxy.register(inner)
    policy = AnthropicPolicy(
        "claude-test", base_url=f"{proxy.base_url}/e/{ep.token}", api_key="k", max_tokens=77
    )
    asked = SamplingParams(temperature=0.4, top_k=7, max_tokens=50)
    try:
        out = await policy.complete(
            LLMRequest(messages=[{"role": "user", "content": "hi"}], sampling=asked)
        )
        default = await policy.complete(LLMRequest(messages=[{"role": "user", "content": "hi"}]))
    finally:
        await policy.aclose()
    seen = inner.requests[0].sampling
    assert (seen.temperature, seen.top_k, seen.max_tokens) == (0.4, 7, 50)
    assert out.sampling == asked
    assert default.sampling == SamplingParams(max_tokens=77)


async def test_anthropic_policy_retries_transient_errors_only():
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        body = json.loads(request.content)
        if body["messages"][0]["content"][0]["text"] == "bad":
            return httpx.Response(
                400,
                json={"type": "error", "error": {"type": "invalid_request_error", "message": "no"}},
            )
        if calls["n"] < 3:
            return httpx.Response(
                529,
                json={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
            )
        return httpx.Response(200, json=llm_response_to_anthropic(LLMResponse(content="ok"), "m"))

    policy = AnthropicPolicy(
        "m",
        base_url="http://anthropic.test",
        api_key="k",
        backoff_s=0.01,
        transport=httpx.MockTransport(handler),  # a double below the layer under test
    )
    out = await policy.complete(LLMRequest(messages=[{"role": "user", "content": "hi"}]))
    assert out.content == "ok" and calls["n"] == 3
    calls["n"] = 10
    with pytest.raises(AnthropicAPIError, match="HTTP 400 from /v1/messages: no"):
        await policy.complete(LLMRequest(messages=[{"role": "user", "content": "bad"}]))
    assert calls["n"] == 11
    await policy.aclose()


def test_system_turns_among_the_messages_stay_system_messages():
    """Claude Code 2.x sends mid-conversation system turns (its environment notes, reminders)
    among the user and assistant turns: each becomes a system message in its place."""
    request = anthropic_request_to_llm(
        {
            "system": [{"type": "text", "text": "top"}],
            "messages": [
                {"role": "user", "content": "do it"},
                {"role": "system", "content": [{"type": "text", "text": "# Environment"}]},
                {"role": "assistant", "content": "ok"},
            ],
        }
    )
    assert [(m["role"], m["content"]) for m in request.messages] == [
        ("system", "top"),
        ("user", "do it"),
        ("system", "# Environment"),
        ("assistant", "ok"),
    ]
    with pytest.raises(AnthropicFormatError, match="messages\\[0\\]: role must be"):
        anthropic_request_to_llm({"messages": [{"role": "tool", "content": "x"}]})
