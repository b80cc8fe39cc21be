"""An OpenAI-compatible HTTP proxy that turns an outside harness's LLM calls into observations.

Each episode registers an :class:`LLMClient` (inside :class:`~palaestra.env.CodeEnv`, the
queue-mediated client) and gets a secret token. A harness reaches its episode either through
the URL path (base URL ``http://127.0.0.1:<port>/e/<token>/v1``) or through the API key
(``Authorization: Bearer <token>`` or Anthropic's ``x-api-key``) on the plain ``/v1`` routes.
Every ``/v1/chat/completions`` (or ``/v1/responses``, or ``/v1/messages``) call becomes one
:class:`LLMRequest`; the client's :class:`LLMResponse` goes back as the completion (or the
``response``), streamed in OpenAI's (or Anthropic's) exact event format when the harness asks
for a stream. The responses, with their token ids and logprobs, are kept in
:attr:`ProxyEpisode.calls` for the RL trajectory.

Routes: ``POST /v1/chat/completions``, ``POST /v1/responses``, ``POST /v1/messages``,
``GET /v1/models``, ``GET /health``; each ``/v1`` route also under ``/e/<token>/v1``. ``POST /e/<token>/exec``
runs a command in the episode's sandbox, for host-side harnesses whose tool execution goes
through palaestra (see :mod:`palaestra.scaffolds.external`); it exists only for episodes
registered with a sandbox.

The server is uvicorn running in the caller's event loop (no threads), on 127.0.0.1 and a free
port, optionally also on a unix socket (which sandboxes reach through a bind mount).

The parts: :mod:`.episodes` (each episode's state and the routing of a call to it by token),
:mod:`.openai_format` (OpenAI's chat-completions wire format), :mod:`.responses_input` and
:mod:`.responses_output` (OpenAI's Responses API: a request's items as chat messages; the
``response`` object and its stream events), :mod:`.routes` (the LLM routes and their streams),
:mod:`.exec` (the exec route) and :mod:`.server` (:class:`ProxyServer`: the app, the sockets,
start and stop).
"""

from palaestra.scaffolds.proxy.episodes import ProxyEpisode, ProxyRequestError
from palaestra.scaffolds.proxy.openai_format import (
    llm_response_to_openai,
    openai_request_to_llm,
    openai_stream_chunks,
)
from palaestra.scaffolds.proxy.responses_input import responses_request_to_llm
from palaestra.scaffolds.proxy.server import DEFAULT_MODEL, ProxyServer

__all__ = [
    "DEFAULT_MODEL",
    "ProxyEpisode",
    "ProxyRequestError",
    "ProxyServer",
    "llm_response_to_openai",
    "openai_request_to_llm",
    "openai_stream_chunks",
    "responses_request_to_llm",
]
