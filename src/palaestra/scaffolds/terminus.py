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
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

from palaestra.llm.types import LLMRequest, SamplingParams
from palaestra.sandbox.base import SandboxError
from palaestra.scaffolds.base import Outcome
from palaestra.scaffolds.bash import head_tail

if TYPE_CHECKING:
    from palaestra.llm.client import LLMClient
    from palaestra.sandbox.base import Sandbox
    from palaestra.tasks import Task

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

#: tmux key names a keystrokes string may consist of to be sent as keys rather than text.
_KEY = re.compile(
    r"(C-[a-z@\[\]\\^_]|M-\S|Escape|Enter|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End"
    r"|PageUp|PageDown|PPage|NPage|IC|DC|F[1-9]|F1[0-2])"
)
_KEYS = re.compile(rf"{_KEY.pattern}( {_KEY.pattern})*")


@dataclass
class TerminusScaffoldConfig:
    system_template: str = SYSTEM_TEMPLATE
    instance_template: str = INSTANCE_TEMPLATE
    confirm_template: str = CONFIRM_TEMPLATE
    format_error_template: str = FORMAT_ERROR_TEMPLATE
    step_limit: int = 50
    #: The longest wait one command may ask for (Terminus-2: 60 s).
    max_duration: float = 60.0
    #: The wait of a command that gives no duration.
    default_duration: float = 1.0
    max_consecutive_format_errors: int = 3
    #: Observations longer than this many characters show only head and tail halves.
    observation_chars: int = 10_000
    width: int = 160
    height: int = 40
    #: Lines of scrollback tmux keeps (cleared at each observation): the most lines of new
    #: output one turn can show, before the head-and-tail cap.
    history_limit: int = 10_000
    #: How long to wait for the shell's first prompt.
    startup_timeout: float = 10.0
    sampling: SamplingParams = field(default_factory=SamplingParams)


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


def key_ops(keystrokes: str) -> list[tuple[str, str]]:
    """The ``tmux send-keys`` calls that type ``keystrokes``: ("key", name) or ("text", s)."""
    if _KEYS.fullmatch(keystrokes.strip()) and keystrokes.strip():
        return [("key", k) for k in keystrokes.split()]
    ops: list[tuple[str, str]] = []
    for i, line in enumerate(keystrokes.split("\n")):
        if i:
            ops.append(("key", "Enter"))
        if line:
            ops.append(("text", line))
    return ops


def _trim(lines: list[str]) -> list[str]:
    """Lines without trailing whitespace, trailing blank lines dropped."""
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


@dataclass
class Snapshot:
    """The pane at one instant: the last ``len(lines) - rows`` history lines and the screen.

    Lines are numbered from the oldest line of the scrollback (0); the screen's first row is
    line ``history_size``, the cursor is on line ``history_size + cursor_y``.
    """

    history_size: int
    cursor_y: int
    rows: int
    lines: list[str]
    #: A full-screen program (vim, less, top) shows its own screen.
    alternate: bool = False

    @property
    def cursor_line(self) -> int:
        return self.history_size + self.cursor_y

    @property
    def first_line(self) -> int:
        """The number of ``lines[0]``."""
        return self.history_size + self.rows - len(self.lines)


def new_output(snapshot: Snapshot, mark: int, mark_text: str) -> list[str] | None:
    """The lines from line ``mark`` (the cursor line at the previous observation) on.

    That line is included, since the agent may have typed on it (the echo of its command).
    None when there is nothing new, or when the history was cleared (``mark`` is past the
    cursor: ``reset``, or a ``clear`` that does not scroll the screen into the history).
    """
    if mark > snapshot.cursor_line:
        return None
    fresh = _trim(snapshot.lines[max(mark - snapshot.first_line, 0) :])
    if not fresh or fresh == [mark_text]:
        return None
    return fresh


_SEND_SCRIPT = """\
s=$1; shift
while [ $# -gt 0 ]; do
  if [ "$1" = text ]; then tmux send-keys -t "$s" -l -- "$2" || exit
  else tmux send-keys -t "$s" "$2" || exit; fi
  shift 2
done"""

#: Literal text is typed in pieces of this many characters (tmux limits one command's size).
_CHUNK = 2048
#: At most this many characters of keystrokes go in one exec (the argv size limit).
_BATCH = 64 * 1024
_POSITION = "#{history_size} #{cursor_y} #{pane_height} #{alternate_on}"


class TmuxSession:
    """A tmux session in a sandbox, driven through ``Sandbox.exec``.

    The tmux server lives inside the sandbox, so closing the sandbox (or ``kill_all``) ends it.
    Output diffs are by line position: the cursor line at each observation is remembered and
    the next observation shows the lines from it on.
    """

    def __init__(self, sandbox: Sandbox, config: TerminusScaffoldConfig, name: str = "main"):
        self.sandbox = sandbox
        self.config = config
        self.name = name
        self._mark = 0
        self._mark_text = ""
        self._alternate = False

    async def start(self) -> str:
        """Start the session and return the first screen once the shell has drawn its prompt."""
        cfg = self.config
        conf = "/tmp/.palaestra-tmux.conf"
        res = await self.sandbox.exec(
            [
                "sh",
                "-c",
                'command -v tmux >/dev/null || { echo "tmux is not installed"; exit 127; }\n'
                'printf "set -g history-limit %s\\n" "$1" > "$2" && shift 2 && exec tmux "$@"',
                "sh",
                str(cfg.history_limit),
                conf,
                "-f",
                conf,
                "new-session",
                "-d",
                "-s",
                self.name,
                "-x",
                str(cfg.width),
                "-y",
                str(cfg.height),
                "-c",
                self.sandbox.spec.workdir,
            ],
            timeout=30,
        )
        if not res.ok:
            raise SandboxError(
                f"could not start tmux in the sandbox ({res.output.strip() or res.exit_code}). "
                "The terminus scaffold needs tmux inside the sandbox: for the local sandbox "
                "install it on the host (apt-get install -y tmux); for images, in the image."
            )
        deadline = time.monotonic() + cfg.startup_timeout
        while True:
            snap = await self.snapshot()
            if any(line.strip() for line in snap.lines) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        self._remember(snap)
        return self._screen(snap)

    def _remember(self, snap: Snapshot) -> None:
        self._alternate = snap.alternate
        self._mark = snap.cursor_line
        index = self._mark - snap.first_line
        self._mark_text = snap.lines[index].rstrip() if 0 <= index < len(snap.lines) else ""

    @staticmethod
    def _screen(snap: Snapshot) -> str:
        return "\n".join(_trim(snap.lines[len(snap.lines) - snap.rows :]))

    async def alive(self) -> bool:
        res = await self.sandbox.exec(["tmux", "has-session", "-t", self.name], timeout=30)
        return res.ok

    async def send(self, keystrokes: str) -> bool:
        """Type ``keystrokes``; False when the session is gone (its shell exited)."""
        batches: list[list[str]] = [[]]
        size = 0
        for kind, value in key_ops(keystrokes):
            pieces = [value[i : i + _CHUNK] for i in range(0, len(value), _CHUNK)]
            for piece in pieces if kind == "text" else [value]:
                if size + len(piece) > _BATCH:
                    batches.append([])
                    size = 0
                batches[-1] += [kind, piece]
                size += len(piece)
        if not batches[0]:
            return await self.alive()
        for args in batches:
            res = await self.sandbox.exec(
                ["sh", "-c", _SEND_SCRIPT, "sh", self.name, *args], timeout=30
            )
            if not res.ok:
                if not await self.alive():
                    return False
                raise SandboxError(f"tmux send-keys failed: {res.output.strip()}")
        return True

    async def snapshot(self) -> Snapshot:
        """Position and lines of the pane, then its scrollback cleared: one tmux command, so
        nothing printed in between is lost. The scrollback then only ever holds the lines
        scrolled off since the previous snapshot, and a snapshot reads no more than those.
        """
        target = ("-t", self.name)
        res = await self.sandbox.exec(
            ["tmux", "display-message", "-p", *target, _POSITION, ";"]
            + ["capture-pane", "-p", *target, "-S", "-", ";", "clear-history", *target],
            timeout=30,
            output_limit=64 << 20,
        )
        if not res.ok:
            raise SandboxError(f"tmux capture-pane failed: {res.output.strip() or res.exit_code}")
        head, _, body = res.stdout.partition("\n")
        history_size, cursor_y, rows, alternate = map(int, head.split())
        lines = body.split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # the newline ending the last row
        return Snapshot(history_size, cursor_y, rows, lines, bool(alternate))

    async def incremental_output(self) -> str:
        """What is new since the last call (or since :meth:`start`); see the module docstring.

        When the session has ended (the agent exited its shell), a new one is started and
        the observation says so.
        """
        try:
            snap = await self.snapshot()
        except SandboxError:
            if await self.alive():
                raise
            screen = await self.start()
            return (
                "The shell exited, which ended the terminal session; a new session was started "
                f"(earlier output and shell state are gone).\nCurrent Terminal Screen:\n{screen}"
            )
        full_screen = snap.alternate or self._alternate  # a full-screen program ran or runs
        fresh = None if full_screen else new_output(snap, self._mark, self._mark_text)
        mark_text = self._mark_text
        self._remember(snap)
        if fresh is None:
            return "Current Terminal Screen:\n" + self._screen(snap)
        note = ""
        if not fresh[0].startswith(mark_text):  # tmux dropped the oldest lines past its limit
            note = "[earlier lines of new output went past the scrollback and are not shown]\n"
        return "New Terminal Output:\n" + note + "\n".join(fresh)


_jinja = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True)


class TerminusScaffold:
    """tmux keystrokes as JSON; see the module docstring for the protocol."""

    name = "terminus"

    def __init__(self, config: TerminusScaffoldConfig | None = None, **overrides: Any) -> None:
        self.config = replace(config or TerminusScaffoldConfig(), **overrides)
        self._templates = {
            key: _jinja.from_string(getattr(self.config, f"{key}_template"))
            for key in ("system", "instance", "confirm", "format_error")
        }

    def _render(self, key: str, **context: Any) -> str:
        cfg = self.config
        return self._templates[key].render(
            width=cfg.width,
            height=cfg.height,
            max_duration=f"{cfg.max_duration:g}",
            step_limit=cfg.step_limit,
            **context,
        )

    def _cap(self, text: str) -> str:
        parts = head_tail(text, self.config.observation_chars)
        if parts is None:
            return text
        head, tail, elided = parts
        return (
            f"{head}\n[... output limited: {elided} characters in the middle omitted ...]\n{tail}"
        )

    async def run(self, task: Task, sandbox: Sandbox, llm: LLMClient) -> Outcome:
        cfg = self.config
        session = TmuxSession(sandbox, cfg)
        screen = await session.start()
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self._render("system")},
            {
                "role": "user",
                "content": self._render(
                    "instance", instruction=task.instruction.strip(), screen=screen
                ),
            },
        ]
        trajectory: list[dict[str, Any]] = []
        format_errors = 0
        pending_completion = False
        for turn in range(cfg.step_limit):
            response = await llm.complete(
                LLMRequest(
                    messages=list(messages),
                    sampling=cfg.sampling,
                    metadata={"task_id": task.id, "turn": turn, "scaffold": self.name},
                )
            )
            messages.append(response.to_message())
            try:
                action = parse_action(response.content, cfg.default_duration)
            except TerminusFormatError as e:
                format_errors += 1
                trajectory.append({"turn": turn, "format_error": str(e)})
                if format_errors >= cfg.max_consecutive_format_errors:
                    return Outcome(
                        "format_error_limit",
                        turn + 1,
                        f"{format_errors} malformed responses in a row",
                        trajectory,
                    )
                messages.append(
                    {"role": "user", "content": self._render("format_error", error=str(e))}
                )
                continue
            format_errors = 0
            for command in action.commands:
                if not await session.send(command.keystrokes):
                    break  # the shell exited: the rest would type into nothing
                await asyncio.sleep(min(command.duration, cfg.max_duration))
            terminal = self._cap(await session.incremental_output())
            trajectory.append(
                {
                    "turn": turn,
                    "analysis": action.analysis,
                    "plan": action.plan,
                    "commands": [
                        {"keystrokes": c.keystrokes, "duration": c.duration}
                        for c in action.commands
                    ],
                    "task_complete": action.task_complete,
                    "warnings": action.warnings,
                    "output": terminal,
                }
            )
            if action.task_complete and pending_completion:
                return Outcome("submitted", turn + 1, "", trajectory)
            pending_completion = action.task_complete
            if action.task_complete:
                observation = self._render("confirm", terminal=terminal)
            elif action.warnings:
                notes = "\n".join(f"- {w}" for w in action.warnings)
                observation = f"Previous response had warnings:\n{notes}\n\n{terminal}"
            else:
                observation = terminal
            messages.append({"role": "user", "content": observation})
        return Outcome("step_limit", cfg.step_limit, f"reached {cfg.step_limit} steps", trajectory)


__all__ = [
    "TerminusAction",
    "TerminusFormatError",
    "TerminusScaffold",
    "TerminusScaffoldConfig",
    "Snapshot",
    "TmuxSession",
    "key_ops",
    "new_output",
    "parse_action",
]
