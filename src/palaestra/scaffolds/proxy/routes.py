"""The proxy's LLM routes: OpenAI's chat completions and Responses, Anthropic's messages (each
answered whole or as a server-sent event stream), the model list and the health check."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from palaestra.llm.anthropic import (
    AnthropicFormatError,
    anthropic_request_to_llm,
    anthropic_stream_events,
    llm_response_to_anthropic,
)
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.scaffolds.proxy.episodes import EpisodeTable, ProxyEpisode, ProxyRequestError
from palaestra.scaffolds.proxy.openai_format import (
    llm_response_to_openai,
    openai_request_to_llm,
    openai_stream_chunks,
)
from palaestra.scaffolds.proxy.responses_input import ResponsesCall, responses_request_to_llm
from palaestra.scaffolds.proxy.responses_output import (
    new_id,
    output_items,
    response_object,
    responses_stream_events,
)

#: While the policy thinks, a stream sends an SSE comment this often so idle-read timeouts
#: of clients and middleboxes do not fire (clients ignore comment lines).
KEEPALIVE_S = 15.0


def error_response(
    status: int, message: str, code: str, kind: str = "invalid_request_error"
) -> Response:
    """An error in OpenAI's format."""
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": code}},
        status_code=status,
    )


def _anthropic_error(status: int, message: str, kind: str) -> Response:
    return JSONResponse(
        {"type": "error", "error": {"type": kind, "message": message}}, status_code=status
    )


async def read_json(request: Request) -> Any:
    """The request's body, parsed (a :class:`ProxyRequestError` when it is not JSON)."""
    try:
        return json.loads(await request.body())
    except ValueError as e:
        raise ProxyRequestError(f"the request body is not valid JSON: {e}") from None


class LLMRoutes:
    """The routes that serve ``episodes``' LLM calls; ``model_name`` is what ``/v1/models``
    lists and what responses name when a request names no model."""

    def __init__(self, episodes: EpisodeTable, model_name: str) -> None:
        self._episodes = episodes
        self.model_name = model_name

    def routes(self) -> list[Route]:
        routes = []
        for prefix in ("", "/e/{token}"):
            routes += [
                Route(f"{prefix}/v1/chat/completions", self._chat, methods=["POST"]),
                Route(f"{prefix}/v1/messages", self._messages, methods=["POST"]),
                Route(f"{prefix}/v1/responses", self._responses, methods=["POST"]),
                Route(f"{prefix}/v1/models", self._models, methods=["GET"]),
            ]
        return [*routes, Route("/health", self._health, methods=["GET"])]

    async def _health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "episodes": len(self._episodes)})

    async def _models(self, request: Request) -> Response:
        try:
            if "token" in request.path_params:
                self._episodes.for_request(request)
        except ProxyRequestError as e:
            return error_response(e.status, str(e), e.code)
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
            ep = self._episodes.for_request(request)
            body = await read_json(request)
            llm_request = openai_request_to_llm(body, {"api": "openai"})
        except ProxyRequestError as e:
            return error_response(e.status, str(e), e.code)
        model = body.get("model") or self.model_name
        if body.get("stream"):
            return self._stream(
                ep, llm_request, lambda r: _sse_openai(r, model, body), _openai_stream_error
            )
        try:
            response = await ep.complete(llm_request)
        except asyncio.CancelledError:
            if ep.token in self._episodes:
                raise
            return error_response(
                410, f"episode {ep.episode_id} ended during the call", "episode_ended"
            )
        except Exception as e:  # the policy failed: tell the harness, keep serving
            return error_response(
                500, f"the policy failed: {type(e).__name__}: {e}", "policy_error"
            )
        return JSONResponse(llm_response_to_openai(response, model, body))

    async def _messages(self, request: Request) -> Response:
        try:
            ep = self._episodes.for_request(request)
            body = await read_json(request)
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
            response = await ep.complete(llm_request)
        except asyncio.CancelledError:
            if ep.token in self._episodes:
                raise
            return _anthropic_error(410, f"episode {ep.episode_id} ended", "not_found_error")
        except Exception as e:
            return _anthropic_error(500, f"the policy failed: {type(e).__name__}: {e}", "api_error")
        return JSONResponse(llm_response_to_anthropic(response, model))

    async def _responses(self, request: Request) -> Response:
        try:
            ep = self._episodes.for_request(request)
            body = await read_json(request)
            previous = body.get("previous_response_id") if isinstance(body, dict) else None
            history = ep.responses.history(previous)
            call = responses_request_to_llm(body, history, ep.responses.custom_arguments)
        except ProxyRequestError as e:
            return error_response(e.status, str(e), e.code)
        model = body.get("model") or self.model_name
        response_id = new_id("resp")

        def answered(response: LLMResponse) -> list[dict[str, Any]]:
            items = output_items(response, call)
            _remember(ep, call, response, items, response_id, len(history))
            return items

        if body.get("stream"):

            def encode(response: LLMResponse) -> Iterator[str]:
                items = answered(response)
                for event in responses_stream_events(call, response, items, response_id, model):
                    yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"

            def encode_error(message: str) -> str:
                failed = response_object(call, response_id, model, error=message)
                event = {"type": "response.failed", "sequence_number": 0, "response": failed}
                return f"event: response.failed\ndata: {json.dumps(event)}\n\n"

            return self._stream(ep, call.request, encode, encode_error)
        try:
            response = await ep.complete(call.request)
        except asyncio.CancelledError:
            if ep.token in self._episodes:
                raise
            return error_response(
                410, f"episode {ep.episode_id} ended during the call", "episode_ended"
            )
        except Exception as e:
            return error_response(
                500, f"the policy failed: {type(e).__name__}: {e}", "server_error", "server_error"
            )
        items = answered(response)
        return JSONResponse(
            response_object(call, response_id, model, response=response, items=items)
        )

    def _stream(
        self,
        ep: ProxyEpisode,
        llm_request: LLMRequest,
        encode: Callable[[LLMResponse], Iterator[str]],
        encode_error: Callable[[str], str],
    ) -> StreamingResponse:
        async def events() -> AsyncIterator[str]:
            call = asyncio.ensure_future(ep.complete(llm_request))
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


def _remember(
    ep: ProxyEpisode,
    call: ResponsesCall,
    response: LLMResponse,
    items: list[dict[str, Any]],
    response_id: str,
    n_history: int,
) -> None:
    """Keep what later calls of the episode may need: the response's items unless the request
    said ``store: false``, and the arguments of its custom tool calls."""
    if call.body.get("store") is not False:
        previous = call.body.get("previous_response_id")
        ep.responses.keep(response_id, previous, call.items[n_history:], items)
    calls = [i for i in items if i["type"] in ("function_call", "custom_tool_call")]
    for item, tc in zip(calls, response.tool_calls, strict=True):
        if item["type"] == "custom_tool_call":
            ep.responses.custom_arguments[item["call_id"]] = tc.arguments
