"""The exec route, ``POST /e/<token>/exec``: runs a command in the episode's sandbox, for
host-side harnesses whose tool execution goes through palaestra (the external scaffold with
``where="host"``). Only episodes registered with a sandbox have it."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from palaestra.scaffolds.proxy.episodes import EpisodeTable, ProxyRequestError
from palaestra.scaffolds.proxy.routes import error_response, read_json


def exec_route(episodes: EpisodeTable) -> Route:
    """The route; its body is ``{"command": ..., "timeout"?, "cwd"?, "env"?}``, its answer the
    command's output, exit code and timing. Each exec is recorded in the episode's ``calls``."""

    async def run(request: Request) -> Response:
        try:
            ep = episodes.for_request(request)
            if ep.sandbox is None:
                raise ProxyRequestError(
                    f"episode {ep.episode_id} has no sandbox to run commands in (exec is for "
                    "host-side harnesses of the external scaffold with where='host')",
                    status=404,
                    code="no_sandbox",
                )
            body = await read_json(request)
            if not isinstance(body, dict) or not isinstance(body.get("command"), str):
                raise ProxyRequestError("exec needs a JSON object with a string 'command'")
        except ProxyRequestError as e:
            return error_response(e.status, str(e), e.code)
        timeout = body.get("timeout")
        call = ep.sandbox.exec(
            body["command"],
            timeout=float(timeout) if timeout is not None else None,
            cwd=body.get("cwd") or None,
            env={str(k): str(v) for k, v in (body.get("env") or {}).items()},
        )
        try:
            result = await ep.track(call)
        except asyncio.CancelledError:
            if ep.token in episodes:
                raise
            return error_response(410, f"episode {ep.episode_id} ended", "episode_ended")
        except Exception as e:
            return error_response(500, f"exec failed: {type(e).__name__}: {e}", "sandbox_error")
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

    return Route("/e/{token}/exec", run, methods=["POST"])
