"""The ``tools`` scaffold: OpenAI function calling with ``bash``, ``view``, ``edit`` and ``submit``.

Every request carries the four tools' JSON schemas in ``LLMRequest.tools`` (OpenAI format). The
policy answers with ``tool_calls``; each call is executed and answered by a ``role: tool``
message carrying the call's ``tool_call_id``, in the order the calls were made.

Rules:

* **Parallel calls.** All calls of one response run, one after the other, in order. ``submit``
  among them ends the episode once every call of that response has run (calls after it still
  run), so a response may do its last edit and submit at once.
* **Malformed calls** (unknown tool, arguments that are not a JSON object, missing, extra or
  mistyped arguments) are answered, in their own tool message, with what is wrong and the
  tool's schema; the other calls of the response still run.
* **Format errors.** A response with no tool call gets a reminder as a user message. A response
  with no call or only malformed calls is a format error; ``max_consecutive_format_errors`` of
  them in a row end the episode (``format_error_limit``). One well-formed call resets the count.
* **Steps.** Every response counts against ``step_limit``.
* **Files.** ``view`` and ``edit`` go through the sandbox API, so they reach any path the agent
  can write; relative paths are taken from the working directory. ``edit`` replaces an exact
  string that must occur exactly once; with an empty ``old_str`` it creates a file that does not
  exist yet (parents included) and refuses to touch one that does.
* **MCP tools.** A task's ``[environment] mcp_servers`` are started for the episode and their
  tools offered as ``mcp__<server>__<tool>`` next to the built-ins
  (:mod:`palaestra.scaffolds.mcp_client`); a tool's own error is a refusal, not a format error.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from palaestra.llm.types import LLMRequest, LLMResponse, ToolCall
from palaestra.scaffolds.actions import SCRIPTED_MODEL, ProtocolActions
from palaestra.scaffolds.file_tools import edit_path, view_path
from palaestra.scaffolds.loop import Execution, LoopConfig, TurnLoop, TurnScaffold, cap
from palaestra.scaffolds.tool_calls import ToolCallError, check_call

if TYPE_CHECKING:
    from palaestra.llm.client import LLMClient
    from palaestra.sandbox.base import ExecResult
    from palaestra.scaffolds.base import Outcome
    from palaestra.scaffolds.loop import LoopState
    from palaestra.scaffolds.mcp_client import MCPTools

SYSTEM_TEMPLATE = """\
You are a skilled software engineer completing a task in a Linux sandbox. You act only by \
calling the tools you are given: `bash` runs a shell command, `view` shows a file (with line \
numbers) or lists a directory, `edit` replaces an exact string in a file (or creates a new \
file), and `submit` ends your work.

Each `bash` command runs in a fresh subshell started in {{ workdir }}: a `cd` or variable does \
not carry over, so chain with `&&` where needed. Commands are not interactive (no editors, no \
pagers). A command may run for at most {{ command_timeout }} seconds. Relative paths given to \
`view` and `edit` are taken from {{ workdir }}. You may make several tool calls in one \
response; they run in order.
"""

INSTANCE_TEMPLATE = """\
<task>
{{ instruction }}
</task>

You are in {{ workdir }}, which holds the files of the task. Work step by step: explore, make \
the change, and test it yourself. You have {{ step_limit }} responses in all.

When you are done, and only then, call the `submit` tool. After that you cannot continue; your \
work is then checked by tests you cannot see.
"""

NO_TOOL_CALL_TEMPLATE = """\
Your response contained no tool call. Act by calling one of the tools: {{ tool_names }}. \
When you are done, call `submit`."""

TOOL_SPECS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command (bash -c) in the working directory and return "
            "its exit code and output. Not interactive.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command to run."},
                    "timeout": {
                        "type": "number",
                        "description": "Seconds before the command is killed (at most the "
                        "scaffold's limit).",
                    },
                },
                "required": ["command"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "view",
            "description": "Show a file with line numbers (long files a window at a time), "
            "or list a directory two levels deep.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File or directory path."},
                    "view_range": {
                        "type": "array",
                        "items": {"type": "integer"},
                        "minItems": 2,
                        "maxItems": 2,
                        "description": "[first, last] line numbers, 1-based and inclusive; "
                        "last may be -1 for the end of the file.",
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "edit",
            "description": "Replace old_str by new_str in a file. old_str must match the "
            "file's text exactly (whitespace included) and occur exactly once. With an empty "
            "old_str, create a new file holding new_str (the file must not exist yet).",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path."},
                    "old_str": {"type": "string", "description": "The exact text to replace."},
                    "new_str": {"type": "string", "description": "The replacement text."},
                },
                "required": ["path", "old_str", "new_str"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Submit your work and end the task. Call it once you are done.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
]

_SPECS_BY_NAME = {spec["function"]["name"]: spec["function"] for spec in TOOL_SPECS}


@dataclass
class ToolsScaffoldConfig(LoopConfig):
    """``observation_chars`` caps tool results (head and tail halves)."""

    system_template: str = SYSTEM_TEMPLATE
    instance_template: str = INSTANCE_TEMPLATE
    no_tool_call_template: str = NO_TOOL_CALL_TEMPLATE
    #: The longest a ``bash`` call may run; a call's own ``timeout`` can only lower it.
    command_timeout: float = 180.0
    #: ``view`` of a file without ``view_range`` shows at most this many lines.
    view_lines: int = 400


def check_arguments(
    call: ToolCall, specs: Mapping[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The call's arguments, checked against its tool's schema in ``specs`` (function specs by
    name; this scaffold's own tools by default); see :func:`~palaestra.scaffolds.tool_calls.
    check_call`."""
    return check_call(call, _SPECS_BY_NAME if specs is None else specs)


class ToolsActions(ProtocolActions):
    """A ``bash`` tool call; submitting calls ``submit``."""

    def _call(self, request: LLMRequest, name: str, turn: int, **arguments: object) -> LLMResponse:
        names = {t.get("function", {}).get("name") for t in request.tools or ()}
        if name not in names:
            raise ValueError(
                f"acting through tool calls needs a `{name}` tool; "
                f"the request offers {sorted(n for n in names if n)}"
            )
        call = ToolCall(id=f"call_{turn}_{name}", name=name, arguments=json.dumps(arguments))
        return LLMResponse(tool_calls=[call], finish_reason="tool_calls", model=SCRIPTED_MODEL)

    def run(self, request: LLMRequest, command: str, why: str = "") -> LLMResponse:
        return self._call(request, "bash", request.metadata.get("turn", 0), command=command)

    def submit(self, request: LLMRequest) -> LLMResponse:
        return self._call(request, "submit", request.metadata.get("turn", 1))


class ToolsTurns(TurnLoop["ToolsScaffold", LLMResponse]):
    """One episode: every tool call of a response runs, in order."""

    tools = TOOL_SPECS
    #: The tools of the task's MCP servers while the episode runs (None: it declares none).
    mcp: MCPTools | None = None

    async def run(self, llm: LLMClient, resume: LoopState | None = None) -> Outcome:
        """The episode; the task's ``[environment] mcp_servers`` are started first (their tools
        join the built-ins, :mod:`palaestra.scaffolds.mcp_client`) and closed at its end."""
        servers = self.task.config.environment.mcp_servers
        if not servers:
            return await super().run(llm, resume)
        try:  # the mcp SDK: an optional extra, ~1.3 s to import
            from palaestra.scaffolds.mcp_client import open_mcp_tools
        except ModuleNotFoundError as e:
            raise RuntimeError(
                f"task {self.task.id!r} declares MCP servers: install the mcp extra "
                "(pip install 'palaestra[mcp]')"
            ) from e
        steps = self.task.config.steps
        later_step = self.task.step is not None and bool(steps) and steps[0].name != self.task.step
        acted = resume is not None or later_step  # the agent has run commands in this sandbox
        async with open_mcp_tools(servers, self.sandbox, agent_acted=acted) as self.mcp:
            self.tools = [*TOOL_SPECS, *self.mcp.specs]  # type: ignore[misc]
            return await super().run(llm, resume)

    async def context(self) -> dict[str, Any]:
        return {"workdir": self.sandbox.spec.workdir}

    def _cap(self, text: str) -> str:
        note = (
            "[... {elided} characters elided; narrow your command or view a line range to see "
            "them ...]"
        )
        return cap(text, self.config.observation_chars, note)

    # -- the tools ----------------------------------------------------------------------------

    async def _bash(self, args: dict[str, Any]) -> tuple[str, ExecResult]:
        limit = self.config.command_timeout
        timeout = min(float(args.get("timeout", limit)), limit)
        if timeout <= 0:
            raise ToolCallError(f"Error: timeout must be positive (at most {limit:g} seconds).")
        result = await self.sandbox.exec(args["command"], timeout=timeout)
        if result.timed_out:
            tail = result.output[-4000:]
            text = f"The command did not finish within {timeout:g} seconds and was killed."
            if tail:
                text += f"\nOutput before it was killed:\n{tail}"
            return text, result
        return f"exit code: {result.exit_code}\n{self._cap(result.output)}", result

    def _path(self, path: str) -> str:
        if not path.strip():
            raise ToolCallError("Error: path is empty; give a file or directory path.")
        return posixpath.normpath(posixpath.join(self.sandbox.spec.workdir, path))

    async def _view(self, args: dict[str, Any]) -> str:
        path = self._path(args["path"])
        return await view_path(self.sandbox, path, args, self.config.view_lines, self._cap)

    async def _edit(self, args: dict[str, Any]) -> str:
        path = self._path(args["path"])
        return await edit_path(self.sandbox, path, args["old_str"], args["new_str"], self._cap)

    # -- the steps ------------------------------------------------------------------------------

    async def _call(self, call: ToolCall) -> tuple[str, dict[str, Any]]:
        """Run one call: its tool message text and its execution record."""
        record: dict[str, Any] = {"id": call.id, "tool": call.name, "arguments": call.arguments}
        try:
            args = self._checked(call)
            if call.name == "bash":
                text, result = await self._bash(args)
                record.update(
                    exit_code=result.exit_code,
                    timed_out=result.timed_out,
                    truncated=result.truncated,
                    duration_s=result.duration_s,
                )
            elif call.name == "view":
                text = await self._view(args)
            elif call.name == "edit":
                text = await self._edit(args)
            elif call.name == "submit":
                text = "Submitted."
            else:
                text = await self._mcp_call(call.name, args, record)
        except ToolCallError as e:
            text = str(e)
            record["error"] = True
        record["output"] = text
        return text, record

    def _checked(self, call: ToolCall) -> dict[str, Any]:
        """The call's arguments, checked against its built-in or MCP tool's schema."""
        if self.mcp is None or call.name not in self.mcp:
            return check_arguments(call)
        try:
            return self.mcp.check(call.name, call.arguments)
        except ValueError as e:
            raise ToolCallError(str(e)) from None

    async def _mcp_call(self, name: str, args: dict[str, Any], record: dict[str, Any]) -> str:
        """Forward a call to its MCP server; a tool's own error is a refusal, not a format
        error (the agent called it correctly)."""
        assert self.mcp is not None
        text, failed = await self.mcp.call(name, args, self.config.command_timeout)
        if failed:
            record["refused"] = True
        return self._cap(text)

    def parse(self, response: LLMResponse) -> LLMResponse:
        return response  # each call is checked as it runs: a malformed one gets its own answer

    async def execute(self, action: LLMResponse) -> Execution:
        calls: list[dict[str, Any]] = []
        messages: list[dict[str, Any]] = []
        submitted = False
        for call in action.tool_calls:
            text, record = await self._call(call)
            calls.append(record)
            submitted = submitted or (call.name == "submit" and "error" not in record)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        record = {"content": action.content, "tool_calls": calls}
        if submitted:
            return Execution(record, submission="")
        if calls and not all("error" in c for c in calls):
            return Execution(record, messages)
        record["format_error"] = True
        if not calls:
            messages.append({"role": "user", "content": self.scaffold.render("no_tool_call")})
        return Execution(record, messages, format_error=True)


class ToolsScaffold(TurnScaffold[ToolsScaffoldConfig]):
    """OpenAI function calling; see the module docstring for the protocol."""

    name = "tools"
    config_class = ToolsScaffoldConfig
    template_keys = ("system", "instance", "no_tool_call")
    turns = ToolsTurns
    actions = ToolsActions()

    def template_vars(self) -> dict[str, Any]:
        return {
            "command_timeout": int(self.config.command_timeout),
            **super().template_vars(),
            "tool_names": ", ".join(_SPECS_BY_NAME),
        }


__all__ = [
    "TOOL_SPECS",
    "ToolCallError",
    "ToolsActions",
    "ToolsScaffold",
    "ToolsScaffoldConfig",
    "check_arguments",
]
