"""``palaestra serve --protocol openenv``, driven by openenv-core's own client over loopback."""

from __future__ import annotations

import asyncio
import json
import signal

import pytest
from websockets.asyncio.client import connect

from palaestra.env.registry import load_tasks, make_policy
from tests.procs import eventually
from tests.serve.serving import action_json, openenv_episode, served

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

pytest.importorskip("openenv")

ENV = "starter:0:3"


async def test_oracle_and_nop_episodes_run_concurrently_each_in_its_own_sandbox(tmp_path):
    tasks = load_tasks(ENV)
    oracle, nop = make_policy("oracle", tasks), make_policy("nop")
    with served(ENV, "openenv", tmp_path) as server:
        results = await asyncio.gather(
            *(openenv_episode(server.url, oracle, t) for t in tasks.ids),
            *(openenv_episode(server.url, nop, t) for t in tasks.ids),
        )
        assert [r[:2] for r in results] == [(1.0, "passed")] * 3 + [(0.0, "failed")] * 3, results
        assert all(steps >= 1 for *_, steps in results)
        assert await eventually(lambda: not server.sandboxes())  # each closed with its socket
        assert server.stop() == 0


async def _ask(ws, message: object) -> dict:
    await ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(await ws.recv())


async def test_malformed_messages_get_openenv_errors_and_the_server_stays_up(tmp_path):
    tasks = load_tasks(ENV)
    with served(ENV, "openenv", tmp_path) as server:
        async with connect(server.url.replace("http", "ws") + "/ws") as ws:
            bad_json = await _ask(ws, "{not json")
            assert bad_json["type"] == "error" and bad_json["data"]["code"] == "INVALID_JSON"
            unknown = await _ask(ws, {"type": "jump"})
            assert unknown["data"]["code"] == "UNKNOWN_TYPE"
            early = await _ask(ws, {"type": "step", "data": {"content": "ls"}})
            assert early["data"]["code"] == "EXECUTION_ERROR"
            assert "before reset" in early["data"]["message"]
            wrong = await _ask(ws, {"type": "step", "data": {"content": ["not", "text"]}})
            assert wrong["data"]["code"] == "VALIDATION_ERROR"
            extra = await _ask(ws, {"type": "step", "data": {"command": "ls"}})
            assert extra["data"]["code"] == "VALIDATION_ERROR"
            bad_task = await _ask(ws, {"type": "reset", "data": {"task_id": "no-such-task"}})
            assert bad_task["data"]["code"] == "EXECUTION_ERROR"
            # the same session still plays a whole episode
            first = await _ask(ws, {"type": "reset", "data": {"task_id": tasks.ids[0]}})
            assert first["type"] == "observation" and first["data"]["done"] is False
            nop = make_policy("nop")
            request = first["data"]["observation"]["request"]
            from palaestra.llm.types import LLMRequest

            action = action_json(await nop.complete(LLMRequest.model_validate(request)))
            last = await _ask(ws, {"type": "step", "data": action})
            assert last["data"]["done"] is True and last["data"]["reward"] == 0.0
            after = await _ask(ws, {"type": "step", "data": action})
            assert after["data"]["code"] == "EXECUTION_ERROR"
        assert server.alive()
        assert server.stop() == 0


async def test_disconnect_idle_capacity_and_sigterm_close_every_sandbox(tmp_path):
    tasks = load_tasks(ENV)
    reset = json.dumps({"type": "reset", "data": {"task_id": tasks.ids[0]}})
    with served(ENV, "openenv", tmp_path, "--max-sessions", "2", "--idle-timeout", "5") as server:
        url = server.url.replace("http", "ws") + "/ws"
        # a client that disconnects mid-episode: its sandbox is closed
        ws = await connect(url)
        await _ask(ws, reset)
        assert server.sandboxes()
        await ws.close()
        assert await eventually(lambda: not server.sandboxes(), within=30)
        # one that idles past --idle-timeout: closed too, and told so on its next message
        async with connect(url) as idle:
            await _ask(idle, reset)
            assert server.sandboxes()
            assert await eventually(lambda: not server.sandboxes(), within=30)
            late = await _ask(idle, {"type": "step", "data": {"content": "ls"}})
            assert late["data"]["code"] == "EXECUTION_ERROR" and "idle" in late["data"]["message"]
        # --max-sessions 2: a third session at once is refused with OpenEnv's capacity error
        async with connect(url) as a, connect(url) as b:
            assert (await _ask(a, reset))["type"] == "observation"
            assert (await _ask(b, reset))["type"] == "observation"
            async with connect(url) as c:
                refused = json.loads(await c.recv())
                assert refused["data"]["code"] == "CAPACITY_REACHED"
            # SIGTERM with two episodes running: every sandbox closed, exit 0
            assert sum(cmd.startswith("bwrap ") for cmd in server.sandboxes()) == 2
            assert server.stop(signal.SIGTERM) == 0
        assert not server.sandboxes()
