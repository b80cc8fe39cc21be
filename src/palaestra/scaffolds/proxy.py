"""An OpenAI-compatible HTTP proxy that turns an outside harness's LLM calls into observations.

Each episode registers an :class:`LLMClient` (inside :class:`~palaestra.env.CodeEnv`, the
queue-mediated client) and gets a secret token. A harness reaches its episode either through
the URL path (base URL ``http://127.0.0.1:<port>/e/<token>/v1``) or through the API key
(``Authorization: Bearer <token>`` or Anthropic's ``x-api-key``) on the plain ``/v1`` routes.
Every ``/v1/chat/completions`` (or ``/v1/messages``) call becomes one :class:`LLMRequest`; the
client's :class:`LLMResponse` goes back as the completion, streamed in OpenAI's (or
Anthropic's) exact event format when the harness asks for a stream. The responses, with their
token ids and logprobs, are kept in :attr:`ProxyEpisode.calls` for the RL trajectory.

Routes: ``POST /v1/chat/completions``, ``POST /v1/messages``, ``GET /v1/models``,
``GET /health``; each ``/v1`` route also under ``/e/<token>/v1``. ``POST /e/<token>/exec``
runs a command in the episode's sandbox, for host-side harnesses whose tool execution goes
through palaestra (see :mod:`palaestra.scaffolds.external`); it exists only for episodes
registered with a sandbox.

The server is uvicorn running in the caller's event loop (no threads), on 127.0.0.1 and a free
port, optionally also on a unix socket (which sandboxes reach through a bind mount).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import socket
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from palaestra.llm.anthropic import (
    AnthropicFormatError,
    anthropic_request_to_llm,
    anthropic_stream_events,
    llm_response_to_anthropic,
)
from palaestra.llm.types import LLMRequest, LLMResponse, SamplingParams

if TYPE_CHECKING:
    from palaestra.llm.client import LLMClient
    from palaestra.sandbox.base import Sandbox

DEFAULT_MODEL = "palaestra-policy"
#: While the policy thinks, a stream sends an SSE comment this often so idle-read timeouts
#: of clients and middleboxes do not fire (clients ignore comment lines).
KEEPALIVE_S = 15.0
_ENDED_MEMORY = 10_000
_SAMPLING_KEYS = ("temperature", "top_p", "seed")


class ProxyRequestError(ValueError):
    """A request the proxy cannot serve; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, *, status: int = 400, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass
class ProxyEpisode:
    """One episode served by the proxy. ``calls`` records each call's response for the
    trajectory (content, tool calls, usage, token ids, logprobs) and each exec."""

    token: str
    episode_id: str
    client: LLMClient
    metadata: dict[str, Any]
    sandbox: Sandbox | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    last_activity: float = field(default_factory=time.monotonic)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _inflight: set[asyncio.Future[Any]] = field(default_factory=set)

    @property
    def busy(self) -> bool:
        """True while a call or an exec of this episode is being served."""
        return self._lock.locked() or bool(self._inflight)


# -- OpenAI format -----------------------------------------------------------------------------


def openai_request_to_llm(body: Any, metadata: dict[str, Any] | None = None) -> LLMRequest:
    """A chat-completions request body as an :class:`LLMRequest` (one choice only)."""
    if not isinstance(body, dict):
        raise ProxyRequestError("the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ProxyRequestError("'messages' must be a non-empty list of chat messages")
    if any(not isinstance(m, dict) or "role" not in m for m in messages):
        raise ProxyRequestError("every message must be an object with a 'role'")
    if body.get("n", 1) not in (1, None):
        raise ProxyRequestError("the proxy serves one choice per call; drop 'n' or set it to 1")
    tools = body.get("tools") or None
    if tools is not None and not isinstance(tools, list):
        raise ProxyRequestError("'tools' must be a list of function specs")
    sampling: dict[str, Any] = {k: body[k] for k in _SAMPLING_KEYS if body.get(k) is not None}
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    if max_tokens is not None:
        sampling["max_tokens"] = max_tokens
    stop = body.get("stop")
    if stop is not None:
        sampling["stop"] = [stop] if isinstance(stop, str) else list(stop)
    for key in (
        "tool_choice",
        "parallel_tool_calls",
        "frequency_penalty",
        "presence_penalty",
        "response_format",
        "reasoning_effort",
        "top_k",
    ):
        if body.get(key) is not None:
            sampling[key] = body[key]
    meta = dict(metadata or {})
    if isinstance(body.get("model"), str):
        meta["requested_model"] = body["model"]
    return LLMRequest(
        messages=messages, tools=tools, sampling=SamplingParams(**sampling), metadata=meta
    )


def _finish_reason(response: LLMResponse) -> str:
    return "stop" if response.finish_reason == "error" else response.finish_reason


def _usage(response: LLMResponse) -> dict[str, Any]:
    u = response.usage
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
    }


def _logprobs(response: LLMResponse) -> dict[str, Any] | None:
    """OpenAI's ``logprobs.content``; tokens are named ``token_id:<id>`` as vLLM does when it
    knows ids but no strings (the policy returns ids and logprobs, not token texts)."""
    if response.logprobs is None:
        return None
    ids = response.completion_token_ids or []
    return {
        "content": [
            {
                "token": f"token_id:{ids[i]}" if i < len(ids) else "",
                "logprob": lp,
                "bytes": None,
                "top_logprobs": [],
            }
            for i, lp in enumerate(response.logprobs)
        ],
        "refusal": None,
    }


def _tool_calls(response: LLMResponse) -> list[dict[str, Any]]:
    return [
        {**tc.to_openai(), "id": tc.id or f"call_{secrets.token_hex(8)}"}
        for tc in response.tool_calls
    ]


def llm_response_to_openai(
    response: LLMResponse, model: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ``chat.completion`` object. With ``logprobs`` in the request, per-token logprobs;
    with vLLM's ``return_token_ids``, ``prompt_token_ids`` and the choice's ``token_ids``."""
    body = body or {}
    message: dict[str, Any] = {"role": "assistant", "content": response.content, "refusal": None}
    if response.tool_calls:
        message["tool_calls"] = _tool_calls(response)
    choice: dict[str, Any] = {
        "index": 0,
        "message": message,
        "logprobs": _logprobs(response) if body.get("logprobs") else None,
        "finish_reason": _finish_reason(response),
    }
    out: dict[str, Any] = {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": _usage(response),
    }
    if body.get("return_token_ids"):
        out["prompt_token_ids"] = response.prompt_token_ids
        choice["token_ids"] = response.completion_token_ids
    return out


def openai_stream_chunks(
    response: LLMResponse, model: str, body: dict[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed response, in OpenAI's order: the
    role, the content, one delta per tool call (id, name, then arguments), the finish reason,
    and with ``stream_options.include_usage`` a last chunk with empty choices and the usage."""
    body = body or {}
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    base: dict[str, Any] = {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> dict:
        c = {
            **base,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
            ],
        }
        if include_usage:
            c["usage"] = None
        return c

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    if response.content:
        logprobs = _logprobs(response) if body.get("logprobs") else None
        yield chunk({"content": response.content}, logprobs=logprobs)
    for index, tc in enumerate(_tool_calls(response)):
        fn = tc["function"]
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": tc["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": ""},
                    }
                ]
            }
        )
        if fn["arguments"]:
            yield chunk(
                {"tool_calls": [{"index": index, "function": {"arguments": fn["arguments"]}}]}
            )
    yield chunk({}, finish=_finish_reason(response))
    if include_usage:
        yield {**base, "choices": [], "usage": _usage(response)}


# -- the server --------------------------------------------------------------------------------


def _error(status: int, message: str, code: str, kind: str = "invalid_request_error") -> Response:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": code}},
        status_code=status,
    )


def _anthropic_error(status: int, message: str, kind: str) -> Response:
    return JSONResponse(
        {"type": "error", "error": {"type": kind, "message": message}}, status_code=status
    )


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: in-process, Ctrl-C belongs to the host program."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ProxyServer:
    """The proxy; see the module docstring. Use ``async with ProxyServer() as proxy:``.

    ``port=0`` picks a free port. ``unix_socket``: also listen on this path (mode 0666), so a
    sandbox that binds its directory can reach the proxy without a network.
    ``model_name`` is what ``/v1/models`` lists.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        unix_socket: Path | str | None = None,
        model_name: str = DEFAULT_MODEL,
    ) -> None:
        self.host = host
        self.port = port
        self.unix_socket = Path(unix_socket) if unix_socket is not None else None
        self.model_name = model_name
        self._episodes: dict[str, ProxyEpisode] = {}
        self._ended: OrderedDict[str, str] = OrderedDict()
        self._server: _Server | None = None
        self._serve_task: asyncio.Task[None] | None = None
        self.app = self._build_app()

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._serve_task is not None and not self._serve_task.done()

    @property
    def base_url(self) -> str:
        """``http://host:port`` (no ``/v1``)."""
        if not self.started:
            raise RuntimeError("the proxy is not running: call start() or use `async with`")
        return f"http://{self.host}:{self.port}"

    async def start(self) -> ProxyServer:
        if self._serve_task is not None:
            raise RuntimeError("the proxy was already started")
        sockets = [self._tcp_socket()]
        if self.unix_socket is not None:
            sockets.append(self._unix_socket(self.unix_socket))
        config = uvicorn.Config(
            self.app,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=5,
            timeout_keep_alive=30,
            log_level="warning",
        )
        self._server = _Server(config)
        self._serve_task = asyncio.create_task(self._server.serve(sockets=sockets))
        while not self._server.started:
            if self._serve_task.done():
                await self._serve_task  # raises the startup error
                raise RuntimeError("the proxy server exited during startup")
            await asyncio.sleep(0.005)
        return self

    def _tcp_socket(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it. Without it a response written in two parts (h11
        # writes headers, then body) waits for the client's delayed ACK: ~40 ms per call.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        sock.set_inheritable(True)
        return sock

    @staticmethod
    def _unix_socket(path: Path) -> socket.socket:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        os.chmod(path, 0o666)
        return sock

    async def stop(self) -> None:
        """End every episode's pending calls, close connections, stop serving. Idempotent."""
        if self._serve_task is None or self._server is None:
            return
        for token in list(self._episodes):
            self.unregister(token)
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self._serve_task
        self._serve_task = None
        if self.unix_socket is not None:
            with contextlib.suppress(FileNotFoundError):
                self.unix_socket.unlink()

    async def __aenter__(self) -> ProxyServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- episodes ----------------------------------------------------------------------------

    def register(
        self,
        client: LLMClient,
        *,
        episode_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        sandbox: Sandbox | None = None,
        token: str | None = None,
    ) -> ProxyEpisode:
        """Serve a new episode from ``client``. ``metadata`` is merged into every request (the
        proxy adds ``turn``, the call's index); ``sandbox`` enables the exec route. ``token``
        fixes the episode's token (default: the episode id and a random secret, so a harness
        cannot guess another episode's)."""
        episode_id = episode_id or secrets.token_hex(8)
        token = token or f"{episode_id}-{secrets.token_hex(12)}"
        if token in self._episodes:
            raise ValueError(f"an episode with token {token!r} is already registered")
        ep = ProxyEpisode(
            token=token,
            episode_id=episode_id,
            client=client,
            metadata=dict(metadata or {}),
            sandbox=sandbox,
        )
        self._episodes[token] = ep
        return ep

    def unregister(self, token: str) -> None:
        """End an episode: later calls get 404, calls still waiting for the policy get 410."""
        ep = self._episodes.pop(token, None)
        if ep is None:
            return
        for task in ep._inflight:
            task.cancel()
        self._ended[token] = ep.episode_id
        while len(self._ended) > _ENDED_MEMORY:
            self._ended.popitem(last=False)

    def url_for(self, ep: ProxyEpisode) -> str:
        """The OpenAI base URL of one episode (token in the path)."""
        return f"{self.base_url}/e/{ep.token}/v1"

    @property
    def episodes(self) -> int:
        return len(self._episodes)

    # -- routing -----------------------------------------------------------------------------

    def _build_app(self) -> Starlette:
        routes = []
        for prefix in ("", "/e/{token}"):
            routes += [
                Route(f"{prefix}/v1/chat/completions", self._chat, methods=["POST"]),
                Route(f"{prefix}/v1/messages", self._messages, methods=["POST"]),
                Route(f"{prefix}/v1/models", self._models, methods=["GET"]),
            ]
        routes += [
            Route("/e/{token}/exec", self._exec, methods=["POST"]),
            Route("/health", self._health, methods=["GET"]),
        ]
        return Starlette(routes=routes)

    def _episode(self, request: Request) -> ProxyEpisode:
        token = request.path_params.get("token")
        in_path = token is not None
        if token is None:
            auth = request.headers.get("authorization", "")
            token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
            token = token or request.headers.get("x-api-key")
        if not token:
            raise ProxyRequestError(
                "no episode given: use the base URL /e/<episode token>/v1, or send the episode "
                "token as the API key (Authorization: Bearer <token>)",
                status=401,
                code="missing_episode",
            )
        ep = self._episodes.get(token)
        if ep is not None:
            return ep
        if token in self._ended:
            raise ProxyRequestError(
                f"episode {self._ended[token]} has ended; start a new episode for a new token",
                status=404,
                code="episode_ended",
            )
        raise ProxyRequestError(
            "unknown episode token: no episode with this token is running on this proxy "
            "(check the base URL or API key the harness was given)",
            status=404 if in_path else 401,
            code="episode_not_found" if in_path else "invalid_api_key",
        )

    async def _json(self, request: Request) -> Any:
        try:
            return json.loads(await request.body())
        except ValueError as e:
            raise ProxyRequestError(f"the request body is not valid JSON: {e}") from None

    async def _complete(self, ep: ProxyEpisode, llm_request: LLMRequest) -> LLMResponse:
        """One call through the episode's client, one at a time per episode (a mediated client
        serves one outstanding request; harnesses that call in parallel are queued)."""
        async with ep._lock:
            turn = ep.turns
            ep.turns += 1
            llm_request = llm_request.model_copy(
                update={"metadata": {**llm_request.metadata, **ep.metadata, "turn": turn}}
            )
            task = asyncio.ensure_future(ep.client.complete(llm_request))
            ep._inflight.add(task)
            try:
                response = await task
            finally:
                ep._inflight.discard(task)
                ep.last_activity = time.monotonic()
            ep.calls.append(
                {
                    "turn": turn,
                    "kind": "llm",
                    "n_messages": len(llm_request.messages),
                    "response": response.model_dump(exclude_none=True),
                }
            )
            return response

    async def _health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "episodes": len(self._episodes)})

    async def _models(self, request: Request) -> Response:
        try:
            if "token" in request.path_params:
                self._episode(request)
        except ProxyRequestError as e:
            return _error(e.status, str(e), e.code)
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.model_name,
                        "object": "model",
                        "created": 0,
                        "owned_by": "palaestra",
                    }
                ],
            }
        )

    async def _chat(self, request: Request) -> Response:
        try:
            ep = self._episode(request)
            body = await self._json(request)
            llm_request = openai_request_to_llm(body, {"api": "openai"})
        except ProxyRequestError as e:
            return _error(e.status, str(e), e.code)
        model = body.get("model") or self.model_name
        if body.get("stream"):
            return self._stream(
                ep, llm_request, lambda r: _sse_openai(r, model, body), _openai_stream_error
            )
        try:
            response = await self._complete(ep, llm_request)
        except asyncio.CancelledError:
            if ep.token in self._episodes:
                raise
            return _error(410, f"episode {ep.episode_id} ended during the call", "episode_ended")
        except Exception as e:  # the policy failed: tell the harness, keep serving
            return _error(500, f"the policy failed: {type(e).__name__}: {e}", "policy_error")
        return JSONResponse(llm_response_to_openai(response, model, body))

    async def _messages(self, request: Request) -> Response:
        try:
            ep = self._episode(request)
            body = await self._json(request)
            llm_request = anthropic_request_to_llm(body)
        except ProxyRequestError as e:
            kind = "authentication_error" if e.status == 401 else "invalid_request_error"
            return _anthropic_error(
                e.status, str(e), "not_found_error" if e.status == 404 else kind
            )
        except AnthropicFormatError as e:
            return _anthropic_error(400, str(e), "invalid_request_error")
        llm_request.metadata["api"] = "anthropic"
        model = body.get("model") or self.model_name
        if body.get("stream"):
            return self._stream(
                ep, llm_request, lambda r: _sse_anthropic(r, model), _anthropic_stream_error
            )
        try:
            response = await self._complete(ep, llm_request)
        except asyncio.CancelledError:
            if ep.token in self._episodes:
                raise
            return _anthropic_error(410, f"episode {ep.episode_id} ended", "not_found_error")
        except Exception as e:
            return _anthropic_error(500, f"the policy failed: {type(e).__name__}: {e}", "api_error")
        return JSONResponse(llm_response_to_anthropic(response, model))

    def _stream(
        self,
        ep: ProxyEpisode,
        llm_request: LLMRequest,
        encode: Callable[[LLMResponse], Iterator[str]],
        encode_error: Callable[[str], str],
    ) -> StreamingResponse:
        async def events() -> AsyncIterator[str]:
            call = asyncio.ensure_future(self._complete(ep, llm_request))
            try:
                while True:
                    done, _ = await asyncio.wait({call}, timeout=KEEPALIVE_S)
                    if done:
                        break
                    yield ": keep-alive\n\n"
                response = call.result()
            except asyncio.CancelledError:
                if not call.done():
                    call.cancel()
                    raise
                yield encode_error(f"episode {ep.episode_id} ended during the call")
                return
            except Exception as e:
                yield encode_error(f"the policy failed: {type(e).__name__}: {e}")
                return
            for event in encode(response):
                yield event

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _exec(self, request: Request) -> Response:
        try:
            ep = self._episode(request)
            if ep.sandbox is None:
                raise ProxyRequestError(
                    f"episode {ep.episode_id} has no sandbox to run commands in (exec is for "
                    "host-side harnesses of the external scaffold with where='host')",
                    status=404,
                    code="no_sandbox",
                )
            body = await self._json(request)
            if not isinstance(body, dict) or not isinstance(body.get("command"), str):
                raise ProxyRequestError("exec needs a JSON object with a string 'command'")
        except ProxyRequestError as e:
            return _error(e.status, str(e), e.code)
        timeout = body.get("timeout")
        task = asyncio.ensure_future(
            ep.sandbox.exec(
                body["command"],
                timeout=float(timeout) if timeout is not None else None,
                cwd=body.get("cwd") or None,
                env={str(k): str(v) for k, v in (body.get("env") or {}).items()},
            )
        )
        ep._inflight.add(task)
        try:
            result = await task
        except asyncio.CancelledError:
            if ep.token in self._episodes:
                raise
            return _error(410, f"episode {ep.episode_id} ended", "episode_ended")
        except Exception as e:
            return _error(500, f"exec failed: {type(e).__name__}: {e}", "sandbox_error")
        finally:
            ep._inflight.discard(task)
            ep.last_activity = time.monotonic()
        ep.calls.append(
            {
                "kind": "exec",
                "command": body["command"],
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "duration_s": result.duration_s,
            }
        )
        return JSONResponse(
            {
                "stdout": result.stdout,
                "stderr": result.stderr,
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "truncated": result.truncated,
                "duration_s": result.duration_s,
            }
        )


def _sse_openai(response: LLMResponse, model: str, body: dict[str, Any]) -> Iterator[str]:
    for chunk in openai_stream_chunks(response, model, body):
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


def _openai_stream_error(message: str) -> str:
    return f"data: {json.dumps({'error': {'message': message, 'type': 'server_error'}})}\n\n"


def _sse_anthropic(response: LLMResponse, model: str) -> Iterator[str]:
    for event in anthropic_stream_events(response, model):
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"


def _anthropic_stream_error(message: str) -> str:
    payload = {"type": "error", "error": {"type": "api_error", "message": message}}
    return f"event: error\ndata: {json.dumps(payload)}\n\n"
