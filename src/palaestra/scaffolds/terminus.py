"""The ``terminus`` scaffold: a tmux terminal driven by JSON keystrokes, after Terminus-2.

The agent sees a terminal (a tmux session started in the sandbox, ``160x40`` by default) and
answers each observation with one JSON object::

    {"analysis": "...", "plan": "...",
     "commands": [{"keystrokes": "ls -la\\n", "duration": 0.5}],
     "task_complete": false}

Each command's keystrokes are typed into the terminal, then the scaffold waits
``min(duration, max_duration)`` seconds (default duration 1 s, cap 60 s, as in Terminus-2) before
the next command. After the last one, the observation is the terminal output that is *new since
the previous observation* (``New Terminal Output:``), from the line the cursor was on (so the
echo of a typed command shows), capped head and tail. When nothing changed, the screen was
cleared, or a full-screen program (vim, less) runs or just ran, it is the visible screen instead
(``Current Terminal Screen:``). At most ``history_limit`` lines of new output are kept per turn
(the scrollback is cleared at each observation).

Keystrokes (typed with ``tmux send-keys``):

* text is typed literally (``send-keys -l``), and every ``\\n`` in it presses Enter;
* a keystrokes string that is, as a whole, one or more space-separated tmux key names is sent
  as those keys: ``C-c`` (Ctrl+C), ``C-d`` (Ctrl+D), ``C-z``, ``C-l``, ``Escape``, ``Enter``,
  ``Tab``, ``BSpace``, ``Up``/``Down``/``Left``/``Right``, ``Home``, ``End``, ``PageUp``,
  ``PageDown``, ``F1``..``F12`` and ``M-<key>``. ``"C-c"`` interrupts; ``"echo C-c\\n"`` types
  the text;
* an empty keystrokes string types nothing: the command just waits its duration.

``task_complete: true`` is confirmed once, as Terminus-2 does: the first time, the commands
of that response run and the agent is asked whether it is sure (with the terminal state); a
second ``task_complete: true`` in a row ends the episode (``submitted``), any other answer
carries on. If the agent exits the shell (ending the tmux session), the remaining commands of
that response are skipped and a new session is started. A response that is not a usable JSON
object gets guidance and runs nothing; ``max_consecutive_format_errors`` of them in a row end
the episode. Every response counts against ``step_limit``. The first observation holds the task
and the initial screen.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.scaffolds.actions import ProtocolActions, text_response
from palaestra.scaffolds.loop import (
    Execution,
    FormatError,
    LoopConfig,
    TurnLoop,
    TurnScaffold,
    cap,
)
from palaestra.scaffolds.tmux import TmuxSession

SYSTEM_TEMPLATE = """\
You are an AI assistant solving command-line tasks in a Linux terminal (a tmux session, \
{{ width }} columns by {{ height }} rows). You are given a task and the terminal's output; you \
answer with the keystrokes to type next.

Answer with exactly one JSON object and nothing else, in this form:

{
  "analysis": "What you see in the terminal and what it means for the task.",
  "plan": "What you will do next and why.",
  "commands": [
    {"keystrokes": "ls -la\\n", "duration": 0.1},
    {"keystrokes": "cd project\\n", "duration": 0.1}
  ],
  "task_complete": false
}

- "keystrokes" is typed into the terminal exactly as written. End a shell command with a \
newline ("\\n") to run it.
- To press special keys, give a keystrokes string that is only tmux key names: "C-c" for \
Ctrl+C (interrupt), "C-d" for Ctrl+D (end of input), "Escape", "Tab", "Up", "Enter"...
- "duration" is how many seconds to wait after typing before the next command (at most \
{{ max_duration }}; 1 when left out). Use 0.1 for quick commands and longer for slow ones; \
you can always wait more with an empty keystrokes string. Do not wait longer than needed.
- After your commands run you see the terminal output that is new since your last answer.
- Set "task_complete" to true when the task is done; you will be asked to confirm once. \
"commands" may then be empty.
"""

INSTANCE_TEMPLATE = """\
Task:
{{ instruction }}

You have {{ step_limit }} responses in all. When you confirm the task is complete, your work \
is checked by tests you cannot see.

Current terminal state:
{{ screen }}"""

CONFIRM_TEMPLATE = """\
{{ terminal }}

Are you sure you want to mark the task as complete? This will trigger your solution to be \
graded and you won't be able to make any further corrections. If so, include \
"task_complete": true in your JSON response again."""

FORMAT_ERROR_TEMPLATE = """\
Your previous response could not be used, so nothing was typed: {{ error }}

Answer with exactly one JSON object of this form, and nothing else:
{"analysis": "...", "plan": "...", "commands": [{"keystrokes": "ls -la\\n", "duration": 0.1}], \
"task_complete": false}"""


@dataclass
class TerminusScaffoldConfig(LoopConfig):
    system_template: str = SYSTEM_TEMPLATE
    instance_template: str = INSTANCE_TEMPLATE
    confirm_template: str = CONFIRM_TEMPLATE
    format_error_template: str = FORMAT_ERROR_TEMPLATE
    #: The longest wait one command may ask for (Terminus-2: 60 s).
    max_duration: float = 60.0
    #: The wait of a command that gives no duration.
    default_duration: float = 1.0
    width: int = 160
    height: int = 40
    #: Lines of scrollback tmux keeps (cleared at each observation): the most lines of new
    #: output one turn can show, before the head-and-tail cap.
    history_limit: int = 10_000
    #: How long to wait for the shell's first prompt.
    startup_timeout: float = 10.0


class TerminusFormatError(ValueError):
    """A response that is not a usable Terminus JSON object; the message says why."""


@dataclass
class Command:
    keystrokes: str
    duration: float


@dataclass
class TerminusAction:
    commands: list[Command]
    task_complete: bool = False
    analysis: str = ""
    plan: str = ""
    warnings: list[str] = field(default_factory=list)


def _json_object(content: str) -> tuple[Any, list[str]]:
    text = content.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*\n(.*?)\n?```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end < start:
        raise TerminusFormatError("the response holds no JSON object.")
    warnings = []
    if text[:start].strip() or text[end + 1 :].strip():
        warnings.append("text outside the JSON object was ignored; answer with the object only.")
    try:
        return json.loads(text[start : end + 1]), warnings
    except json.JSONDecodeError as e:
        raise TerminusFormatError(f"the JSON object does not parse: {e}.") from None


def parse_action(content: str | None, default_duration: float = 1.0) -> TerminusAction:
    """A response's JSON as an action; raises :class:`TerminusFormatError` naming the problem."""
    value, warnings = _json_object(content or "")
    if not isinstance(value, dict):
        raise TerminusFormatError("the response must be a JSON object.")
    unknown = sorted(set(value) - {"analysis", "plan", "commands", "task_complete"})
    if unknown:
        warnings.append(f"unknown field(s) ignored: {', '.join(unknown)}.")
    for key in ("analysis", "plan"):
        if key not in value:
            warnings.append(f'field "{key}" is missing.')
        elif not isinstance(value[key], str):
            raise TerminusFormatError(f'field "{key}" must be a string.')
    if "commands" not in value:
        raise TerminusFormatError('field "commands" is missing (use [] for no commands).')
    raw = value["commands"]
    if not isinstance(raw, list):
        raise TerminusFormatError('field "commands" must be a list of objects.')
    complete = value.get("task_complete", False)
    if not isinstance(complete, bool):
        raise TerminusFormatError('field "task_complete" must be true or false.')
    commands = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("keystrokes"), str):
            raise TerminusFormatError(
                f'commands[{i}] must be an object with a string "keystrokes" field.'
            )
        extra = sorted(set(item) - {"keystrokes", "duration"})
        if extra:
            warnings.append(f"commands[{i}]: unknown field(s) ignored: {', '.join(extra)}.")
        duration = item.get("duration")
        if duration is None:
            warnings.append(f'commands[{i}]: no "duration"; waited {default_duration:g} s.')
            duration = default_duration
        elif (
            isinstance(duration, bool)
            or not isinstance(duration, int | float)
            or not math.isfinite(duration)
            or duration < 0
        ):
            raise TerminusFormatError(
                f'commands[{i}]: "duration" must be a number of seconds >= 0, '
                f"got {json.dumps(duration)}."
            )
        commands.append(Command(item["keystrokes"], float(duration)))
    return TerminusAction(
        commands=commands,
        task_complete=complete,
        analysis=value.get("analysis", ""),
        plan=value.get("plan", ""),
        warnings=warnings,
    )


#: Printed by the oracle's command once it has run; typed as two words, so only the output,
#: not the echo of the command line, holds it.
_RUN_DONE = "PALAESTRA_ORACLE_DONE"


def _response(commands: list[dict[str, object]], task_complete: bool = False) -> LLMResponse:
    action = {"analysis": "", "plan": "", "commands": commands, "task_complete": task_complete}
    return text_response(json.dumps(action))


class TerminusActions(ProtocolActions):
    """Keystrokes that type the command and print a completion marker, empty keystrokes that
    wait until the marker shows, then ``task_complete`` (twice: the scaffold asks to confirm)."""

    def run(self, request: LLMRequest, command: str, why: str = "") -> LLMResponse:
        done = "printf '%s_%s\\n' PALAESTRA ORACLE_DONE"
        return _response([{"keystrokes": f"{command}; {done}\n", "duration": 0.5}])

    def submit(self, request: LLMRequest) -> LLMResponse:
        return _response([], task_complete=True)

    def after_run(self, request: LLMRequest) -> LLMResponse:
        observations = [m for m in request.messages[2:] if m.get("role") == "user"]
        if any(_RUN_DONE in (m.get("content") or "") for m in observations):
            return self.submit(request)
        return _response([{"keystrokes": "", "duration": 2.0}])


class TerminusTurns(TurnLoop["TerminusScaffold", TerminusAction]):
    """One episode: a tmux session in the sandbox, typed into by JSON actions."""

    resumable = False  # the session's processes are no part of a loop's state
    session: TmuxSession
    #: The previous response set ``task_complete``: one more in a row submits.
    pending_completion = False

    async def context(self) -> dict[str, Any]:
        self.session = TmuxSession(self.sandbox, self.config)
        return {"screen": await self.session.start()}

    def parse(self, response: LLMResponse) -> TerminusAction:
        try:
            return parse_action(response.content, self.config.default_duration)
        except TerminusFormatError as e:
            raise FormatError(self.scaffold.render("format_error", error=str(e)), str(e)) from None

    async def execute(self, action: TerminusAction) -> Execution:
        for command in action.commands:
            if not await self.session.send(command.keystrokes):
                break  # the shell exited: the rest would type into nothing
            await asyncio.sleep(min(command.duration, self.config.max_duration))
        note = "[... output limited: {elided} characters in the middle omitted ...]"
        terminal = cap(await self.session.incremental_output(), self.config.observation_chars, note)
        record = {
            "analysis": action.analysis,
            "plan": action.plan,
            "commands": [
                {"keystrokes": c.keystrokes, "duration": c.duration} for c in action.commands
            ],
            "task_complete": action.task_complete,
            "warnings": action.warnings,
            "output": terminal,
        }
        if action.task_complete and self.pending_completion:
            return Execution(record, submission="")
        self.pending_completion = action.task_complete
        if action.task_complete:
            observation = self.scaffold.render("confirm", terminal=terminal)
        elif action.warnings:
            notes = "\n".join(f"- {w}" for w in action.warnings)
            observation = f"Previous response had warnings:\n{notes}\n\n{terminal}"
        else:
            observation = terminal
        return Execution(record, [{"role": "user", "content": observation}])


class TerminusScaffold(TurnScaffold[TerminusScaffoldConfig]):
    """tmux keystrokes as JSON; see the module docstring for the protocol."""

    name = "terminus"
    config_class = TerminusScaffoldConfig
    template_keys = ("system", "instance", "confirm", "format_error")
    turns = TerminusTurns
    actions = TerminusActions()

    def template_vars(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "width": cfg.width,
            "height": cfg.height,
            "max_duration": f"{cfg.max_duration:g}",
            **super().template_vars(),
        }


__all__ = [
    "TerminusAction",
    "TerminusActions",
    "TerminusFormatError",
    "TerminusScaffold",
    "TerminusScaffoldConfig",
    "parse_action",
]
