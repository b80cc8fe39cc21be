"""``palaestra serve --protocol ors``, driven by ors-sdk's own client over loopback."""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.error
import urllib.request

import pytest

from palaestra.env.registry import load_tasks, make_policy
from tests.procs import eventually
from tests.serve.serving import action_json, ors_episode, served

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

pytest.importorskip("ors")

ENV = "starter:0:3"


async def test_oracle_and_nop_episodes_run_concurrently_each_in_its_own_sandbox(tmp_path):
    tasks = load_tasks(ENV)
    oracle, nop = make_policy("oracle", tasks), make_policy("nop")
    with served(ENV, "ors", tmp_path) as server:
        assert server.name == "starter-0-3"
        results = await asyncio.gather(
            *(ors_episode(server.url, server.name, oracle, t) for t in tasks.ids),
            *(ors_episode(server.url, server.name, nop, t) for t in tasks.ids),
        )
        assert [r[:2] for r in results] == [(1.0, "passed")] * 3 + [(0.0, "failed")] * 3, results
        assert await eventually(lambda: not server.sandboxes())  # each closed at /delete
        assert server.stop() == 0


async def test_a_tool_env_through_its_own_tools_and_respond(tmp_path):
    env_id = "tools/crm:0:2"
    tasks = load_tasks(env_id)
    oracle, nop = make_policy("oracle", tasks), make_policy("nop")
    with served(env_id, "ors", tmp_path) as server:
        results = await asyncio.gather(
            *(ors_episode(server.url, server.name, oracle, t, task_tools=True) for t in tasks.ids),
            *(ors_episode(server.url, server.name, nop, t, task_tools=True) for t in tasks.ids),
        )
        assert [r[0] for r in results] == [1.0, 1.0, 0.0, 0.0]
        assert server.stop() == 0


def _post(url: str, body: bytes, sid: str | None = None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json", **({"X-Session-ID": sid} if sid else {})}
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


async def test_malformed_requests_limits_and_idle_sessions_get_ors_errors(tmp_path):
    from ors.client import AsyncORS, ToolCallError

    tasks = load_tasks(ENV)
    options = ("--max-sessions", "1", "--idle-timeout", "5", "--max-request-bytes", "2048")
    with served(ENV, "ors", tmp_path, *options) as server:
        create = f"{server.url}/create"
        spec = json.dumps({"task_spec": {"task_id": tasks.ids[0]}}).encode()
        assert (await asyncio.to_thread(_post, create, b"{not json", "s1"))[0] == 422
        assert (await asyncio.to_thread(_post, create, b'{"split": "train"}', "s1"))[0] == 422
        assert (await asyncio.to_thread(_post, create, b"x" * 4096, "s1"))[0] == 413
        status, body = await asyncio.to_thread(_post, create, spec)  # no session id
        assert status == 400 and "X-Session-ID" in body["detail"]
        client = AsyncORS(server.url)
        env = client.environment(server.name)
        task = (await env.list_tasks("train"))[0]
        async with env.session(task=task) as session:
            with pytest.raises(ToolCallError, match="not a tool"):
                await session.call_tool("rm_rf", {})
            with pytest.raises(ToolCallError, match="content"):
                await session.call_tool("respond", {"content": ["not", "text"]})
            # --max-sessions 1: one more session is refused with HTTP 503
            status, body = await asyncio.to_thread(_post, create, spec, "another")
            assert status == 503 and "--max-sessions" in body["detail"]
            # the refused requests changed nothing: the session plays its episode
            request = (await session.get_prompt())[0].detail["observation"]
            from palaestra.llm.types import LLMRequest

            response = await make_policy("nop").complete(LLMRequest.model_validate(request))
            out = await session.call_tool("respond", action_json(response))
            assert out.finished and out.reward == 0.0 and out.metadata["terminated"]
            with pytest.raises(ToolCallError, match="episode is over"):
                await session.call_tool("respond", action_json(response))
        assert await eventually(lambda: not server.sandboxes())
        # a session left idle past --idle-timeout is closed with its sandbox
        status, _ = await asyncio.to_thread(_post, create, spec, "idle-one")
        assert status == 200
        assert await eventually(lambda: bool(server.sandboxes()), within=60)
        assert await eventually(lambda: not server.sandboxes(), within=30)
        for _ in range(100):  # the sandbox closes first, then the ORS session goes
            status, _ = await asyncio.to_thread(_post, f"{server.url}/ping", b"", "idle-one")
            if status != 200:
                break
            await asyncio.sleep(0.1)
        assert status == 404  # gone: an ORS client's pings end its session
        # SIGTERM with an episode running: its sandbox is closed, exit 0
        assert (await asyncio.to_thread(_post, create, spec, "last-one"))[0] == 200
        assert await eventually(lambda: bool(server.sandboxes()), within=60)
        assert server.alive() and server.stop(signal.SIGTERM) == 0
        assert not server.sandboxes()
