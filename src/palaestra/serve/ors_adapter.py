"""ORS, the Open Reward Standard (``ors-sdk``): a palaestra environment behind ORS's own server.

An ORS environment is a class with tasks in splits and tools; a client session is one task:
``/create`` (``task_spec``, or ``split`` + ``index``), the ``prompt``, ``call``\\ s of tools
that each return blocks, a ``reward`` and ``finished``, then ``/delete``. The mapping:

- one split, ``train``: the env id's tasks in order, each ``{"task_id": ..., "index": i}``;
  a ``task_spec`` may add ``"seed"``. A session is one episode (reset at ``/create``).
- the prompt: the FIRST observation's messages, one text block each (``detail``: its role);
  the first block's ``detail["observation"]`` is the whole LLMRequest (messages, tools,
  sampling, metadata).
- tools: ``respond`` takes an :class:`~palaestra.llm.types.LLMResponse` (``content``,
  ``tool_calls``, token ids, logprobs, ...), the action of every palaestra env, a text answer
  of the bash scaffold included; and each function tool the observation offers (a tool env's,
  the ``tools`` scaffold's) is an ORS task tool too: calling it is a response with that one
  tool call.
- a call's output: the messages the action brought back, one block each; ``reward`` (0.0 until
  LAST, then the verifier's), ``finished`` (LAST); ``metadata``: ``observation`` (the next
  LLMRequest), ``step_type``, ``discount``, ``terminated``, ``truncated``, ``end``, ``info``.

Errors are ORS's: a wrong tool or action is a ``RunToolError`` (the client's
``ToolCallError``); a full server answers ``/create`` with HTTP 503 (``max_sessions``); a
session closed for idling is gone (404/410, the client's session ends).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import re
from collections.abc import Hashable
from typing import Any

os.environ.setdefault("ORS_LOG_LEVEL", "WARNING")  # ORS logs every request at INFO to stdout

import ors.server  # noqa: E402
from ors import Environment, ListToolsOutput, Split, TextBlock, ToolOutput, ToolSpec, tool  # noqa: E402
from ors.types import RunToolError, RunToolOutput, RunToolSuccess  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402
from starlette.types import ASGIApp, Message, Receive, Scope, Send  # noqa: E402

from palaestra.env.types import EpisodeError, TimeStep  # noqa: E402
from palaestra.llm.types import LLMRequest, LLMResponse, ToolCall, message_text  # noqa: E402
from palaestra.serve import Served  # noqa: E402
from palaestra.serve.sessions import AtCapacity, SessionClosed, Sessions  # noqa: E402
from palaestra.serve.wire import new_messages, request_json, step_fields  # noqa: E402

SPLIT = "train"
#: The session id of the request being served (ORS's ``X-Session-ID``); an environment made
#: by ``/create`` reads it in ``setup``, which runs in a task started from that request.
_SID: contextvars.ContextVar[str | None] = contextvars.ContextVar("ors_sid", default=None)


def _blocks(messages: list[dict[str, Any]]) -> list[TextBlock]:
    return [
        TextBlock(text=message_text(m), detail={k: v for k, v in m.items() if k != "content"})
        for m in messages
    ]


def _output(ts: TimeStep[LLMRequest]) -> ToolOutput:
    blocks = _blocks(new_messages(ts.observation))
    if ts.last() and ts.end is not None:
        blocks.append(TextBlock(text=f"episode over: {ts.end.status}, reward {ts.reward}"))
    return ToolOutput(
        blocks=blocks or [TextBlock(text="")],
        metadata={"observation": request_json(ts.observation), **step_fields(ts)},
        reward=ts.reward,
        finished=ts.last(),
    )


def _error(message: str) -> RunToolOutput:
    return RunToolOutput(RunToolError(error=message))


def environment_class(name: str, task_ids: list[str], sessions: Sessions) -> type[Environment]:
    """The ORS environment class serving ``task_ids`` as ``name``, its episodes in
    ``sessions``."""

    class Served(Environment):
        def __init__(self, task_spec: Any = None, secrets: Any = None) -> None:
            super().__init__(task_spec or {}, secrets or {})
            self._sid = _SID.get()
            self._ts: TimeStep[LLMRequest] | None = None
            self._lock = asyncio.Lock()
            self._calls = 0

        @classmethod
        def name(cls) -> str:
            return name

        @classmethod
        def list_splits(cls) -> list[Split]:
            return [Split(name=SPLIT, type="train")]

        @classmethod
        def list_tasks(cls, split: str) -> list[dict[str, Any]]:
            return [{"task_id": t, "index": i} for i, t in enumerate(task_ids)]

        @classmethod
        async def num_tasks(cls, split: str) -> int:
            return len(task_ids)

        @classmethod
        async def get_task(cls, split: str, index: int) -> dict[str, Any]:
            if not 0 <= index < len(task_ids):
                raise IndexError(index)
            return {"task_id": task_ids[index], "index": index}

        async def setup(self) -> None:
            spec = dict(self.task_spec)
            task_id, seed = spec.get("task_id"), spec.get("seed")
            if not isinstance(task_id, str) or not (seed is None or isinstance(seed, int)):
                raise ValueError(
                    'a task_spec is {"task_id": <a task id of the split>, "seed": <int, '
                    f"optional>}}, got {spec!r}"
                )
            if self._sid is None:
                raise SessionClosed("no session id: /create needs the X-Session-ID header")
            async with sessions.busy(self._sid) as env:
                self._ts = await env.reset(seed=seed, options={"task_id": task_id})

        async def teardown(self) -> None:
            if self._sid is not None:
                await sessions.release(self._sid, "the client deleted it")

        def _observation(self) -> LLMRequest | None:
            return None if self._ts is None else self._ts.observation

        async def get_prompt(self) -> list[TextBlock]:
            sessions.touch(self._sid)
            request = self._observation()
            blocks = _blocks(request.messages if request is not None else [])
            if blocks:
                blocks[0].detail = {
                    **(blocks[0].detail or {}),
                    "observation": request_json(request),
                }
            return blocks

        def _function_tools(self) -> dict[str, dict[str, Any]]:
            request = self._observation()
            found = {}
            for spec in (request.tools or []) if request is not None else []:
                function = spec.get("function") if isinstance(spec, dict) else None
                if isinstance(function, dict) and function.get("name") not in (None, "respond"):
                    found[function["name"]] = function
            return found

        def list_task_tools(self) -> ListToolsOutput:
            sessions.touch(self._sid)
            return ListToolsOutput(
                tools=[
                    ToolSpec(
                        name=n,
                        description=f.get("description", ""),
                        input_schema=f.get("parameters"),
                    )
                    for n, f in self._function_tools().items()
                ]
            )

        @tool
        async def respond(self, action: LLMResponse) -> ToolOutput:
            """Answer the observation with an LLM response (content, tool_calls, token ids,
            logprobs): the action of every palaestra environment."""
            raise NotImplementedError  # dispatched by _call_tool

        def _action(self, name: str, arguments: Any) -> LLMResponse:
            if name == "respond":
                return LLMResponse.model_validate(arguments)
            if name in self._function_tools():
                self._calls += 1
                call = ToolCall(
                    id=f"call_{self._calls}", name=name, arguments=json.dumps(arguments)
                )
                return LLMResponse(tool_calls=[call], finish_reason="tool_calls")
            offered = ", ".join(["respond", *self._function_tools()])
            raise ValueError(f"{name!r} is not a tool of this episode; its tools are: {offered}")

        async def _call_tool(self, name: str, input: Any) -> RunToolOutput:
            async with self._lock:
                ts = self._ts
                if ts is None or ts.last():
                    how = (
                        ""
                        if ts is None or ts.end is None
                        else f" ({ts.end.status}, reward {ts.reward})"
                    )
                    return _error(
                        f"the episode is over{how}: delete this session and create another "
                        "for a new episode"
                    )
                try:
                    action = self._action(name, input)
                except ValueError as e:
                    return _error(str(e))
                try:
                    async with sessions.busy(self._sid) as env:
                        self._ts = await env.step(action)
                except (EpisodeError, SessionClosed) as e:
                    return _error(str(e))
                return RunToolOutput(RunToolSuccess(output=_output(self._ts)))

    Served.__name__ = Served.__qualname__ = f"Served_{name}"
    return Served


class _Sessions:
    """ASGI middleware: ORS's session id for the request (:data:`_SID`), and ``/create``
    refused with HTTP 503 when the server is full, its slot freed when ``/create`` fails."""

    def __init__(self, app: ASGIApp, sessions: Sessions) -> None:
        self.app = app
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        sid = dict(scope["headers"]).get(b"x-session-id", b"").decode(errors="replace").strip()
        token = _SID.set(sid or None)
        try:
            if not (sid and scope["method"] == "POST" and scope["path"] == "/create"):
                return await self.app(scope, receive, send)
            try:
                reserved = self.sessions.reserve(sid)
            except (AtCapacity, SessionClosed) as e:
                status = 503 if isinstance(e, AtCapacity) else 410
                return await JSONResponse({"detail": str(e)}, status)(scope, receive, send)
            status: list[int] = []

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status.append(message["status"])
                await send(message)

            try:
                await self.app(scope, receive, sending)
            finally:
                if reserved and (not status or status[0] >= 400):
                    await self.sessions.release(sid, "/create failed", reusable=True)
        finally:
            _SID.reset(token)


def build(env_id: str, task_ids: list[str], sessions: Sessions) -> Served:
    """ORS's app serving ``env_id``'s tasks; the environment's name is the env id with every
    character a URL path segment cannot hold as ``-`` (``tools/crm`` -> ``tools-crm``)."""
    name = re.sub(r"[^a-z0-9_.-]", "-", env_id.lower())
    server = ors.server.Server([environment_class(name, task_ids, sessions)])

    async def end_session(key: Hashable) -> None:
        await ors.server._delete_session(
            str(key),
            server._active_envs,
            server._last_ping,
            server._setup_tasks,
            server._ready,
            server._setup_errors,
        )

    return Served(_Sessions(server.app, sessions), name, end_session)
