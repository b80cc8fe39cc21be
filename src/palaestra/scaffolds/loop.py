"""The turn loop that the ``bash``, ``tools`` and ``terminus`` scaffolds share.

One episode reads as named steps, after mini-swe-agent's default agent::

    messages = opening()                      # system prompt, then the task
    for turn in range(step_limit):
        response = query(turn)                # an LLMRequest to the policy, its LLMResponse back
        action = parse(response)              # the protocol's action, or a FormatError
        execution = execute(action)           # run it in the sandbox: record, next messages
        if execution.submission is not None: finished: "submitted"
        format errors in a row >= limit:      "format_error_limit"
    "step_limit"

An episode waiting for the policy can be resumed elsewhere: :meth:`TurnScaffold.state_of` gives
its loop's :class:`LoopState` (the conversation, the executions so far, the turn),
``run(..., resume=state)`` goes on from it in another sandbox holding the same files (the
environment's snapshots: :mod:`palaestra.env.fork`). A protocol whose episode lives partly
outside the loop's state (a terminal session's processes) says ``resumable = False``.

A protocol (:class:`TurnLoop` subclass, one instance per episode) gives only ``context``,
``parse`` and ``execute``; the loop decides the outcome. Limits compose the same way for every
scaffold: every response counts against ``step_limit`` and ``max_consecutive_format_errors``
unusable responses in a row end the episode, both decided here; the agent's time limit is the
environment's (it stops the scaffold: ``agent_timeout``), and an exception raised by a step
ends the episode as ``error`` there too. A protocol's own waits (a command's timeout, a
keystroke's duration) are its configuration.
"""

from __future__ import annotations

import abc
import copy
import warnings
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment
from pydantic import TypeAdapter

from palaestra.llm.types import LLMRequest, LLMResponse, SamplingParams
from palaestra.scaffolds.actions import ProtocolActions
from palaestra.scaffolds.base import Outcome

if TYPE_CHECKING:
    from palaestra.llm.client import LLMClient
    from palaestra.sandbox.base import Sandbox
    from palaestra.tasks import Task

Message = dict[str, Any]
#: Validates (and copies) a message once, when it joins the conversation.
_message = TypeAdapter(Message)
A = TypeVar("A")
C = TypeVar("C", bound="LoopConfig")


@dataclass
class LoopConfig:
    """The settings every turn-loop scaffold has; each scaffold's config adds its own."""

    step_limit: int = 50
    max_consecutive_format_errors: int = 3
    #: Observations longer than this many characters show only head and tail halves.
    observation_chars: int = 10_000
    sampling: SamplingParams = field(default_factory=SamplingParams)


class FormatError(ValueError):
    """A response the protocol cannot act on: ``str(e)`` is the guidance the agent gets as its
    next user message, ``record`` what the turn's execution record holds under
    ``format_error``."""

    def __init__(self, guidance: str, record: Any) -> None:
        super().__init__(guidance)
        self.record = record


@dataclass(frozen=True)
class LoopState:
    """Where a turn loop stands while it waits for the policy's answer on turn ``turn``: the
    conversation that request holds, the executions of the turns before and the format errors
    in a row. Its lists are its own (resuming twice from it gives the same episode twice)."""

    turn: int
    messages: list[Message]
    executions: list[dict[str, Any]]
    format_errors: int


@dataclass
class Execution:
    """What executing an action produced (the policy's observation is the next request)."""

    #: The turn's execution record (the loop puts ``turn`` first): ``Outcome.executions``.
    record: dict[str, Any]
    #: The messages the agent sees next (none once it has finished).
    messages: list[Message] = field(default_factory=list)
    #: The outcome's message when the action submitted the work; None while the agent works on.
    submission: str | None = None
    #: Nothing usable was done: counts towards ``max_consecutive_format_errors``.
    format_error: bool = False


def head_tail(text: str, limit: int) -> tuple[str, str, int] | None:
    """Split text longer than ``limit`` into (head, tail, elided count); None when it fits."""
    if len(text) <= limit:
        return None
    half = limit // 2
    return text[:half], text[-half:], len(text) - 2 * half


def cap(text: str, limit: int, note: str) -> str:
    """``text``, or its head and tail around ``note`` (formatted with ``elided``) when longer
    than ``limit`` characters."""
    parts = head_tail(text, limit)
    if parts is None:
        return text
    head, tail, elided = parts
    return f"{head}\n{note.format(elided=elided)}\n{tail}"


_jinja = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True)


class TurnScaffold(Generic[C]):
    """A scaffold whose agent part is the turn loop: configuration and templates.

    Subclasses name the config class, the template keys (``<key>_template`` fields of the
    config; ``system`` and ``instance`` open every episode), the per-episode protocol class
    (``turns``) and how a policy acts in the protocol (``actions``), and add their constant
    template variables (:meth:`template_vars`).
    """

    name: ClassVar[str]
    config_class: ClassVar[type[Any]]
    template_keys: ClassVar[tuple[str, ...]]
    turns: ClassVar[type[TurnLoop[Any, Any]]]
    actions: ClassVar[ProtocolActions]

    def __init__(self, config: C | None = None, **overrides: Any) -> None:
        self.config: C = replace(config or self.config_class(), **overrides)
        self._templates = {
            key: _jinja.from_string(getattr(self.config, f"{key}_template"))
            for key in self.template_keys
        }
        #: The loop of each running episode, by the id of the client it asks (:meth:`state_of`).
        self._loops: dict[int, TurnLoop[Any, Any]] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its config (compiled templates do not pickle): a scaffold with options
        travels to a Ray cluster's actors."""
        return (type(self), (self.config,))

    def template_vars(self) -> dict[str, Any]:
        """Variables every template of this scaffold sees."""
        return {"step_limit": self.config.step_limit}

    def render(self, key: str, **context: Any) -> str:
        return self._templates[key].render(**self.template_vars(), **context)

    async def run(
        self, task: Task, sandbox: Sandbox, llm: LLMClient, resume: LoopState | None = None
    ) -> Outcome:
        """Play an episode asking ``llm``; from ``resume`` on when given (``sandbox`` then
        holds the files of the moment it was taken)."""
        if resume is not None and not self.turns.resumable:
            raise ValueError(f"scaffold {self.name!r} cannot resume an episode")
        loop = self.turns(self, task, sandbox)
        self._loops[id(llm)] = loop
        try:
            return await loop.run(llm, resume)
        finally:
            if self._loops.get(id(llm)) is loop:
                del self._loops[id(llm)]

    def state_of(self, llm: LLMClient) -> LoopState:
        """The state of the running episode that asks ``llm``, taken while it waits for an
        answer; raises ValueError when no episode of this scaffold asks it."""
        loop = self._loops.get(id(llm))
        if loop is None:
            raise ValueError(f"no episode of scaffold {self.name!r} asks this client")
        return loop.state()


S = TypeVar("S", bound=TurnScaffold[Any])


class TurnLoop(abc.ABC, Generic[S, A]):
    """One episode of a turn-loop scaffold; subclasses give the protocol's steps."""

    #: Tool specs every request carries (None: the protocol is plain text).
    tools: ClassVar[list[dict[str, Any]] | None] = None
    #: Whether an episode resumes from its :class:`LoopState` alone.
    resumable: ClassVar[bool] = True

    def __init__(self, scaffold: S, task: Task, sandbox: Sandbox) -> None:
        self.scaffold = scaffold
        self.config = scaffold.config
        self.task = task
        self.sandbox = sandbox
        self.messages: list[Message] = []
        self.executions: list[dict[str, Any]] = []
        self.format_errors = 0
        self.turn = 0

    async def run(self, llm: LLMClient, resume: LoopState | None = None) -> Outcome:
        if resume is None:
            self.extend(await self.opening())
        else:
            self.turn, self.format_errors = resume.turn, resume.format_errors
            self.messages = list(resume.messages)
            self.executions = copy.deepcopy(resume.executions)
        limit = self.config.step_limit
        for turn in range(self.turn, limit):
            self.turn = turn
            execution = await self.step(await self.query(llm, turn))
            self.executions.append({"turn": turn, **execution.record})
            if execution.submission is not None:
                return Outcome("submitted", turn + 1, execution.submission, self.executions)
            self.format_errors = self.format_errors + 1 if execution.format_error else 0
            if self.format_errors >= self.config.max_consecutive_format_errors:
                return Outcome(
                    "format_error_limit",
                    turn + 1,
                    f"{self.format_errors} malformed responses in a row",
                    self.executions,
                )
            self.extend(execution.messages)
        message = f"reached {limit} steps"
        return Outcome(
            "step_limit", limit, message, self.executions, next_request=self.request(limit)
        )

    async def opening(self) -> list[Message]:
        """The system prompt and the task, rendered with :meth:`context`."""
        context = await self.context()
        instruction = self.task.instruction.strip()
        return [
            {"role": "system", "content": self.scaffold.render("system", **context)},
            {
                "role": "user",
                "content": self.scaffold.render("instance", instruction=instruction, **context),
            },
        ]

    def state(self) -> LoopState:
        """Where the loop stands (see :class:`LoopState`); its messages are shared (never
        changed once in the conversation), the executions copied."""
        return LoopState(
            self.turn, list(self.messages), copy.deepcopy(self.executions), self.format_errors
        )

    def extend(self, messages: list[Message]) -> None:
        """Append messages to the conversation, each validated (and copied) here, once.

        The conversation is append-only: a message in it is never changed, so every later
        request shares it instead of validating and copying the whole history again, and a
        request handed out keeps its content however the episode goes on.
        """
        self.messages.extend(_message.validate_python(m) for m in messages)

    def request(self, turn: int) -> LLMRequest:
        """Turn ``turn``'s request: the conversation so far. Its metadata names the task, the
        turn and the scaffold, and counts the format errors in a row just before this turn
        (``format_errors``: above 0 when the previous response was a format error), which the
        environment reports per turn (its shaping hook).

        Built without validation, in time independent of the conversation's length: its parts
        are validated already (each message as it joined, the sampling and tool specs with the
        scaffold). The message list is the request's own; the messages are shared with later
        requests, so a caller that edits one copies it first.
        """
        return LLMRequest.model_construct(
            messages=list(self.messages),
            tools=self.tools,
            sampling=self.config.sampling,
            metadata={
                "task_id": self.task.id,
                "turn": turn,
                "scaffold": self.scaffold.name,
                "format_errors": self.format_errors,
            },
        )

    async def query(self, llm: LLMClient, turn: int) -> LLMResponse:
        """Ask the policy; its response joins the conversation."""
        response = await llm.complete(self.request(turn))
        self.extend([response.to_message()])
        return response

    async def step(self, response: LLMResponse) -> Execution:
        """Parse the response and execute its action; a format error becomes guidance."""
        try:
            action = self.parse(response)
        except FormatError as e:
            guidance = {"role": "user", "content": str(e)}
            return Execution({"format_error": e.record}, [guidance], format_error=True)
        return await self.execute(action)

    # -- the protocol -------------------------------------------------------------------------

    async def context(self) -> dict[str, Any]:
        """Template variables of the opening messages (set-up of the episode goes here)."""
        return {}

    @abc.abstractmethod
    def parse(self, response: LLMResponse) -> A:
        """The response's action; raises :class:`FormatError` when there is none usable."""

    @abc.abstractmethod
    async def execute(self, action: A) -> Execution:
        """Run the action in the sandbox."""


def __getattr__(name: str) -> Any:
    """``Observation``: the deprecated name of :class:`Execution` (the policy's observation is
    the request; what executing an action produced is an execution)."""
    if name == "Observation":
        warnings.warn(
            "palaestra.scaffolds.loop.Observation is deprecated: use Execution",
            DeprecationWarning,
            stacklevel=2,
        )
        return Execution
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
