"""OpenAIChatPolicy against a real local HTTP server speaking the chat-completions API.

The server runs in the test process on 127.0.0.1; each test scripts its answers per call and
reads back what the client sent (so retry counts are observed by the server, not assumed).
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import pytest

from palaestra import make_policy
from palaestra.llm import LLMRequest, LLMResponse, SamplingParams
from palaestra.llm.openai_client import LLMAPIError, OpenAIChatPolicy, _retry_after
from palaestra.llm.pricing import lookup_pricing
from tests.local_http import serving

COMPLETION = {
    "id": "cmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "tiny-model",
    "prompt_token_ids": [1, 2, 3],
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "token_ids": [7, 8],
            "message": {
                "role": "assistant",
                "content": "thinking",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
                    }
                ],
            },
            "logprobs": {
                "content": [
                    {"token": "a", "logprob": -0.25, "bytes": None, "top_logprobs": []},
                    {"token": "b", "logprob": -1.5, "bytes": None, "top_logprobs": []},
                ]
            },
        }
    ],
    "usage": {
        "prompt_tokens": 11,
        "completion_tokens": 2,
        "total_tokens": 13,
        "prompt_tokens_details": {"cached_tokens": 4},
    },
}

USER = LLMRequest(messages=[{"role": "user", "content": "hi"}])


@dataclass
class Reply:
    status: int = 200
    body: dict | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def error(status: int, message: str, **headers: str) -> Reply:
    return Reply(status, {"error": {"message": message, "type": "test", "code": None}}, headers)


def completion(**changes: object) -> dict:
    body = copy.deepcopy(COMPLETION)
    body.update(changes)
    return body


@dataclass
class Server:
    url: str
    received: list[dict]
    #: Answers call ``i`` (0-based) given the request; the default is COMPLETION.
    script: Callable[[int, dict], Reply] = lambda i, body: Reply()


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server("", [])
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                index = len(state.received)
                state.received.append(
                    {
                        "path": self.path,
                        "auth": self.headers["Authorization"],
                        "body": body,
                        "at": time.monotonic(),
                    }
                )
            reply = state.script(index, body)
            if reply.delay:
                time.sleep(reply.delay)  # the server's own thread: a slow server
            payload = json.dumps(reply.body or COMPLETION).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and hung up

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as state.url:
        yield state


def policy_for(server: Server, model: str = "tiny-model", **kwargs: object) -> OpenAIChatPolicy:
    kwargs.setdefault("backoff_base", 0.01)
    return OpenAIChatPolicy(model, base_url=server.url, api_key="k-123", **kwargs)  # type: ignore[arg-type]


async def test_request_and_response_mapping(server):
    policy = policy_for(server, logprobs=True, return_token_ids=True)
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    request = LLMRequest(
        messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
        tools=tools,
        sampling=SamplingParams(temperature=0.3, max_tokens=64),
        metadata={"episode_id": "never-sent"},
    )
    async with policy:
        response = await policy.complete(request)
    sent = server.received[0]
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer k-123"
    assert sent["body"]["messages"] == request.messages and sent["body"]["tools"] == tools
    assert sent["body"]["temperature"] == 0.3 and sent["body"]["max_tokens"] == 64
    assert sent["body"]["logprobs"] is True and "metadata" not in sent["body"]
    assert sent["body"]["return_token_ids"] is True
    assert response.content == "thinking" and response.finish_reason == "tool_calls"
    assert response.tool_calls[0].parsed_arguments() == {"cmd": "ls"}
    assert response.usage.model_dump() == {
        "prompt_tokens": 11,
        "completion_tokens": 2,
        "cached_tokens": 4,
        "reasoning_tokens": 0,
    }
    assert response.logprobs == [-0.25, -1.5]
    assert response.prompt_token_ids == [1, 2, 3] and response.completion_token_ids == [7, 8]


async def test_a_response_says_which_sampling_parameters_it_was_sent_with(server):
    """top_k is no OpenAI parameter: it goes in the body, where vLLM and SGLang read it; a
    parameter not sent is None (the server's default applied, unknown here)."""
    policy = policy_for(server, sampling={"top_p": 0.9})
    request = LLMRequest(messages=USER.messages, sampling=SamplingParams(temperature=0.7, top_k=20))
    async with policy:
        response = await policy.complete(request)
        default = await policy_for(server).complete(USER)
    body = server.received[0]["body"]
    assert body["top_k"] == 20 and body["top_p"] == 0.9 and body["temperature"] == 0.7
    assert response.sampling == SamplingParams(temperature=0.7, top_p=0.9, top_k=20)
    assert default.sampling == SamplingParams()


async def test_tool_call_round_trip_keeps_history_verbatim(server):
    """Turn 2 sends the assistant's tool call and the tool result back exactly as OpenAI wants."""
    policy = policy_for(server)
    first = LLMRequest(messages=[{"role": "user", "content": "list files"}])
    response = await policy.complete(first)
    history = [
        *first.messages,
        response.to_message(),
        {"role": "tool", "tool_call_id": response.tool_calls[0].id, "content": "a.txt"},
    ]
    await policy.complete(LLMRequest(messages=history))
    sent = server.received[1]["body"]["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": "thinking",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
            }
        ],
    }
    assert sent[2] == {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"}


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_a_reasoning_servers_reasoning_is_kept_apart(server, field):
    body = completion()
    body["choices"][0]["message"][field] = "First look at the files."
    server.script = lambda i, _: Reply(body=body)
    response = await policy_for(server).complete(USER)
    assert response.reasoning == "First look at the files." and response.content == "thinking"
    server.script = lambda i, _: Reply()
    assert (await policy_for(server).complete(USER)).reasoning is None


async def test_without_flags_no_logprobs_or_token_ids_requested(server):
    await policy_for(server).complete(USER)
    body = server.received[0]["body"]
    assert "logprobs" not in body and "return_token_ids" not in body


async def test_usage_cached_and_reasoning_tokens_and_known_cost(server):
    usage = {
        "prompt_tokens": 1_000_000,
        "completion_tokens": 200_000,
        "total_tokens": 1_200_000,
        "prompt_tokens_details": {"cached_tokens": 400_000},
        "completion_tokens_details": {"reasoning_tokens": 150_000},
    }
    server.script = lambda i, body: Reply(body=completion(model="gpt-4o-2024-08-06", usage=usage))
    response = await policy_for(server, model="gpt-4o").complete(USER)
    assert response.model == "gpt-4o-2024-08-06"
    assert response.usage.cached_tokens == 400_000
    assert response.usage.reasoning_tokens == 150_000
    # gpt-4o: $2.50 input, $1.25 cached input, $10.00 output per 1M tokens.
    assert response.cost_usd == pytest.approx(0.6 * 2.50 + 0.4 * 1.25 + 0.2 * 10.00)


async def test_unknown_model_cost_is_none_not_zero(server):
    response = await policy_for(server, model="my-finetune").complete(USER)
    assert lookup_pricing("tiny-model") is None
    assert response.usage.prompt_tokens == 11 and response.cost_usd is None


async def test_missing_usage_leaves_cost_unknown(server):
    server.script = lambda i, body: Reply(body=completion(model="gpt-4o", usage=None))
    response = await policy_for(server, model="gpt-4o").complete(USER)
    assert response.usage.total_tokens == 0 and response.cost_usd is None


async def test_429_then_success_retries_once(server):
    server.script = lambda i, body: error(429, "slow down") if i == 0 else Reply()
    response = await policy_for(server).complete(USER)
    assert response.content == "thinking"
    assert len(server.received) == 2


@pytest.mark.parametrize("status", [408, 409, 502])
async def test_other_transient_statuses_are_retried(server, status):
    server.script = lambda i, body: error(status, "transient") if i < 2 else Reply()
    await policy_for(server).complete(USER)
    assert len(server.received) == 3


async def test_500_every_time_gives_up_after_max_retries(server):
    server.script = lambda i, body: error(500, "the GPU fell over")
    policy = policy_for(server, max_retries=3)
    with pytest.raises(LLMAPIError, match="failed 4 times.*max_retries=3.*the GPU fell over") as e:
        await policy.complete(USER)
    assert e.value.status == 500 and e.value.attempts == 4
    assert len(server.received) == 4


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (400, "rejected"),
        (401, "API key"),
        (403, "not allowed"),
        (404, "model name"),
        (422, "rejected"),
    ],
)
async def test_client_errors_are_never_retried(server, status, hint):
    # x-should-retry would make the SDK's own retry loop retry even a 400: ours must not.
    server.script = lambda i, body: error(
        status, "bad thing happened", **{"x-should-retry": "true"}
    )
    with pytest.raises(LLMAPIError) as e:
        await policy_for(server).complete(USER)
    message = str(e.value)
    assert f"HTTP {status}" in message and "bad thing happened" in message and hint in message
    assert e.value.status == status and e.value.attempts == 1
    assert len(server.received) == 1


async def test_timeout_is_retried(server):
    server.script = lambda i, body: Reply(delay=2.0) if i == 0 else Reply()
    response = await policy_for(server, timeout=0.3).complete(USER)
    assert response.content == "thinking"
    assert len(server.received) == 2


async def test_timeouts_every_time_give_up_with_clear_error(server):
    server.script = lambda i, body: Reply(delay=1.0)
    with pytest.raises(LLMAPIError, match="failed 2 times.*timed out") as e:
        await policy_for(server, timeout=0.2, max_retries=1).complete(USER)
    assert e.value.status is None and len(server.received) == 2


async def test_connection_refused_is_retried_then_reported():
    policy = OpenAIChatPolicy(
        "m", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=2, backoff_base=0.01
    )
    with pytest.raises(LLMAPIError, match="failed 3 times") as e:
        await policy.complete(USER)
    assert e.value.attempts == 3


@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
async def test_retry_after_is_honoured(server, header):
    """The server refuses any call made before the time its Retry-After named.

    A client ignoring the header would retry after ~10 ms backoff and be refused again, several
    times; one that honours it makes exactly two calls.
    """
    wait_s = 0.6
    value = str(wait_s * 1000 if header == "retry-after-ms" else wait_s)
    not_before: list[float] = []

    def script(i: int, body: dict) -> Reply:
        now = time.monotonic()
        if not not_before:
            not_before.append(now + wait_s)
            return error(429, "rate limited", **{header: value})
        if now < not_before[0]:
            return error(429, "too early")
        return Reply()

    server.script = script
    await policy_for(server, max_retries=10).complete(USER)
    assert len(server.received) == 2


def test_retry_after_header_forms():
    assert _retry_after({"retry-after": "2"}) == 2.0
    assert _retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert _retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert _retry_after({"retry-after": "soon"}) is None
    assert _retry_after({}) is None


async def test_base_url_and_key_from_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    policy = make_policy("openai:tiny-model")
    response = await policy.complete(USER)
    assert isinstance(response, LLMResponse)
    sent = server.received[0]
    assert sent["auth"] == "Bearer from-env" and sent["body"]["model"] == "tiny-model"


def test_bad_settings_named():
    with pytest.raises(ValueError, match="max_retries"):
        OpenAIChatPolicy("m", base_url="http://x/v1", max_retries=-1)
    with pytest.raises(ValueError, match="timeout"):
        OpenAIChatPolicy("m", base_url="http://x/v1", timeout=0)


def test_unknown_policy_lists_choices():
    with pytest.raises(ValueError, match="oracle, nop"):
        make_policy("gpt")


def test_backoff_is_exponential_with_jitter_and_capped():
    policy = OpenAIChatPolicy("m", base_url="http://x/v1", backoff_base=1.0, backoff_max=10.0)
    plain = RuntimeError("connection reset")
    for retry, ceiling in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (4, 10.0), (9, 10.0)]:
        waits = {policy._backoff(retry, plain) for _ in range(50)}
        assert all(ceiling / 2 <= w <= ceiling for w in waits) and len(waits) > 1


def test_malformed_pricing_file_fails_at_construction(tmp_path, monkeypatch):
    path = tmp_path / "prices.json"
    path.write_text('{"m": {"input": 1}}')
    monkeypatch.setenv("PALAESTRA_PRICING", str(path))
    with pytest.raises(ValueError, match="prices.json.*needs numbers"):
        OpenAIChatPolicy("m", base_url="http://x/v1")
