"""A task's ``sse`` / ``streamable-http`` MCP server, reached from the host (the trainer's
process), as the SDK's transport.

The server is the task author's, so its answers are bounded before they reach the SDK: a
response body that is not an event stream (a JSON answer, an error page) is read into memory
whole by the SDK, so :class:`CappedTransport` ends it with an error past
:data:`~palaestra.scaffolds.mcp_stdio.MAX_MESSAGE_BYTES` (event streams are held to 1 MiB an
event by the SDK itself). A streamable-http client never opens the server-initiated event
stream (a ``GET``: answered 405, "no stream", without reaching the server): it needs no message
the server did not answer a request with, and the SDK reconnected that stream after whatever
delay the server chose (``retry: 0``), for the whole episode. The task's headers carry only
the host variables allowed by
:mod:`palaestra.scaffolds.mcp_headers`. Redirects are the SDK's: followed only within the
url's origin.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from palaestra.scaffolds.mcp_headers import resolve_headers
from palaestra.scaffolds.mcp_stdio import MAX_MESSAGE_BYTES
from palaestra.tasks.config import MCPServerConfig


class ResponseTooLarge(httpx2.StreamError):
    """A server's response body went past the limit (the SDK answers the request with an
    error)."""


class _CappedBody(httpx2.AsyncByteStream):
    def __init__(self, body: httpx2.AsyncByteStream, limit: int) -> None:
        self.body = body
        self.limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self.body:
            read += len(chunk)
            if read > self.limit:
                raise ResponseTooLarge(f"the server's answer is over {self.limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.body.aclose()


class CappedTransport(httpx2.AsyncBaseTransport):
    """The default transport, each response body that is not an event stream held to
    ``limit`` bytes; unless ``gets``, a ``GET`` is answered 405 here."""

    def __init__(self, limit: int = MAX_MESSAGE_BYTES, *, gets: bool = True) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.limit = limit
        self.gets = gets

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET" and not self.gets:
            return httpx2.Response(405, request=request)
        response = await self.inner.handle_async_request(request)
        kind = response.headers.get("content-type", "").lower()
        if not kind.startswith("text/event-stream"):
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _CappedBody(response.stream, self.limit)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
    *,
    gets: bool = True,
) -> httpx2.AsyncClient:
    """An http client as the SDK makes one (its timeouts), on a :class:`CappedTransport`."""
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout or httpx2.Timeout(30.0, read=300.0),
        auth=auth,
        transport=CappedTransport(gets=gets),
    )


async def http_transport(server: MCPServerConfig, stack: AsyncExitStack) -> Any:
    """The SDK's transport to ``server``'s url (its client closed with ``stack``)."""
    assert server.url is not None
    headers = resolve_headers(server)
    if server.transport == "sse":
        return sse_client(server.url, headers=headers, httpx_client_factory=http_client)
    client = await stack.enter_async_context(http_client(headers, gets=False))  # left open
    return streamable_http_client(server.url, http_client=client)
