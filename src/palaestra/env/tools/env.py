"""``ToolEnv``: the policy calls declared tools (OpenAI function calling) over a per-episode
state; the reward says whether the final state reaches the task's goal.

No sandbox and no scaffold: the tools are Python functions over plain data
(:class:`~palaestra.env.tools.tool.Scenario`), so an episode costs microseconds besides the
policy. ``reset`` picks a task (from the seed, or ``options={"task_id": ...}``), builds its
scenario and returns the instruction with the tools' specs in ``LLMRequest.tools``: the
scenario's own tools, ``submit``, and ``distractors`` realistic tools no task needs, in an
order fixed by the task. The protocol is the ``tools`` scaffold's:

* Every call of a response runs, in order, and is answered by a ``role: tool`` message with its
  ``tool_call_id``. ``submit`` ends the episode once the response's calls have run; so does a
  game that ended (won or lost).
* The policy's calls are untrusted: an unknown tool, arguments that are not a JSON object, or
  missing, extra or mistyped arguments are answered with what is wrong and the tool's schema. A
  response with no call (reminded by a user message) or only such calls is a format error;
  ``max_consecutive_format_errors`` in a row end the episode (``format_error_limit``). A call
  the tool refuses (no such record) is answered with the refusal, not a format error.
* ``step_limit`` responses at most; reaching it truncates the episode.

Every end scores the final state (``verified`` is always true): 1.0 when the goal holds, else
0.0. LAST's ``info["executions"]`` holds each turn's calls, their results and, for simulated
tools (``simulator``: any policy answering as the tool, see
:mod:`palaestra.env.tools.simulator`), what the simulator said.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from palaestra.env.end import EpisodeEnd
from palaestra.env.tools.distractors import MAX_DISTRACTORS
from palaestra.env.tools.distractors import distractors as pick_distractors
from palaestra.env.tools.simulator import simulate
from palaestra.env.tools.tool import Scenario, Tool, ToolError, ToolTask, params
from palaestra.env.types import (
    Environment,
    EpisodeError,
    EpisodeStatus,
    TimeStep,
    restart,
    termination,
    transition,
    truncation,
)
from palaestra.llm.client import LLMClient
from palaestra.llm.types import LLMRequest, LLMResponse, Message, ToolCall
from palaestra.scaffolds.base import EndReason
from palaestra.scaffolds.loop import cap
from palaestra.scaffolds.tools import ToolCallError, check_arguments
from palaestra.tasks.source import TaskSet

#: ``metadata["scaffold"]`` of the observations: palaestra's own policies (nop) read it and
#: act through the tool calls the request offers.
PROTOCOL = "toolenv"

SYSTEM_PROMPT = """\
You are an assistant that acts only by calling the tools you are given. Call tools to look \
things up and to make changes until the task is done, then call `submit`. You may make \
several calls in one response; they run in order and each result comes back as a tool \
message. Only the final state counts: change exactly what the task asks for. You have \
{step_limit} responses in all."""

NO_TOOL_CALL = (
    "Your response contained no tool call. Act by calling the tools; call `submit` when done."
)
OUTPUT_CHARS = 8000

SUBMIT = Tool(
    "submit", "Say that the task is done and end the episode.", params(), lambda s, a: "Submitted."
)


@dataclass
class _Episode:
    id: str
    task: ToolTask
    scenario: Scenario
    tools: dict[str, Tool]
    simulated: frozenset[str]
    request: LLMRequest
    specs: dict[str, dict[str, Any]] = field(init=False)
    turns: int = 0
    format_errors: int = 0
    executions: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        self.specs = {name: tool.spec()["function"] for name, tool in self.tools.items()}


class ToolEnv(Environment[LLMRequest, LLMResponse]):
    """Tool-use episodes over ``tasks`` (a :class:`TaskSet` of
    :class:`~palaestra.env.tools.tool.ToolTask`); see the module docstring.

    ``distractors``: distractor tools declared per episode (None: the task's tier default).
    ``simulator``: an LLM policy answering the calls of simulated tools, which ``simulate``
    names: ``"distractors"`` or ``"all"`` (every tool but ``submit``). ``scaffold`` and
    ``sandbox`` are refused unless left at ``evaluate``'s defaults: nothing runs in a sandbox.
    """

    def __init__(
        self,
        tasks: TaskSet,
        *,
        env_id: str | None = None,
        distractors: int | None = None,
        simulator: LLMClient | None = None,
        simulate: Literal["distractors", "all"] = "distractors",
        step_limit: int = 30,
        max_consecutive_format_errors: int = 3,
        scaffold: object = "bash",
        sandbox: object = "local",
    ) -> None:
        if scaffold != "bash" or sandbox != "local":
            raise ValueError(
                f"{env_id or 'a tool environment'} runs no scaffold and no sandbox (its tools "
                "are Python functions): drop scaffold= and sandbox="
            )
        if distractors is not None and not 0 <= distractors <= MAX_DISTRACTORS:
            raise ValueError(f"distractors={distractors}: choose 0 to {MAX_DISTRACTORS}")
        if simulate not in ("distractors", "all"):
            raise ValueError(f"simulate={simulate!r}: choose 'distractors' or 'all'")
        if step_limit < 1 or max_consecutive_format_errors < 1:
            raise ValueError("step_limit and max_consecutive_format_errors must be at least 1")
        if not len(tasks):
            raise ValueError("a ToolEnv needs at least one task")
        self.tasks = tasks
        self.env_id = env_id
        self.distractors = distractors
        self.simulator = simulator
        self.simulate = simulate
        self.step_limit = step_limit
        self.max_consecutive_format_errors = max_consecutive_format_errors
        self._rng = random.Random()
        self._episode: _Episode | None = None
        self._closed = False

    # -- episode control ------------------------------------------------------------------

    async def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> TimeStep[LLMRequest]:
        if self._closed:
            raise EpisodeError("reset() on a closed environment; create a new one")
        self._episode = None
        if seed is not None:
            self._rng.seed(seed)
        task_id = (options or {}).get("task_id")
        if task_id is None:
            task_id = self.tasks.id_at(self._rng.randrange(len(self.tasks)))
        task: ToolTask = self.tasks.get(task_id)  # type: ignore[assignment]
        scenario = task.scenario()
        tools = [*scenario.tools, SUBMIT]
        n = task.distractors if self.distractors is None else self.distractors
        extra = pick_distractors(task.id, n, {t.name for t in tools})
        tools += extra
        random.Random(f"{task.id}/order").shuffle(tools)
        simulated = frozenset(
            ()
            if self.simulator is None
            else [t.name for t in extra]
            if self.simulate == "distractors"
            else [t.name for t in tools if t is not SUBMIT]
        )
        system = SYSTEM_PROMPT.format(step_limit=self.step_limit)
        request = LLMRequest(
            messages=[
                {"role": "system", "content": system},
                {"role": "user", "content": scenario.instruction},
            ],
            tools=[t.spec() for t in tools],
            metadata={"env": self.env_id, "task_id": task.id, "turn": 0, "scaffold": PROTOCOL},
        )
        ep = _Episode(
            uuid.uuid4().hex[:16], task, scenario, {t.name: t for t in tools}, simulated, request
        )
        self._episode = ep
        return restart(request, self._info(ep))

    async def step(self, action: LLMResponse | str) -> TimeStep[LLMRequest]:
        ep = self._episode
        if ep is None:
            raise EpisodeError("step() needs a running episode: call reset() first")
        if isinstance(action, str):
            action = LLMResponse(content=action)
        elif not isinstance(action, LLMResponse):
            raise TypeError(f"an action is an LLMResponse (or a str), got {type(action).__name__}")
        turn = ep.turns
        ep.turns += 1
        messages: list[Message] = [*ep.request.messages, action.to_message()]
        records: list[dict[str, Any]] = []
        for call in action.tool_calls:
            text, record = await self._call(ep, call)
            records.append(record)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        if not action.tool_calls:
            messages.append({"role": "user", "content": NO_TOOL_CALL})
        format_error = all("error" in r for r in records)  # also true with no call
        ep.format_errors = ep.format_errors + 1 if format_error else 0
        ep.executions.append(
            {
                "turn": turn,
                "content": action.content,
                "tool_calls": records,
                "format_error": format_error,
            }
        )
        metadata = {**ep.request.metadata, "turn": ep.turns}
        ep.request = ep.request.model_copy(update={"messages": messages, "metadata": metadata})
        submitted = any(r["tool"] == SUBMIT.name and "error" not in r for r in records)
        if submitted or ep.scenario.over(ep.scenario.state):
            return self._finish(ep, EndReason.SUBMITTED)
        if ep.format_errors >= self.max_consecutive_format_errors:
            return self._finish(ep, EndReason.FORMAT_ERROR_LIMIT)
        if ep.turns >= self.step_limit:
            return self._finish(ep, EndReason.STEP_LIMIT)
        return transition(ep.request, {**self._info(ep), "shaping_reward": None})

    async def abandon(self) -> None:
        self._episode = None

    async def close(self) -> None:
        self._closed = True
        self._episode = None

    # -- the steps ------------------------------------------------------------------------

    async def _call(self, ep: _Episode, call: ToolCall) -> tuple[str, dict[str, Any]]:
        """Run one call: the text the policy reads and the call's execution record."""
        record: dict[str, Any] = {"id": call.id, "tool": call.name, "arguments": call.arguments}
        try:
            args = check_arguments(call, ep.specs)
        except ToolCallError as e:
            record.update(error=True, output=str(e))
            return str(e), record
        tool = ep.tools[call.name]
        try:
            text = tool.run(ep.scenario.state, args)
        except ToolError as e:
            text = f"Error: {e}"
            record["refused"] = True
        if self.simulator is not None and call.name in ep.simulated:
            answer = await simulate(self.simulator, tool, args, ep.scenario.sample_data, ep.task.id)
            record.update(
                python_output=text,
                simulated=True,
                simulator_usage=answer.usage.model_dump(),
                simulator_cost_usd=answer.cost_usd,
            )
            text = answer.content or ""
        text = cap(text, OUTPUT_CHARS, "[... {elided} characters elided ...]")
        record["output"] = text
        return text, record

    def _info(self, ep: _Episode) -> dict[str, Any]:
        task = ep.task
        return {
            "episode_id": ep.id,
            "task_id": task.id,
            "step": ep.turns,
            "category": task.category,
            "difficulty": task.difficulty,
            "family": task.family,
        }

    def _finish(self, ep: _Episode, reason: EndReason) -> TimeStep[LLMRequest]:
        self._episode = None
        reward = 1.0 if ep.scenario.goal(ep.scenario.state) else 0.0
        status = EpisodeStatus.PASSED if reward == 1.0 else EpisodeStatus.FAILED
        end = EpisodeEnd(status, reason, reward, {"reward": reward}, verified=True)
        info = {
            **self._info(ep),
            "end": end,
            "executions": ep.executions,
            "shaping_reward": None,
            "timings": {"agent_s": time.perf_counter() - ep.started},
        }
        if reason.truncated:
            return truncation(reward, ep.request, info)
        return termination(reward, ep.request, info)
