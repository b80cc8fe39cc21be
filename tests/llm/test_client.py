import asyncio

import pytest

from palaestra.llm.client import MediatedClient
from palaestra.llm.policies import ScriptedPolicy
from palaestra.llm.types import LLMRequest, LLMResponse, SamplingParams, ToolCall


async def test_mediated_client_hands_out_request_and_returns_action():
    client = MediatedClient(metadata={"episode_id": "e1"})
    call = asyncio.create_task(
        client.complete(
            LLMRequest(messages=[{"role": "user", "content": "hi"}], metadata={"turn": 0})
        )
    )
    request = await client.next_request()
    assert request.metadata == {"turn": 0, "episode_id": "e1"}
    assert client.waiting
    client.respond(LLMResponse(content="hello"))
    assert (await call).content == "hello"
    assert not client.waiting


async def test_mediated_client_rejects_response_without_request():
    with pytest.raises(RuntimeError, match="no outstanding request"):
        MediatedClient().respond(LLMResponse(content="x"))


def test_request_keeps_system_prompt_in_messages():
    req = LLMRequest(
        messages=[{"role": "system", "content": "sys"}, {"role": "user", "content": "u"}]
    )
    assert req.system_prompt == "sys"
    assert req.last_user_text == "u"
    assert "system" not in req.model_dump()


def test_response_to_message_and_token_fields():
    resp = LLMResponse(
        content=None,
        tool_calls=[ToolCall(id="c1", name="bash", arguments='{"cmd": "ls"}')],
        finish_reason="tool_calls",
        prompt_token_ids=[1, 2],
        completion_token_ids=[3],
        logprobs=[-0.5],
        policy_version=7,
    )
    msg = resp.to_message()
    assert msg["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"cmd": "ls"}'}
    assert resp.tool_calls[0].parsed_arguments() == {"cmd": "ls"}
    assert LLMResponse.model_validate_json(resp.model_dump_json()) == resp


def test_tool_call_bad_arguments_named():
    with pytest.raises(ValueError, match="not valid JSON"):
        ToolCall(id="c", name="bash", arguments="{oops").parsed_arguments()


async def test_a_scripted_policy_reports_the_sampling_it_was_asked_for():
    """A scripted answer stands in for one drawn with the request's parameters; a scripted
    response that names its own keeps them."""
    own = SamplingParams(temperature=0.5)
    policy = ScriptedPolicy(["a", LLMResponse(content="b", sampling=own)])
    asked = SamplingParams(temperature=0.3, top_k=4, max_tokens=9, stop=["x"], seed=1)
    request = LLMRequest(messages=[{"role": "user", "content": "hi"}], sampling=asked)
    first, second = await policy.complete(request), await policy.complete(request)
    assert first.sampling == SamplingParams(temperature=0.3, top_k=4, max_tokens=9)
    assert second.sampling == own
