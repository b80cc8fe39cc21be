"""The episodes a proxy serves: each one's state and calls, and finding the episode of an HTTP
request by its token (in the URL path, or as the API key)."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from palaestra.llm.types import LLMRequest, LLMResponse

if TYPE_CHECKING:
    from starlette.requests import Request

    from palaestra.llm.client import LLMClient
    from palaestra.sandbox.base import Sandbox

_ENDED_MEMORY = 10_000
_T = TypeVar("_T")


class ProxyRequestError(ValueError):
    """A request the proxy cannot serve; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, *, status: int = 400, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class ResponseMemory:
    """What the Responses route keeps of one episode: each stored response's items (for a
    later ``previous_response_id``) and the arguments the policy wrote for each custom tool
    call (so that the harness's echo of the call reaches the policy as it was written)."""

    def __init__(self) -> None:
        self._responses: dict[str, tuple[str | None, list[Any], list[Any]]] = {}
        self.custom_arguments: dict[str, str] = {}

    def keep(
        self, response_id: str, previous: str | None, inputs: list[Any], outputs: list[Any]
    ) -> None:
        self._responses[response_id] = (previous, inputs, outputs)

    def history(self, response_id: str | None) -> list[Any]:
        """The items of ``response_id``'s conversation: its history, input and output."""
        if response_id is None:
            return []
        chain: list[list[Any]] = []
        current: str | None = response_id
        while current is not None:
            if current not in self._responses:
                raise ProxyRequestError(
                    f"previous response {current!r} not found: it was not made in this "
                    "episode, or it was made with store=false (send the whole history as "
                    "'input' instead)",
                    code="previous_response_not_found",
                )
            current, inputs, outputs = self._responses[current]
            chain.append([*inputs, *outputs])
        return [item for part in reversed(chain) for item in part]


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
    responses: ResponseMemory = field(default_factory=ResponseMemory)
    turns: int = 0
    last_activity: float = field(default_factory=time.monotonic)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _inflight: set[asyncio.Future[Any]] = field(default_factory=set)

    @property
    def busy(self) -> bool:
        """True while a call or an exec of this episode is being served."""
        return self._lock.locked() or bool(self._inflight)

    async def track(self, call: Awaitable[_T]) -> _T:
        """Await ``call`` as one of the episode's in-flight tasks (ending the episode cancels
        them); its end is the episode's last activity."""
        task = asyncio.ensure_future(call)
        self._inflight.add(task)
        try:
            return await task
        finally:
            self._inflight.discard(task)
            self.last_activity = time.monotonic()

    async def complete(self, llm_request: LLMRequest) -> LLMResponse:
        """One call through the episode's client, one at a time per episode (a mediated client
        serves one outstanding request; harnesses that call in parallel are queued)."""
        async with self._lock:
            turn = self.turns
            self.turns += 1
            llm_request = llm_request.model_copy(
                update={"metadata": {**llm_request.metadata, **self.metadata, "turn": turn}}
            )
            response = await self.track(self.client.complete(llm_request))
            self.calls.append(
                {
                    "turn": turn,
                    "kind": "llm",
                    "n_messages": len(llm_request.messages),
                    "response": response.model_dump(exclude_none=True),
                }
            )
            return response


class EpisodeTable:
    """The running episodes by token, and the tokens of the last ones that ended (so that a
    late call is told its episode ended rather than that its token is unknown)."""

    def __init__(self) -> None:
        self._episodes: dict[str, ProxyEpisode] = {}
        self._ended: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._episodes)

    def __contains__(self, token: object) -> bool:
        return token in self._episodes

    def tokens(self) -> list[str]:
        return list(self._episodes)

    def add(self, ep: ProxyEpisode) -> None:
        if ep.token in self._episodes:
            raise ValueError(f"an episode with token {ep.token!r} is already registered")
        self._episodes[ep.token] = ep

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

    def for_request(self, request: Request) -> ProxyEpisode:
        """The episode a request is for: the token in its path, else its API key."""
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
