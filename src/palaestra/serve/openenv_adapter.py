"""OpenEnv (``openenv-core``): a palaestra environment behind OpenEnv's own server.

OpenEnv's :class:`HTTPEnvServer` serves an ``Environment`` with a typed ``Action`` and
``Observation``; a client (``GenericEnvClient``, or any ``EnvClient``) opens a WebSocket on
``/ws``, which is one session with its own environment, and sends ``reset`` / ``step`` /
``state`` messages. The mapping:

- ``reset`` data: ``seed``, ``task_id`` (one task of the env id's selection; else the seed
  picks), ``episode_id`` (ignored: palaestra names its episodes).
- the action (:class:`PalaestraAction`) is an :class:`~palaestra.llm.types.LLMResponse`'s
  fields: ``content``, ``tool_calls`` (``id``, ``name``, ``arguments``: a JSON string),
  ``finish_reason``, token ids, logprobs, usage, ``policy_version``.
- the observation (:class:`PalaestraObservation`): ``request`` (the whole LLMRequest:
  messages, tools, sampling, metadata), ``step_type``, ``discount``, ``terminated``,
  ``truncated``, ``end`` (on LAST), ``info``; OpenEnv's ``reward`` is dm_env's reward (None
  on FIRST, 0.0 on MID) and ``done`` is LAST.

Errors are OpenEnv's WebSocket errors: ``INVALID_JSON``, ``VALIDATION_ERROR`` (a wrong action),
``EXECUTION_ERROR`` (a step before reset, after LAST, or on a session closed for idling),
``CAPACITY_REACHED`` (``max_sessions``). The stateless HTTP ``/reset`` and ``/step`` routes
are not served (OpenEnv's production mode): an episode's sandbox lives in its WebSocket
session, closed when the socket closes.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from typing import Any, Literal

from fastapi import FastAPI
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment as OpenEnvEnvironment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect

from palaestra.env.types import EpisodeError, TimeStep
from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.serve import Served
from palaestra.serve.sessions import Sessions
from palaestra.serve.wire import step_fields


class PalaestraAction(LLMResponse, Action):
    """An LLM response, the action of every palaestra environment: every field of
    :class:`~palaestra.llm.types.LLMResponse` (inherited, so a field added there travels too)
    and OpenEnv's ``metadata``."""

    def to_response(self) -> LLMResponse:
        return LLMResponse.model_validate(self.model_dump(exclude={"metadata"}))


class PalaestraObservation(Observation):
    """A time step: the LLM request to answer and dm_env's fields."""

    request: LLMRequest | None = None
    step_type: Literal["first", "mid", "last"] = "first"
    discount: float | None = None
    terminated: bool = False
    truncated: bool = False
    end: dict[str, Any] | None = None
    info: dict[str, Any] = Field(default_factory=dict)


def observation(ts: TimeStep[LLMRequest]) -> PalaestraObservation:
    fields = step_fields(ts)
    return PalaestraObservation(request=ts.observation, done=ts.last(), **fields)


class ServedEnvironment(OpenEnvEnvironment[PalaestraAction, PalaestraObservation, State]):
    """One OpenEnv session: its palaestra environment is the :class:`Sessions` entry keyed by
    this object, opened at the first reset and released when OpenEnv closes the session."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, sessions: Sessions, env_id: str) -> None:
        super().__init__()
        self._sessions = sessions
        self._env_id = env_id
        self._reserved = False
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Any:
        raise NotImplementedError("served asynchronously: reset_async")

    def step(self, action: Any, timeout_s: float | None = None, **kw: Any) -> Any:
        raise NotImplementedError("served asynchronously: step_async")

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        **kwargs: Any,
    ) -> PalaestraObservation:
        if kwargs:
            raise ValueError(
                f"unknown reset options {sorted(kwargs)}: reset takes seed and task_id"
            )
        if not self._reserved:
            self._sessions.reserve(self)
            self._reserved = True
        async with self._sessions.busy(self) as env:
            ts = await env.reset(seed=seed, options={"task_id": task_id} if task_id else None)
        self._state = State(
            episode_id=ts.info.get("episode_id"), step_count=0, task_id=ts.info.get("task_id")
        )
        return observation(ts)

    async def step_async(
        self, action: PalaestraAction, timeout_s: float | None = None, **kwargs: Any
    ) -> PalaestraObservation:
        if not self._reserved:
            raise EpisodeError("step before reset: send a reset message first")
        async with self._sessions.busy(self) as env:
            ts = await env.step(action.to_response())
        self._state = self._state.model_copy(update={"step_count": self._state.step_count + 1})
        return observation(ts)

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=self._env_id,
            description=f"palaestra environment {self._env_id}: observations are LLM requests, "
            "actions LLM responses",
        )

    def close(self) -> None:  # OpenEnv calls it from a worker thread
        if self._reserved:
            self._sessions.release_threadsafe(self, "the WebSocket closed")


class _QuietClose:
    """ASGI wrapper: OpenEnv closes a WebSocket the client already closed, which raises
    ``WebSocketDisconnect`` out of the app (a traceback per session, nothing wrong)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            if scope["type"] != "websocket":
                raise


def build(env_id: str, task_ids: list[str], sessions: Sessions) -> Served:
    """OpenEnv's app serving ``env_id`` (a reset's ``task_id`` is one of ``task_ids``)."""
    server = HTTPEnvServer(
        functools.partial(ServedEnvironment, sessions, env_id),
        PalaestraAction,
        PalaestraObservation,
        max_concurrent_envs=sessions.limits.max_sessions,
    )
    app = FastAPI(title=f"palaestra {env_id} (OpenEnv)")
    server.register_routes(app, mode="production")

    async def end_session(key: Hashable) -> None:
        for sid, env in list(server._sessions.items()):
            if env is key:
                await server._destroy_session(sid)

    return Served(_QuietClose(app), env_id, end_session)
