"""Policies that need no model: ``oracle`` and ``nop``, speaking every scaffold's protocol.

Each is an :class:`~palaestra.llm.client.LLMClient`: it answers observations through the same
scaffold and LLM boundary as a real model, so it exercises the whole environment. It reads
what it needs from the observation: ``metadata["scaffold"]`` picks the protocol's
:class:`~palaestra.scaffolds.actions.ProtocolActions` (the scaffold's ``actions``),
``metadata["turn"]`` the step, ``metadata["task_id"]`` the task.
"""

from __future__ import annotations

import asyncio
import base64
import io
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.scaffolds.actions import ProtocolActions
from palaestra.scaffolds.bash import BashScaffold
from palaestra.scaffolds.bash_compact import CompactBashScaffold
from palaestra.scaffolds.harness import HARNESSES
from palaestra.scaffolds.terminus import TerminusScaffold
from palaestra.scaffolds.tools import ToolsScaffold
from palaestra.tasks.paths import SOLUTION_DIR


class HarnessActions(ProtocolActions):
    """An outside harness (the ``external`` scaffold, or any scaffold whose name is not known
    here) speaks its own protocol: tool calls (``tools``' actions) when its request offers
    tools, else the ``bash`` text protocol, which mini-swe-agent's palaestra config uses."""

    @staticmethod
    def _pick(request: LLMRequest) -> ProtocolActions:
        return ToolsScaffold.actions if request.tools else BashScaffold.actions

    def run(self, request: LLMRequest, command: str, why: str = "") -> LLMResponse:
        return self._pick(request).run(request, command, why)

    def submit(self, request: LLMRequest) -> LLMResponse:
        return self._pick(request).submit(request)


#: Each turn-loop scaffold's and each registered harness's actions by its name; others get
#: :class:`HarnessActions`.
ACTIONS: dict[str, ProtocolActions] = {
    **{
        cls.name: cls.actions
        for cls in (BashScaffold, CompactBashScaffold, ToolsScaffold, TerminusScaffold)
    },
    **{name: harness.actions for name, harness in HARNESSES.items()},
}
_HARNESS = HarnessActions()


def protocol_actions(request: LLMRequest) -> ProtocolActions:
    """The actions of the protocol ``request`` comes from (``metadata["scaffold"]``)."""
    return ACTIONS.get(request.metadata.get("scaffold", ""), _HARNESS)


def _free(response: LLMResponse) -> LLMResponse:
    """A scripted response costs nothing: ``cost_usd`` 0, not unknown."""
    return response.model_copy(update={"cost_usd": 0.0})


class NopPolicy:
    """Submits at once without doing anything: the floor every task must score 0 on."""

    name = "nop"

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return _free(protocol_actions(request).submit(request))


def _pack_dir(path: Path) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(path, arcname=".")
    # Lines of 76 characters: a terminal's line discipline caps a line at 4096 bytes.
    return base64.encodebytes(buf.getvalue()).decode()


class OraclePolicy:
    """Solves each task with its reference solution, then submits.

    Its first action unpacks the task's solution directory to ``/solution`` and runs
    ``solve.sh`` from the working directory (Harbor's oracle agent, as an LLM response); then
    it submits, once the command has finished (:meth:`ProtocolActions.after_run`).
    ``solutions`` maps task ids to their solution directories; :meth:`from_tasks` builds it.
    """

    name = "oracle"

    def __init__(self, solutions: Mapping[str, Path]) -> None:
        self._solutions = dict(solutions)
        self._packed: dict[str, str] = {}

    @classmethod
    def from_tasks(cls, tasks: Iterable[Any]) -> OraclePolicy:
        """The oracle of these tasks (anything with ``id`` and ``solution_dir``), and of their
        ``steps`` (a multi-step task's, each solved by its own solution)."""
        return cls(
            {t.id: t.solution_dir for task in tasks for t in (task, *getattr(task, "steps", ()))}
        )

    async def _solve_command(self, task_id: str, solution_dir: Path) -> str:
        if not (solution_dir / "solve.sh").is_file():
            raise ValueError(
                f"task {task_id!r} has no solution/solve.sh, so the oracle cannot solve it; "
                "add a reference solution or evaluate it with another policy"
            )
        if task_id not in self._packed:
            self._packed[task_id] = await asyncio.to_thread(_pack_dir, solution_dir)
        return (
            f"mkdir -p {SOLUTION_DIR} && base64 -d <<'PALAESTRA_EOF' | tar -xz -C {SOLUTION_DIR}\n"
            f"{self._packed[task_id]}PALAESTRA_EOF\nbash {SOLUTION_DIR}/solve.sh"
        )

    async def complete(self, request: LLMRequest) -> LLMResponse:
        task_id = request.metadata.get("task_id")
        solution_dir = self._solutions.get(task_id) if isinstance(task_id, str) else None
        if solution_dir is None:
            raise ValueError(
                f"the oracle does not know task {task_id!r}; build it with the same tasks the "
                "environment samples from"
            )
        actions = protocol_actions(request)
        if request.metadata.get("turn", 0) != 0:
            return _free(actions.after_run(request))
        command = await self._solve_command(task_id, solution_dir)
        return _free(actions.run(request, command, "Running the reference solution."))


__all__ = ["ACTIONS", "HarnessActions", "NopPolicy", "OraclePolicy", "protocol_actions"]
