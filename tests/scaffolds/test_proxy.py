"""The proxy as a real HTTP server driven by real clients (the openai SDK, httpx)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from palaestra.llm import LLMRequest, LLMResponse, MediatedClient, ScriptedPolicy, ToolCall, Usage
from palaestra.scaffolds.proxy import ProxyServer, openai_request_to_llm


@pytest.fixture
async def proxy():
    async with ProxyServer(model_name="test-model") as p:
        yield p


def echo_policy(prefix: str = "") -> ScriptedPolicy:
    return ScriptedPolicy(lambda r: f"{prefix}{r.last_user_text}")


async def test_non_streaming_call_becomes_a_request(proxy):
    policy = ScriptedPolicy(
        [
            LLMResponse(
                content="ok",
                usage=Usage(prompt_tokens=12, completion_tokens=3, cached_tokens=8),
                prompt_token_ids=[1, 2],
                completion_token_ids=[7, 8, 9],
                logprobs=[-0.1, -0.2, -0.3],
            )
        ]
    )
    ep = proxy.register(policy, episode_id="ep1", metadata={"task_id": "t1"})
    client = AsyncOpenAI(base_url=proxy.url_for(ep), api_key="unused")
    out = await client.chat.completions.create(
        model="whatever",
        messages=[{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}],
        temperature=0.3,
        max_tokens=64,
        stop="END",
        seed=5,
        logprobs=True,
        extra_body={"top_k": 7},  # vLLM's and SGLang's extension
    )
    assert out.choices[0].message.content == "ok" and out.choices[0].finish_reason == "stop"
    assert out.model == "whatever"
    assert out.usage.prompt_tokens == 12 and out.usage.completion_tokens == 3
    assert out.usage.total_tokens == 15 and out.usage.prompt_tokens_details.cached_tokens == 8
    assert [t.logprob for t in out.choices[0].logprobs.content] == [-0.1, -0.2, -0.3]
    assert out.choices[0].logprobs.content[0].token == "token_id:7"
    (req,) = policy.requests
    assert req.messages[0] == {"role": "system", "content": "sys"}
    assert req.sampling.temperature == 0.3 and req.sampling.max_tokens == 64
    assert req.sampling.stop == ["END"] and req.sampling.seed == 5
    assert req.metadata["task_id"] == "t1" and req.metadata["turn"] == 0
    # token ids and logprobs stay on our side, in the episode's calls
    assert ep.calls[0]["response"]["completion_token_ids"] == [7, 8, 9]
    assert ep.calls[0]["response"]["prompt_token_ids"] == [1, 2]
    # and what it was drawn with (the scripted policy reports what it was asked for)
    sampling = {"temperature": 0.3, "top_k": 7, "max_tokens": 64}
    assert ep.calls[0]["response"]["sampling"] == sampling and req.sampling.top_k == 7


async def test_token_ids_returned_when_asked_like_vllm(proxy):
    policy = ScriptedPolicy(
        [LLMResponse(content="x", prompt_token_ids=[3], completion_token_ids=[4])]
    )
    ep = proxy.register(policy)
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"{proxy.url_for(ep)}/chat/completions",
            json={"messages": [{"role": "user", "content": "q"}], "return_token_ids": True},
        )
    body = r.json()
    assert body["prompt_token_ids"] == [3] and body["choices"][0]["token_ids"] == [4]


async def test_streaming_with_tool_calls_and_usage(proxy):
    response = LLMResponse(
        content="Let me look.",
        tool_calls=[
            ToolCall(id="call_a", name="bash", arguments='{"command": "ls"}'),
            ToolCall(id="call_b", name="view", arguments='{"path": "/app/x.py"}'),
        ],
        finish_reason="tool_calls",
        usage=Usage(prompt_tokens=20, completion_tokens=5),
    )
    ep = proxy.register(ScriptedPolicy([response]))
    client = AsyncOpenAI(base_url=proxy.url_for(ep), api_key="unused")
    tools = [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "strict": True,
                "parameters": {
                    "type": "object",
                    "properties": {"command": {"type": "string"}},
                    "required": ["command"],
                    "additionalProperties": False,
                },
            },
        }
    ]
    stream = await client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "go"}],
        tools=tools,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Let me look."
    calls: dict[int, dict[str, str]] = {}
    for c in chunks:
        for d in (c.choices[0].delta.tool_calls or []) if c.choices else []:
            entry = calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] += d.id or ""
            entry["name"] += (d.function.name or "") if d.function else ""
            entry["arguments"] += (d.function.arguments or "") if d.function else ""
    assert calls == {
        0: {"id": "call_a", "name": "bash", "arguments": '{"command": "ls"}'},
        1: {"id": "call_b", "name": "view", "arguments": '{"path": "/app/x.py"}'},
    }
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "tool_calls" and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens == 20
    # the openai SDK's stream helper reassembles the same message
    ep2 = proxy.register(ScriptedPolicy([response]))
    client2 = AsyncOpenAI(base_url=proxy.url_for(ep2), api_key="unused")
    async with client2.chat.completions.stream(
        model="m", messages=[{"role": "user", "content": "go"}], tools=tools
    ) as s:
        final = await s.get_final_completion()
    msg = final.choices[0].message
    assert msg.content == "Let me look." and [t.function.name for t in msg.tool_calls] == [
        "bash",
        "view",
    ]


async def test_raw_sse_format_ends_with_done(proxy):
    ep = proxy.register(echo_policy())
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"{proxy.url_for(ep)}/chat/completions",
            json={"messages": [{"role": "user", "content": "ping"}], "stream": True},
        )
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [e for e in r.text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert "usage" not in chunks[0]  # only with stream_options.include_usage


async def test_routing_by_api_key_on_plain_v1(proxy):
    a = proxy.register(echo_policy("A:"))
    b = proxy.register(echo_policy("B:"))
    for ep, prefix in ((a, "A:"), (b, "B:")):
        client = AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key=ep.token)
        out = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
        assert out.choices[0].message.content == f"{prefix}hi"


async def test_unknown_and_ended_episodes_get_clear_errors(proxy):
    client = AsyncOpenAI(base_url=f"{proxy.base_url}/e/nope/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="unknown episode token"):
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    client = AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key="bad", max_retries=0)
    with pytest.raises(openai.AuthenticationError, match="unknown episode token"):
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    ep = proxy.register(echo_policy(), episode_id="gone")
    proxy.unregister(ep.token)
    client = AsyncOpenAI(base_url=proxy.url_for(ep), api_key="x", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="episode gone has ended"):
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    async with httpx.AsyncClient() as http:
        r = await http.post(f"{proxy.base_url}/v1/chat/completions", json={"messages": []})
        assert r.status_code == 401 and "no episode given" in r.json()["error"]["message"]
        live = proxy.register(echo_policy())
        r = await http.post(f"{proxy.url_for(live)}/chat/completions", content=b"{not json")
        assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
        r = await http.post(f"{proxy.url_for(live)}/chat/completions", json={"messages": []})
        assert r.status_code == 400 and "'messages' must be a non-empty" in r.text


async def test_policy_error_is_a_500_and_the_episode_keeps_serving(proxy):
    def flaky(request: LLMRequest) -> str:
        if request.metadata["turn"] == 0:
            raise RuntimeError("model server down")
        return "fine"

    ep = proxy.register(ScriptedPolicy(flaky))
    client = AsyncOpenAI(base_url=proxy.url_for(ep), api_key="x", max_retries=0)
    with pytest.raises(openai.InternalServerError, match="model server down"):
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    out = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}]
    )
    assert out.choices[0].message.content == "fine"


async def test_models_and_health(proxy):
    client = AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key="x")
    models = await client.models.list()
    assert [m.id for m in models.data] == ["test-model"]
    async with httpx.AsyncClient() as http:
        proxy.register(echo_policy())
        health = (await http.get(f"{proxy.base_url}/health")).json()
    assert health == {"status": "ok", "episodes": 1}


async def test_ending_an_episode_answers_its_pending_call(proxy):
    mediated = MediatedClient()  # nobody answers: the call waits until the episode ends
    ep = proxy.register(mediated)
    client = AsyncOpenAI(base_url=proxy.url_for(ep), api_key="x", max_retries=0)
    call = asyncio.create_task(
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    )
    request = await asyncio.wait_for(mediated.next_request(), 10)
    assert request.last_user_text == "q"
    proxy.unregister(ep.token)
    with pytest.raises(openai.APIStatusError, match="ended during the call") as info:
        await asyncio.wait_for(call, 10)
    assert info.value.status_code == 410


async def test_parallel_calls_of_one_episode_are_served_in_turn(proxy):
    mediated = MediatedClient()
    ep = proxy.register(mediated)
    client = AsyncOpenAI(base_url=proxy.url_for(ep), api_key="x", max_retries=0)
    calls = [
        asyncio.create_task(
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": s}])
        )
        for s in ("one", "two")
    ]
    seen = []
    for _ in calls:
        req = await asyncio.wait_for(mediated.next_request(), 10)
        seen.append((req.metadata["turn"], req.last_user_text))
        mediated.respond(LLMResponse(content=f"re:{req.last_user_text}"))
    outs = await asyncio.gather(*calls)
    assert sorted(t for t, _ in seen) == [0, 1]
    assert sorted(o.choices[0].message.content for o in outs) == ["re:one", "re:two"]


@pytest.mark.slow
async def test_64_concurrent_streaming_episodes_route_to_their_own_episode(proxy):
    """64 episodes, each a mediated client answered by its own driver, each called by its own
    openai SDK client streaming 3 turns: every answer must reach the episode that asked."""
    n, turns = 64, 3
    episodes = [(i, MediatedClient(metadata={"episode_id": f"ep{i}"})) for i in range(n)]
    registered = [proxy.register(m, episode_id=f"ep{i}") for i, m in episodes]

    async def drive(i: int, mediated: MediatedClient) -> list[str]:
        seen = []
        for _ in range(turns):
            req = await mediated.next_request()
            seen.append(req.last_user_text)
            assert req.metadata["episode_id"] == f"ep{i}"
            await asyncio.sleep(0)
            mediated.respond(LLMResponse(content=f"episode {i} answers {req.last_user_text}"))
        return seen

    async def harness(i: int) -> list[str]:
        client = AsyncOpenAI(base_url=proxy.url_for(registered[i]), api_key="x", max_retries=0)
        got = []
        for t in range(turns):
            stream = await client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": f"q{i}.{t}"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            got.append(
                "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            )
        await client.close()
        return got

    drivers = [asyncio.create_task(drive(i, m)) for i, m in episodes]
    results = await asyncio.wait_for(asyncio.gather(*(harness(i) for i in range(n))), 120)
    seen = await asyncio.gather(*drivers)
    for i in range(n):
        assert results[i] == [f"episode {i} answers q{i}.{t}" for t in range(turns)]
        assert seen[i] == [f"q{i}.{t}" for t in range(turns)]
        assert [c["turn"] for c in registered[i].calls] == list(range(turns))


def test_request_conversion_rejects_bad_input():
    with pytest.raises(ValueError, match="one choice per call"):
        openai_request_to_llm({"messages": [{"role": "user", "content": "x"}], "n": 2})
    with pytest.raises(ValueError, match="'role'"):
        openai_request_to_llm({"messages": [{"content": "x"}]})
    req = openai_request_to_llm(
        {
            "messages": [{"role": "user", "content": "x"}],
            "max_completion_tokens": 9,
            "tool_choice": "required",
        }
    )
    assert req.sampling.max_tokens == 9 and req.sampling.model_extra["tool_choice"] == "required"


async def test_stop_is_clean_and_idempotent(tmp_path):
    sock = tmp_path / "p.sock"
    proxy = ProxyServer(unix_socket=sock)
    await proxy.start()
    assert sock.exists()
    transport = httpx.AsyncHTTPTransport(uds=str(sock))
    async with httpx.AsyncClient(transport=transport) as http:
        assert (await http.get("http://proxy/health")).json()["status"] == "ok"
    port = proxy.port
    await proxy.stop()
    await proxy.stop()
    assert not sock.exists() and not proxy.started
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as http:
            await http.get(f"http://127.0.0.1:{port}/health")


async def test_slow_policy_streams_keepalive_comments_that_clients_ignore(proxy, monkeypatch):
    import palaestra.scaffolds.proxy.routes as proxy_routes

    monkeypatch.setattr(proxy_routes, "KEEPALIVE_S", 0.05)

    class Slow:
        async def complete(self, request: LLMRequest) -> LLMResponse:
            await asyncio.sleep(0.3)
            return LLMResponse(content="late but here")

    ep = proxy.register(Slow())
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"{proxy.url_for(ep)}/chat/completions",
            json={"messages": [{"role": "user", "content": "q"}], "stream": True},
        )
    assert r.text.startswith(": keep-alive\n\n")
    client = AsyncOpenAI(base_url=proxy.url_for(ep), api_key="x")
    stream = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}], stream=True
    )
    assert "".join([c.choices[0].delta.content or "" async for c in stream]) == "late but here"


async def test_cli_runs_a_standalone_proxy():
    """`palaestra proxy` serves a debug episode from a policy and stops cleanly on Ctrl-C."""

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "palaestra.cli",
        "proxy",
        "--port",
        "0",
        "--policy",
        "nop",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        base_url = None
        while base_url is None:
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
            assert line, "the proxy exited before printing its URL"
            if "OPENAI_BASE_URL=" in line:
                base_url = line.split("=", 1)[1].strip()
        client = AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
        out = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}]
        )
        assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in out.choices[0].message.content
        proc.send_signal(signal.SIGINT)
        rest = (await asyncio.wait_for(proc.stdout.read(), 30)).decode()
        assert await proc.wait() == 0
        assert "call 0" in rest and "'hello'" in rest
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_exec_route_runs_commands_in_the_episodes_sandbox(proxy):
    from palaestra.sandbox import make_backend
    from palaestra.sandbox.base import SandboxSpec

    backend = make_backend("local")
    sandbox = await backend.create(SandboxSpec(workdir="/app"))
    try:
        with_sandbox = proxy.register(echo_policy(), sandbox=sandbox)
        without = proxy.register(echo_policy())
        async with httpx.AsyncClient() as http:
            base = f"{proxy.base_url}/e/{with_sandbox.token}/exec"
            r = await http.post(base, json={"command": "pwd; hostname; echo oops >&2; exit 3"})
            assert r.json()["stdout"] == "/app\nsandbox\n" and r.json()["stderr"] == "oops\n"
            assert r.json()["exit_code"] == 3 and r.json()["timed_out"] is False
            r = await http.post(base, json={"command": "sleep 5", "timeout": 0.5})
            assert r.json()["timed_out"] is True and r.json()["exit_code"] is None
            r = await http.post(base, json={"cmd": "ls"})
            assert r.status_code == 400 and "string 'command'" in r.text
            r = await http.post(f"{proxy.base_url}/e/{without.token}/exec", json={"command": "ls"})
            assert r.status_code == 404 and "no sandbox" in r.text
        kinds = [(c["kind"], c["exit_code"]) for c in with_sandbox.calls]
        assert kinds == [("exec", 3), ("exec", None)]
    finally:
        await sandbox.close()
        await backend.aclose()
