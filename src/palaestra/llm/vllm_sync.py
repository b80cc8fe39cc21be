"""Weight sync for a running vLLM OpenAI-compatible server: the trainer's hook.

After a training step the trainer writes the new weights where the server can read them and
asks the server to load them, without restarting it. vLLM serves this through its development
endpoints (the server must run with ``VLLM_SERVER_DEV_MODE=1``; they are not under ``/v1``):

* ``POST /pause?mode=keep``: stop scheduling; requests in flight are frozen, not aborted, and
  go on after ``/resume`` (so episodes in flight continue across the update, on the new
  weights from then on);
* ``POST /collective_rpc`` with ``{"method": ..., "args": [...], "kwargs": {...}}``: call that
  method on every worker. ``reload_weights`` is the worker's own reload (from the checkpoint
  path the server was started on); a worker extension (``--worker-extension-cls``) can offer
  another, for example one taking the new checkpoint's directory;
* ``POST /resume``.

Sources: vLLM's ``vllm/entrypoints/serve/dev/rpc/api_router.py`` (``/collective_rpc``, mounted
only when ``VLLM_SERVER_DEV_MODE`` is set) and ``vllm/entrypoints/serve/dev/rlhf/api_router.py``
(``/pause`` with ``mode`` ``abort | wait | keep``, ``/resume``); see docs/rl.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx


class WeightSyncError(RuntimeError):
    """The server refused or failed a weight-sync call."""


_HINT_404 = (
    "the server has no such endpoint: start vLLM with VLLM_SERVER_DEV_MODE=1 (its /pause, "
    "/resume and /collective_rpc endpoints exist only in development mode)"
)


def server_root(base_url: str) -> str:
    """``http://host:8000/v1/`` -> ``http://host:8000``: the dev endpoints are at the root."""
    root = base_url.rstrip("/")
    return root.removesuffix("/v1")


async def _post(
    http: httpx.AsyncClient, url: str, *, params: dict[str, str] | None = None, body: Any = None
) -> Any:
    try:
        response = await http.post(url, params=params, json=body)
    except httpx.TransportError as e:
        raise WeightSyncError(f"POST {url} failed: {type(e).__name__}: {e}") from e
    if response.status_code >= 300:
        hint = _HINT_404 if response.status_code == 404 else "see the server's log"
        raise WeightSyncError(
            f"POST {url} answered HTTP {response.status_code}: {response.text[:300]} ({hint})"
        )
    return response.json() if response.content else None


async def vllm_reload_weights(
    base_url: str,
    *,
    method: str = "reload_weights",
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    pause: bool = True,
    api_key: str | None = None,
    timeout: float = 600.0,
) -> Any:
    """Pause the server (``mode=keep``), run ``method`` on every worker, resume; returns what
    ``/collective_rpc`` returned. The server is resumed even when the reload fails."""
    root = server_root(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(timeout=timeout, headers=headers) as http:
        if pause:
            await _post(http, f"{root}/pause", params={"mode": "keep"})
        try:
            body = {"method": method, "args": list(args), "kwargs": kwargs or {}}
            return await _post(http, f"{root}/collective_rpc", body=body)
        finally:
            if pause:
                await _post(http, f"{root}/resume")
