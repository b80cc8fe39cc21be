"""A quick check, before any episode, that an OpenAI-compatible endpoint answers.

``openai:<model>`` reads its server from ``OPENAI_BASE_URL`` and its key from
``OPENAI_API_KEY``; the client retries a connection error for many seconds per request, so a
run with no server would spend that on every episode. :func:`check_openai_endpoint` asks the
server once for ``/models`` with a short timeout and names both variables when it fails.
It blocks: call it before the event loop starts (the command line does).
"""

from __future__ import annotations

import os

import httpx

#: The public endpoint the openai client uses when ``OPENAI_BASE_URL`` is not set.
DEFAULT_BASE_URL = "https://api.openai.com/v1"


class EndpointError(ValueError):
    """The endpoint cannot be used: not configured, not reachable, or refusing the key."""


def check_openai_endpoint(
    base_url: str | None = None, api_key: str | None = None, *, timeout_s: float = 1.5
) -> str:
    """The base URL, once ``GET {base_url}/models`` got an answer within ``timeout_s``.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``. Raises
    :class:`EndpointError` when neither is set, when the server cannot be reached (refused,
    unknown host, no answer in time) or when it refuses the key (HTTP 401 or 403). Any other
    answer counts as reachable: some servers have no ``/models``.
    """
    base_url = base_url or os.environ.get("OPENAI_BASE_URL")
    api_key = api_key or os.environ.get("OPENAI_API_KEY")
    if not base_url and not api_key:
        raise EndpointError(
            "openai:<model> needs a server: set OPENAI_BASE_URL to an OpenAI-compatible one "
            "(e.g. http://localhost:8000/v1 for vLLM), or OPENAI_API_KEY for api.openai.com"
        )
    base = (base_url or DEFAULT_BASE_URL).rstrip("/")
    source = "OPENAI_BASE_URL" if base_url else "the default, api.openai.com"
    try:
        answer = httpx.get(
            f"{base}/models",
            headers={"Authorization": f"Bearer {api_key or 'EMPTY'}"},
            timeout=timeout_s,
        )
    except httpx.HTTPError as e:
        reason = str(e) or type(e).__name__
        raise EndpointError(
            f"cannot reach {base} ({source}) within {timeout_s:g} s: {reason}; start the "
            "server or set OPENAI_BASE_URL / OPENAI_API_KEY"
        ) from None
    if answer.status_code in (401, 403):
        raise EndpointError(
            f"{base} refused the API key (HTTP {answer.status_code}): set OPENAI_API_KEY to a "
            "key it accepts (OPENAI_BASE_URL picks the server)"
        )
    return base
