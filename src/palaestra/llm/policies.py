"""Policies that need no model: ``oracle``, ``nop`` and a scripted policy for tests.

Each is an :class:`~palaestra.llm.client.LLMClient`: it answers observations through the same
scaffold and LLM boundary as a real model, so it exercises the whole environment.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import tarfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from palaestra.llm.types import LLMRequest, LLMResponse, ToolCall
from palaestra.scaffolds.bash import SUBMIT_SENTINEL

if TYPE_CHECKING:
    from palaestra.tasks import Task

SOLUTION_DIR = "/solution"


def _bash(command: str, note: str) -> LLMResponse:
    return LLMResponse(content=f"{note}\n\n```bash\n{command}\n```", model="palaestra/scripted")


SUBMIT = _bash(f"echo {SUBMIT_SENTINEL}", "Submitting.")


def _tool_call(name: str, turn: int, **arguments: object) -> LLMResponse:
    call = ToolCall(id=f"call_{turn}_{name}", name=name, arguments=json.dumps(arguments))
    return LLMResponse(tool_calls=[call], finish_reason="tool_calls", model="palaestra/scripted")


def _terminus(commands: list[dict[str, object]], task_complete: bool = False) -> LLMResponse:
    action = {"analysis": "", "plan": "", "commands": commands, "task_complete": task_complete}
    return LLMResponse(content=json.dumps(action), model="palaestra/scripted")


#: Printed by the oracle's terminus command once the solution has run; typed as two words, so
#: only the output, not the echo of the command line, holds it.
_ORACLE_DONE = "PALAESTRA_ORACLE_DONE"


class NopPolicy:
    """Submits at once without doing anything: the floor every task must score 0 on."""

    name = "nop"

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return SUBMIT


def _pack_dir(path: Path) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(path, arcname=".")
    # Lines of 76 characters: a terminal's line discipline caps a line at 4096 bytes.
    return base64.encodebytes(buf.getvalue()).decode()


class OraclePolicy:
    """Solves each task with its reference solution, then submits.

    Its first action unpacks the task's ``solution/`` directory to ``/solution`` and runs
    ``solve.sh`` from the working directory (Harbor's oracle agent, as an LLM response); its
    second action submits. It finds the task by ``request.metadata["task_id"]``.

    It speaks each scaffold's format: a fenced bash block (``bash``), a ``bash`` then a
    ``submit`` tool call when the request offers tools (``tools``), and, when
    ``metadata["scaffold"]`` is ``terminus``, keystrokes that type the command, empty
    keystrokes that wait until its completion marker shows, then ``task_complete`` (twice,
    as the scaffold asks to confirm).
    """

    name = "oracle"

    def __init__(self, tasks: Iterable[Task]) -> None:
        self._tasks = {t.id: t for t in tasks}
        self._packed: dict[str, str] = {}

    async def _solve_command(self, task: Task) -> str:
        if task.solve_script is None:
            raise ValueError(
                f"task {task.id!r} has no solution/solve.sh, so the oracle cannot solve it; "
                "add a reference solution or evaluate it with another policy"
            )
        if task.id not in self._packed:
            self._packed[task.id] = await asyncio.to_thread(_pack_dir, task.solution_dir)
        return (
            f"mkdir -p {SOLUTION_DIR} && base64 -d <<'PALAESTRA_EOF' | tar -xz -C {SOLUTION_DIR}\n"
            f"{self._packed[task.id]}PALAESTRA_EOF\nbash {SOLUTION_DIR}/solve.sh"
        )

    async def complete(self, request: LLMRequest) -> LLMResponse:
        task_id = request.metadata.get("task_id")
        task = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            raise ValueError(
                f"the oracle does not know task {task_id!r}; build it with the same tasks the "
                "environment samples from"
            )
        first = request.metadata.get("turn", 0) == 0
        if request.metadata.get("scaffold") == "terminus":
            observations = [m for m in request.messages[2:] if m.get("role") == "user"]
            if any(_ORACLE_DONE in (m.get("content") or "") for m in observations):
                return _terminus([], task_complete=True)
            if first:
                done = "printf '%s_%s\\n' PALAESTRA ORACLE_DONE"
                command = f"{await self._solve_command(task)}; {done}\n"
                return _terminus([{"keystrokes": command, "duration": 0.5}])
            return _terminus([{"keystrokes": "", "duration": 2.0}])
        if request.tools:
            names = {t.get("function", {}).get("name") for t in request.tools}
            if not {"bash", "submit"} <= names:
                raise ValueError(
                    "the oracle needs `bash` and `submit` tools to act through tool calls; "
                    f"the request offers {sorted(n for n in names if n)}"
                )
            if first:
                return _tool_call("bash", 0, command=await self._solve_command(task))
            return _tool_call("submit", request.metadata.get("turn", 1))
        if first:
            return _bash(await self._solve_command(task), "Running the reference solution.")
        return SUBMIT


Script = Sequence[str | LLMResponse] | Callable[[LLMRequest], str | LLMResponse]


class ScriptedPolicy:
    """Answers from a fixed list of responses (or a function of the request).

    Strings become text responses. Running past the end of the list raises, so a test that
    expects fewer turns fails loudly instead of looping.
    """

    name = "scripted"

    def __init__(self, script: Script) -> None:
        self._fn = script if callable(script) else None
        self._items = iter(()) if callable(script) else iter(script)
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        if self._fn is not None:
            item = self._fn(request)
        else:
            try:
                item = next(self._items)
            except StopIteration:
                raise RuntimeError(
                    f"scripted policy ran out of responses at request {len(self.requests) - 1}"
                ) from None
        return item if isinstance(item, LLMResponse) else LLMResponse(content=item)
