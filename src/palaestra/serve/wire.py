"""A time step as JSON, the same for every protocol.

The observation is the whole :class:`~palaestra.llm.types.LLMRequest` (messages, tools,
sampling, metadata: what the oracle and the local policies read), so a client rebuilds it
exactly with ``LLMRequest.model_validate``. Beside it: dm_env's ``step_type``, ``reward`` and
``discount``, ``terminated`` / ``truncated`` (LAST with discount 0.0 / 1.0), ``end`` (the
:class:`~palaestra.env.end.EpisodeEnd` as a dict, on LAST) and ``info`` (the episode and task
ids, the step count, a shaping reward when the env has one).
"""

from __future__ import annotations

from typing import Any

from palaestra.env.types import TimeStep
from palaestra.llm.types import LLMRequest, Message

#: The keys of a time step's ``info`` sent to clients (the rest is the server's own: timings,
#: verifier internals that ``end`` already carries).
PUBLIC_INFO = ("episode_id", "task_id", "step", "shaping_reward")


def request_json(request: LLMRequest | None) -> dict[str, Any] | None:
    return None if request is None else request.model_dump(mode="json", exclude_none=True)


def step_fields(ts: TimeStep[LLMRequest]) -> dict[str, Any]:
    """Everything of ``ts`` but the observation, JSON-ready."""
    return {
        "step_type": ts.step_type.name.lower(),
        "reward": ts.reward,
        "discount": ts.discount,
        "terminated": ts.terminated,
        "truncated": ts.truncated,
        "end": ts.end.to_dict() if ts.end is not None else None,
        "info": {k: ts.info[k] for k in PUBLIC_INFO if ts.info.get(k) is not None},
    }


def new_messages(request: LLMRequest | None) -> list[Message]:
    """The messages after the policy's last answer: what an action brought back (tool results,
    the command's output), or the whole opening conversation before any answer."""
    if request is None:
        return []
    messages = request.messages
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            return messages[i + 1 :]
    return messages
