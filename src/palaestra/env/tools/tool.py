"""The data of a tool-use episode: :class:`Tool`, :class:`Scenario` and :class:`ToolTask`.

A *tool* is a declared function (an OpenAI function spec) implemented in Python over the
episode's state: ``run(state, args)`` reads or changes the state and returns the text the policy
reads, or raises :class:`ToolError` for a call that is well formed but cannot be done (no such
contact). A *scenario* is one episode's world: the instruction, the tools, the state, the goal
(a predicate on the final state) and the calls that reach it (the oracle's). A *task* is a
seeded, named recipe for a scenario: the same task always builds the same scenario.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

State = Any
"""A scenario's state: plain Python data (dicts, lists), compared with ``==`` by goals."""


class ToolError(Exception):
    """A well-formed call the tool refuses (an unknown id, a clash): its message is what the
    policy reads. Not a format error."""


@dataclass(frozen=True)
class Tool:
    """A declared tool: its name, description and JSON-schema ``parameters`` (an object), and
    ``run(state, args) -> text`` over the episode's state (``args`` already checked against
    ``parameters``)."""

    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[State, dict[str, Any]], str]

    def spec(self) -> dict[str, Any]:
        """The OpenAI function spec (what ``LLMRequest.tools`` carries)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def params(required: Sequence[str] = (), **properties: dict[str, Any]) -> dict[str, Any]:
    """An object schema: ``params(["id"], id={"type": "string"})``; every property not in
    ``required`` is optional, no other property is allowed."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def string(description: str, **more: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **more}


def integer(description: str, **more: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **more}


def dumps(value: Any) -> str:
    """A tool result as the policy reads it: compact, key-sorted JSON (deterministic)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


Call = tuple[str, dict[str, Any]]
"""A tool call as ``(name, arguments)``."""


@dataclass
class Scenario:
    """One episode's world.

    ``goal(state)`` says whether the final state reaches the task's goal (the reward is 1.0 when
    it does). ``solution``: calls that reach it from the initial state (what the oracle sends).
    ``over(state)``: whether the world ended the episode by itself (a game won or lost); tool
    domains never do. ``sample_data``: what an LLM simulating a tool is shown of the world.
    """

    instruction: str
    state: State
    tools: list[Tool]
    goal: Callable[[State], bool]
    solution: list[Call]
    sample_data: str = ""
    over: Callable[[State], bool] = field(default=lambda state: False)

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)


def state_scenario(
    instruction: str, state: State, tools: Sequence[Tool], solution: Sequence[Call]
) -> Scenario:
    """A tool family's scenario. The goal is "the final state is the state ``solution`` leads
    to" (the calls are applied to a copy of ``state`` once, then compared): any other change (a
    wrong record edited, an extra file) misses it, so the reward needs exactly the asked-for
    changes. A simulator is shown the whole initial state (as JSON: a state is plain data)."""
    sample = dumps(state)
    expected = json.loads(sample)  # a deep copy, and faster than copy.deepcopy
    by_name = {t.name: t for t in tools}
    for name, args in solution:
        by_name[name].run(expected, args)
    return Scenario(
        instruction, state, list(tools), lambda final: final == expected, list(solution), sample
    )


TIERS = ("easy", "medium", "hard")


@dataclass(frozen=True)
class ToolTask:
    """A seeded scenario recipe: ``build(rng, tier)`` makes the scenario from a
    ``random.Random`` seeded by the task id, so the same id always builds the same world.

    ``id`` is ``<family>-<tier>-<seed>``; ``category`` is ``tools`` or ``games``.
    ``distractors`` is the tier's default number of distractor tools."""

    family: str
    category: str
    difficulty: str
    seed: int
    build: Callable[[random.Random, str], Scenario]
    distractors: int = 0

    @property
    def id(self) -> str:
        return f"{self.family}-{self.difficulty}-{self.seed}"

    def scenario(self) -> Scenario:
        return self.build(random.Random(self.id), self.difficulty)
