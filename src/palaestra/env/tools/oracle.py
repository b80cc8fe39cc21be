"""``ToolOracle``: the policy that solves every tool-use and game task from its known solution.

Its first action makes the scenario's solution calls (in one response, in order); its second
submits. It checks the tasks, not the policy: every task must score 1.0 with it (and 0.0 with
``nop``, which submits at once).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from palaestra.env.tools.tool import Call, ToolTask
from palaestra.llm.types import LLMRequest, LLMResponse, ToolCall
from palaestra.scaffolds.actions import SCRIPTED_MODEL


class ToolOracle:
    """Answers from each task's known solution; it costs nothing (``cost_usd`` 0)."""

    name = "oracle"

    def __init__(self, tasks: Iterable[ToolTask]) -> None:
        self._tasks = {t.id: t for t in tasks}
        self._solutions: dict[str, list[Call]] = {}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        task_id = request.metadata.get("task_id")
        task = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            raise ValueError(
                f"the oracle does not know task {task_id!r}; build it with the same tasks the "
                "environment samples from"
            )
        turn = request.metadata.get("turn", 0)
        if turn == 0 and task.id not in self._solutions:
            self._solutions[task.id] = task.scenario().solution
        calls = self._solutions[task.id] if turn == 0 else [("submit", {})]
        tool_calls = [
            ToolCall(id=f"call_{turn}_{i}", name=name, arguments=json.dumps(args))
            for i, (name, args) in enumerate(calls)
        ]
        return LLMResponse(
            tool_calls=tool_calls, finish_reason="tool_calls", model=SCRIPTED_MODEL, cost_usd=0.0
        )
