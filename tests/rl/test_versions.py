"""Policy versions: stamped on every turn, bumped by weight updates (in process for the local HF
policy, through vLLM's endpoints for an OpenAI-compatible server), judged stale by a stream."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from palaestra.llm import LLMRequest, LLMResponse, ScriptedPolicy
from palaestra.llm.openai_client import OpenAIChatPolicy
from palaestra.llm.versions import VersionedPolicy, current_version
from palaestra.llm.vllm_sync import WeightSyncError, server_root
from palaestra.rl.stream import RolloutStream
from palaestra.rl.versions import first_version, staleness, turn_versions
from palaestra.run.rollout import Episode, Turn
from tests.llm.test_openai_client import COMPLETION

USER = LLMRequest(messages=[{"role": "user", "content": "hi"}])


class VLLMDouble:
    """A real HTTP server on 127.0.0.1 standing in for vLLM: it answers chat completions and
    the dev-mode weight endpoints, and records every call (path with query, JSON body)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.fail: dict[str, int] = {}  # path -> HTTP status to answer with
        calls, fail = self.calls, self.fail

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                calls.append((self.path, json.loads(raw) if raw else None))
                path = self.path.split("?")[0]
                status = fail.get(path, 200)
                if path.endswith("/chat/completions"):
                    body: object = COMPLETION
                elif path == "/collective_rpc":
                    body = {"results": [None]}
                else:
                    body = {"status": path.strip("/")}
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def paths(self) -> list[str]:
        return [path for path, _ in self.calls]


@pytest.fixture
def vllm() -> Iterator[VLLMDouble]:
    server = VLLMDouble()
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


async def test_versioned_policy_stamps_the_version_a_request_was_sent_at():
    gate = asyncio.Event()

    async def slow(request: LLMRequest) -> LLMResponse:
        await gate.wait()
        return LLMResponse(content="ok")

    class Slow:
        async def complete(self, request: LLMRequest) -> LLMResponse:
            return await slow(request)

    policy = VersionedPolicy(Slow(), version=3)
    pending = asyncio.create_task(policy.complete(USER))
    await asyncio.sleep(0)
    assert policy.bump() == 4 and current_version(policy) == 4
    gate.set()
    assert (await pending).policy_version == 3  # sent at 3: the weights it started on
    assert (await policy.complete(USER)).policy_version == 4
    own = VersionedPolicy(ScriptedPolicy([LLMResponse(content="x", policy_version=9)]))
    assert (await own.complete(USER)).policy_version == 9  # a policy's own stamp stays
    assert current_version(ScriptedPolicy([])) is None


def test_staleness_reads_the_first_turn():
    def turn(version: int | None) -> Turn:
        return Turn(USER, LLMResponse(content="x", policy_version=version))

    episode = Episode([turn(2), turn(3)], 1.0, True, False)
    assert first_version(episode) == 2 and turn_versions(episode) == [2, 3]
    assert staleness(episode, 5) == 3
    unstamped = Episode([turn(None)], 0.0, True, False)
    assert staleness(unstamped, 5) is None and staleness(unstamped, 5, started_at=4) == 1


async def test_openai_policy_stamps_and_sync_weights_calls_vllm(vllm):
    async with OpenAIChatPolicy("tiny-model", base_url=vllm.url, policy_version=7) as policy:
        assert (await policy.complete(USER)).policy_version == 7
        assert await policy.sync_weights() == 8
        assert (await policy.complete(USER)).policy_version == 8
        assert (
            await policy.sync_weights(
                method="update_weights_from_path", args=["/ckpt/step-9"], pause=False, version=20
            )
            == 20
        )
    assert vllm.paths() == [
        "/v1/chat/completions",
        "/pause?mode=keep",
        "/collective_rpc",
        "/resume",
        "/v1/chat/completions",
        "/collective_rpc",
    ]
    bodies = [body for path, body in vllm.calls if path == "/collective_rpc"]
    assert bodies == [
        {"method": "reload_weights", "args": [], "kwargs": {}},
        {"method": "update_weights_from_path", "args": ["/ckpt/step-9"], "kwargs": {}},
    ]
    assert server_root("http://h:8000/v1/") == "http://h:8000"


async def test_a_failed_sync_resumes_the_server_and_keeps_the_version(vllm):
    vllm.fail["/collective_rpc"] = 500
    async with OpenAIChatPolicy("tiny-model", base_url=vllm.url) as policy:
        with pytest.raises(WeightSyncError, match="HTTP 500"):
            await policy.sync_weights()
        assert policy.policy_version == 0
        vllm.fail["/pause"] = 404
        with pytest.raises(WeightSyncError, match="VLLM_SERVER_DEV_MODE=1"):
            await policy.sync_weights()
    assert vllm.paths() == ["/pause?mode=keep", "/collective_rpc", "/resume", "/pause?mode=keep"]


async def test_hf_policy_updated_in_process_mid_stream(make_task, tmp_path):
    """Two episodes of the tiny random model (three format errors each); the weights change
    while the second is in flight: its later turns carry the new version, and it finishes
    one version behind, so it is stale (kept and counted)."""
    pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM

    from palaestra.llm.local_hf import HFLocalPolicy, write_tiny_model

    model_dir = write_tiny_model(tmp_path / "tiny")
    state = AutoModelForCausalLM.from_pretrained(model_dir).state_dict()
    state = {k: v * 3 if k == "lm_head.weight" else v for k, v in state.items()}
    async with HFLocalPolicy(model_dir, default_max_tokens=8) as hf:
        gate = asyncio.Event()
        order: list[asyncio.Task] = []

        class Gated:
            """Holds the second episode's second turn until the weights are updated."""

            @property
            def policy_version(self) -> int:
                return hf.policy_version

            async def complete(self, request: LLMRequest) -> LLMResponse:
                task = asyncio.current_task()
                if task not in order:
                    order.append(task)
                if order.index(task) == 1 and request.metadata["turn"] == 1:
                    await gate.wait()
                return await hf.complete(request)

        stream = RolloutStream(
            str(make_task().parent), Gated(), concurrency=2, max_staleness=0, stale="keep"
        )
        episodes = []
        async with stream:
            async for episode in stream.episodes(draws=2):
                episodes.append(episode)
                if len(episodes) == 1:
                    assert await hf.load_weights(state) == 1
                    gate.set()
    assert [turn_versions(e) for e in episodes] == [[0, 0, 0], [0, 1, 1]]
    assert stream.stats.stale == 1 and stream.stats.dropped_stale == 0
