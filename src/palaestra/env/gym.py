"""A Gymnasium adapter: any palaestra environment as a synchronous ``gymnasium.Env``.

``reset`` returns ``(observation, info)``; ``step`` returns ``(observation, reward, terminated,
truncated, info)``. Observations are :class:`LLMRequest` objects and actions
:class:`LLMResponse` objects (or strings), described by :class:`LLMSpace`. On the last step the
observation is the environment's LAST observation, the final request (for an environment whose
LAST has none, the previous observation again: Gymnasium wants one). ``info`` is the time step's
info; on the last step ``info["end"]`` is the :class:`~palaestra.env.end.EpisodeEnd`.

Observations are a function of the seed and the task, and so are step infos: the episode id is
in ``reset``'s info (and :attr:`GymAdapter.episode_id`), not in ``step``'s. So Gymnasium's own
``gymnasium.utils.env_checker.check_env`` passes: resetting with the same seed gives the same
observation, and the same action the same next observation and info.

The async environment runs on a private event loop in a background thread, so the adapter also
works from code that already runs an event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

try:
    import gymnasium
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError("the Gymnasium adapter needs gymnasium: pip install 'palaestra[gym]'") from e

from palaestra.env.types import Environment
from palaestra.llm.types import LLMRequest, LLMResponse

T = TypeVar("T")


class LLMSpace(gymnasium.Space[Any]):
    """The space of LLM requests or responses: membership is a type check."""

    def __init__(self, kind: type) -> None:
        super().__init__(shape=None, dtype=None)
        self.kind = kind

    def contains(self, x: Any) -> bool:
        return isinstance(x, self.kind) or (self.kind is LLMResponse and isinstance(x, str))

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        if self.kind is LLMResponse:
            return LLMResponse(content="")
        raise TypeError("LLM requests cannot be sampled; they come from the environment")

    @property
    def is_np_flattenable(self) -> bool:
        return False


class GymAdapter(gymnasium.Env[LLMRequest, LLMResponse]):
    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, env: Environment[LLMRequest, LLMResponse]) -> None:
        self.env = env
        self.observation_space = LLMSpace(LLMRequest)
        self.action_space = LLMSpace(LLMResponse)
        self._last_obs: LLMRequest | None = None
        self.episode_id: str | None = None
        """The running episode's id (``reset``'s ``info["episode_id"]``)."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="palaestra-gym-loop"
        )
        self._thread.start()
        self._closed = False

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coro.close()
            raise RuntimeError("the environment is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[LLMRequest, dict[str, Any]]:
        super().reset(seed=seed)
        ts = self._run(self.env.reset(seed=seed, options=options))
        self._last_obs = ts.observation
        self.episode_id = ts.info.get("episode_id")
        return ts.observation, dict(ts.info)

    def step(
        self, action: LLMResponse | str
    ) -> tuple[LLMRequest, float, bool, bool, dict[str, Any]]:
        ts = self._run(self.env.step(action))
        if ts.observation is not None:
            self._last_obs = ts.observation
        assert self._last_obs is not None
        info = {k: v for k, v in ts.info.items() if k != "episode_id"}
        return self._last_obs, float(ts.reward or 0.0), ts.terminated, ts.truncated, info

    def close(self) -> None:
        if self._closed:
            return
        self._run(self.env.close())
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
