"""The proxy's OpenAI Responses route (``POST /v1/responses``), driven by the openai SDK's own
Responses client, streaming and not, and by httpx with the item shapes Codex sends."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from palaestra.llm import LLMResponse, ScriptedPolicy, ToolCall, Usage
from palaestra.scaffolds.proxy import ProxyServer

BASH = {
    "type": "function",
    "name": "bash",
    "description": "Run a command.",
    "strict": False,
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}
TOOL_TURN = LLMResponse(
    content="Let me look.",
    reasoning="The task needs the file list.",
    tool_calls=[
        ToolCall(id="call_a", name="bash", arguments='{"cmd": "ls"}'),
        ToolCall(id="call_b", name="bash", arguments='{"cmd": "cat x.py"}'),
    ],
    finish_reason="tool_calls",
    usage=Usage(prompt_tokens=20, completion_tokens=5, cached_tokens=4, reasoning_tokens=2),
    prompt_token_ids=[1, 2, 3],
    completion_token_ids=[7, 8, 9],
    logprobs=[-0.5, -0.25, -0.125],
)


@pytest.fixture
async def proxy():
    async with ProxyServer(model_name="test-model") as p:
        yield p


def client_for(proxy: ProxyServer, ep) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=proxy.url_for(ep), api_key="unused", max_retries=0)


async def test_a_call_becomes_one_request_in_chat_format(proxy):
    policy = ScriptedPolicy(
        [LLMResponse(content="ok", usage=Usage(prompt_tokens=9, completion_tokens=1))]
    )
    ep = proxy.register(policy, metadata={"task_id": "t1"})
    out = await client_for(proxy, ep).responses.create(
        model="gpt-x",
        instructions="Be brief.",
        input=[
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "Use tools."}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "a"},
                    {"type": "input_text", "text": "b"},
                ],
            },
        ],
        tools=[BASH],
        tool_choice={"type": "function", "name": "bash"},
        temperature=0.3,
        top_p=0.9,
        max_output_tokens=64,
        reasoning={"effort": "low"},
    )
    assert out.output_text == "ok" and out.status == "completed" and out.model == "gpt-x"
    assert (
        out.usage.input_tokens == 9
        and out.usage.output_tokens == 1
        and out.usage.total_tokens == 10
    )
    assert out.id.startswith("resp_") and out.instructions == "Be brief."
    (req,) = policy.requests
    assert req.messages == [
        {"role": "system", "content": "Be brief.\n\nUse tools."},
        {"role": "user", "content": "a\nb"},
    ]
    assert req.tools == [
        {
            "type": "function",
            "function": {k: BASH[k] for k in ("name", "description", "parameters", "strict")},
        }
    ]
    s = req.sampling
    assert (s.temperature, s.top_p, s.max_tokens) == (0.3, 0.9, 64)
    assert s.tool_choice == {"type": "function", "function": {"name": "bash"}}
    assert s.reasoning_effort == "low"
    assert req.metadata["api"] == "responses" and req.metadata["requested_model"] == "gpt-x"
    assert req.metadata["task_id"] == "t1" and req.metadata["turn"] == 0


async def test_output_items_reasoning_message_and_function_calls(proxy):
    ep = proxy.register(ScriptedPolicy([TOOL_TURN]))
    out = await client_for(proxy, ep).responses.create(
        model="m", input="go", tools=[BASH], include=["message.output_text.logprobs"]
    )
    kinds = [item.type for item in out.output]
    assert kinds == ["reasoning", "message", "function_call", "function_call"]
    assert out.output[0].content[0].text == "The task needs the file list."
    text = out.output[1].content[0]
    assert text.text == "Let me look." and [lp.logprob for lp in text.logprobs] == [
        -0.5,
        -0.25,
        -0.125,
    ]
    assert text.logprobs[0].token == "token_id:7"
    calls = out.output[2:]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_a", "bash", {"cmd": "ls"}),
        ("call_b", "bash", {"cmd": "cat x.py"}),
    ]
    assert out.usage.input_tokens_details.cached_tokens == 4
    assert out.usage.output_tokens_details.reasoning_tokens == 2
    # token ids and logprobs are kept on our side for the trajectory
    assert ep.calls[0]["response"]["prompt_token_ids"] == [1, 2, 3]
    assert ep.calls[0]["response"]["completion_token_ids"] == [7, 8, 9]


async def test_stream_follows_openais_event_sequence(proxy):
    ep = proxy.register(ScriptedPolicy([TOOL_TURN]))
    stream = await client_for(proxy, ep).responses.create(
        model="m", input="go", tools=[BASH], stream=True
    )
    events = [e async for e in stream]
    assert [e.type for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        *[
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
        ]
        * 2,
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    added = [e for e in events if e.type == "response.output_item.added"]
    done = [e for e in events if e.type == "response.output_item.done"]
    assert [e.output_index for e in added] == [e.output_index for e in done] == [0, 1, 2, 3]
    assert [e.item.id for e in added] == [e.item.id for e in done]
    assert added[2].item.arguments == "" and added[2].item.status == "in_progress"
    args_done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [(e.name, e.arguments, e.item_id) for e in args_done] == [
        ("bash", '{"cmd": "ls"}', done[2].item.id),
        ("bash", '{"cmd": "cat x.py"}', done[3].item.id),
    ]
    final = events[-1].response
    assert final.status == "completed" and [i.id for i in final.output] == [e.item.id for e in done]
    assert final.usage.total_tokens == 25


async def test_the_sdks_stream_helper_assembles_the_response(proxy):
    ep = proxy.register(ScriptedPolicy([TOOL_TURN]))
    async with client_for(proxy, ep).responses.stream(
        model="m", input="go", tools=[BASH]
    ) as stream:
        deltas = [e.delta async for e in stream if e.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Let me look."
    assert [c.arguments for c in final.output if c.type == "function_call"] == [
        '{"cmd": "ls"}',
        '{"cmd": "cat x.py"}',
    ]


async def test_calls_and_outputs_round_trip_as_one_growing_conversation(proxy):
    """Codex's way: store false, the whole history sent again with the outputs appended. The
    second request's messages extend the first's by the policy's own turn and the results."""
    policy = ScriptedPolicy([TOOL_TURN, LLMResponse(content="done")])
    ep = proxy.register(policy)
    client = client_for(proxy, ep)
    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
    ]
    first = await client.responses.create(model="m", input=history, tools=[BASH], store=False)
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history += [
        {"type": "function_call_output", "call_id": "call_a", "output": "x.py"},
        {
            "type": "function_call_output",
            "call_id": "call_b",
            "output": [{"type": "input_text", "text": "print(1)"}],
        },
    ]
    second = await client.responses.create(model="m", input=history, tools=[BASH], store=False)
    assert second.output_text == "done"
    one, two = policy.requests
    assert two.messages[: len(one.messages)] == one.messages
    assert two.messages[len(one.messages) :] == [
        {
            "role": "assistant",
            "content": "Let me look.",
            "reasoning_content": "The task needs the file list.",
            "tool_calls": [tc.to_openai() for tc in TOOL_TURN.tool_calls],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "x.py"},
        {"role": "tool", "tool_call_id": "call_b", "content": "print(1)"},
    ]
    assert [c["turn"] for c in ep.calls] == [0, 1]


async def test_previous_response_id_continues_a_stored_response(proxy):
    policy = ScriptedPolicy([TOOL_TURN, LLMResponse(content="two"), LLMResponse(content="three")])
    ep = proxy.register(policy)
    client = client_for(proxy, ep)
    first = await client.responses.create(model="m", instructions="old", input="go", tools=[BASH])
    outputs = [
        {"type": "function_call_output", "call_id": c, "output": "ok"} for c in ("call_a", "call_b")
    ]
    second = await client.responses.create(
        model="m", instructions="new", input=outputs, previous_response_id=first.id
    )
    await client.responses.create(model="m", input="and?", previous_response_id=second.id)
    one, two, three = policy.requests
    assert two.messages[0] == {"role": "system", "content": "new"}  # instructions not carried
    assert two.messages[1] == one.messages[1] == {"role": "user", "content": "go"}
    assert [m["role"] for m in two.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert [m["role"] for m in three.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    assert three.messages[4] == {"role": "assistant", "content": "two"}
    with pytest.raises(
        openai.BadRequestError, match="previous response 'resp_nope' not found"
    ) as e:
        await client.responses.create(model="m", input="x", previous_response_id="resp_nope")
    assert e.value.code == "previous_response_not_found"


async def test_store_false_responses_are_not_kept(proxy):
    ep = proxy.register(ScriptedPolicy(["a", "b"]))
    client = client_for(proxy, ep)
    first = await client.responses.create(model="m", input="x", store=False)
    assert first.store is False
    with pytest.raises(openai.BadRequestError, match="store=false"):
        await client.responses.create(model="m", input="y", previous_response_id=first.id)


async def test_namespace_custom_and_hosted_tools(proxy):
    """Codex's tool list: a namespace of functions, a freeform (custom) tool, web search."""
    patch = ToolCall(id="call_p", name="apply_patch", arguments='{"input":  "*** Begin Patch"}')
    spawn = ToolCall(id="call_s", name="spawn_agent", arguments="{}")
    policy = ScriptedPolicy(
        [LLMResponse(tool_calls=[patch, spawn], finish_reason="tool_calls"), "ok"]
    )
    ep = proxy.register(policy)
    tools = [
        {
            "type": "namespace",
            "name": "agents",
            "description": "d",
            "tools": [
                {"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}
            ],
        },
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "Edit files.",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"},
        },
        {"type": "web_search", "external_web_access": True},
    ]
    async with httpx.AsyncClient(base_url=proxy.url_for(ep)) as http:
        body = {"model": "m", "input": "go", "tools": tools, "store": False}
        out = (await http.post("/responses", json=body)).json()
        req = policy.requests[0]
        assert [t["function"]["name"] for t in req.tools] == ["spawn_agent", "apply_patch"]
        custom = req.tools[1]["function"]
        assert (
            custom["parameters"]["required"] == ["input"]
            and "start: x" in custom["parameters"]["properties"]["input"]["description"]
        )
        assert req.metadata["dropped_tools"] == ["web_search"]
        first, second = out["output"]
        assert first["type"] == "custom_tool_call" and first["input"] == "*** Begin Patch"
        assert second["type"] == "function_call" and second["namespace"] == "agents"
        echo = [
            first,
            second,
            {"type": "custom_tool_call_output", "call_id": "call_p", "output": "patched"},
            {"type": "function_call_output", "call_id": "call_s", "output": "spawned"},
        ]
        await http.post(
            "/responses", json={**body, "input": [{"role": "user", "content": "go"}, *echo]}
        )
    calls = policy.requests[1].messages[1]["tool_calls"]
    # the custom call reaches the policy as it wrote it, odd spacing included
    assert [c["function"]["arguments"] for c in calls] == ['{"input":  "*** Begin Patch"}', "{}"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_length_stop_is_an_incomplete_response(proxy, stream):
    ep = proxy.register(ScriptedPolicy([LLMResponse(content="trunc", finish_reason="length")]))
    client = client_for(proxy, ep)
    if stream:
        events = [e async for e in await client.responses.create(model="m", input="x", stream=True)]
        assert events[-1].type == "response.incomplete"
        out = events[-1].response
    else:
        out = await client.responses.create(model="m", input="x")
    assert out.status == "incomplete" and out.incomplete_details.reason == "max_output_tokens"
    assert out.output_text == "trunc"


async def test_bad_requests_get_openais_error_shape(proxy):
    ep = proxy.register(ScriptedPolicy([]))
    async with httpx.AsyncClient(base_url=proxy.url_for(ep)) as http:
        cases = [
            ({"input": 3}, "'input' must be a string or a list"),
            (
                {"input": [{"type": "item_reference", "id": "x"}]},
                "item type 'item_reference' is not supported",
            ),
            (
                {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
                "'input_file' is not supported",
            ),
            (
                {"input": [{"type": "function_call_output", "output": "x"}]},
                "needs a string 'call_id'",
            ),
            ({"input": "x", "background": True}, "'background' is not supported"),
            ({"input": []}, "the request has no input"),
        ]
        for body, message in cases:
            r = await http.post("/responses", json=body)
            assert r.status_code == 400, body
            error = r.json()["error"]
            assert message in error["message"] and error["type"] == "invalid_request_error"
        r = await http.post(
            f"{proxy.base_url}/v1/responses",
            json={"input": "x"},
            headers={"Authorization": "Bearer nope"},
        )
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert ep.calls == []


async def test_a_policy_failure_is_an_error_or_a_failed_event(proxy):
    def fail(request):
        raise RuntimeError("model server down")

    ep = proxy.register(ScriptedPolicy(fail))
    client = client_for(proxy, ep)
    with pytest.raises(openai.InternalServerError, match="model server down"):
        await client.responses.create(model="m", input="x")
    events = [e async for e in await client.responses.create(model="m", input="x", stream=True)]
    (failed,) = events
    assert failed.type == "response.failed" and failed.response.status == "failed"
    assert "model server down" in failed.response.error.message
