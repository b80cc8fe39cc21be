"""Scaffolds: agent harnesses that live inside the environment.

A scaffold turns a task into LLM requests and the LLM's responses into sandbox commands. It
runs as one asyncio task per episode and ends with an :class:`Outcome`. It never sees rewards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from palaestra.llm.client import LLMClient
    from palaestra.sandbox.base import Sandbox
    from palaestra.tasks import Task

OutcomeStatus = Literal["submitted", "step_limit", "agent_timeout", "format_error_limit", "error"]
"""How the agent's part of an episode ended.

``submitted``: the agent said it is done (termination). ``step_limit``: the scaffold's step
budget ran out (truncation). ``agent_timeout``: the environment stopped the scaffold when the
task's agent time ran out (truncation). ``format_error_limit``: too many malformed responses in a
row (termination: the agent gave up being understood). ``error``: the scaffold itself failed.
"""


@dataclass
class Outcome:
    status: OutcomeStatus
    steps: int
    message: str = ""
    trajectory: list[dict[str, Any]] = field(default_factory=list)

    @property
    def truncated(self) -> bool:
        return self.status in ("step_limit", "agent_timeout")


class Scaffold(Protocol):
    name: str

    async def run(self, task: Task, sandbox: Sandbox, llm: LLMClient) -> Outcome: ...
