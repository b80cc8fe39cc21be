"""Claude Code (``@anthropic-ai/claude-code``) as a harness: Anthropic Messages, streamed, with
tool use (its ``Bash``, ``Read``, ``Edit``, ``Write``, ... tools).

One run is ``claude -p <instruction> --dangerously-skip-permissions`` in the task's working
directory, with its default tools (``--bare`` would cut them to Bash, Read and Edit): the API
key it is given is used as is (no sign-in), the permission flag lets its tools act without
asking (``IS_SANDBOX=1`` allows that flag as root), ``--output-format json`` ends the
run with one JSON object whose ``result`` is the harness's own error when it failed. Its
telemetry, error reporting, update checks and other non-essential traffic are turned off by
environment variables; its side requests for a small model name the same model, so every
call it makes reaches the proxy and is one observation. A task's MCP servers are written to a
file for ``--mcp-config`` (with ``--strict-mcp-config``, and ``--allowedTools mcp__<server>``
for each): Claude Code starts a stdio server in the sandbox and offers its tools as
``mcp__<server>__<tool>``.
"""

from __future__ import annotations

import json
import re

from palaestra.scaffolds.external import last_error_line
from palaestra.scaffolds.harness.base import Harness, HarnessRun, ShellToolActions
from palaestra.scaffolds.mcp_config import render_mcp_config


def mcp_file(run: HarnessRun) -> str:
    """Where the task's MCP servers are written for ``--mcp-config``."""
    return f"{run.home}/mcp.json"


class ClaudeCode(Harness):
    name = "claude-code"
    package = "@anthropic-ai/claude-code"
    version = "2.1.332"
    bin = "claude"
    wire = "anthropic-messages"
    actions = ShellToolActions("Bash")
    summary = "Claude Code over Anthropic Messages (tool use, streaming)"

    def command(self, run: HarnessRun) -> list[str]:
        return [
            "sh",
            "-c",
            'task="$(cat "$1")"; model="$2"; shift 2; exec "$0" -p "$task" '
            "--dangerously-skip-permissions --no-session-persistence --output-format json "
            '--model "$model" "$@"',
            run.executable,
            run.instruction_file,
            run.model,
            *self.mcp_args(run),
        ]

    def mcp_args(self, run: HarnessRun) -> list[str]:
        """The task's MCP servers: only those in the file :meth:`files` writes (no project
        ``.mcp.json`` of the agent's), their tools allowed without asking."""
        if not run.mcp_servers:
            return []
        allowed = ",".join(f"mcp__{re.sub('[^A-Za-z0-9_-]', '_', s.name)}" for s in run.mcp_servers)
        return ["--mcp-config", mcp_file(run), "--strict-mcp-config", "--allowedTools", allowed]

    def files(self, run: HarnessRun) -> dict[str, str]:
        if not run.mcp_servers:
            return {}
        return {mcp_file(run): render_mcp_config(self.name, run.mcp_servers)}

    def env(self, run: HarnessRun) -> dict[str, str]:
        return {
            "ANTHROPIC_BASE_URL": run.proxy_url,
            "ANTHROPIC_API_KEY": run.api_key,
            "ANTHROPIC_MODEL": run.model,
            "ANTHROPIC_SMALL_FAST_MODEL": run.model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": run.model,
            "CLAUDE_CONFIG_DIR": f"{run.home}/.claude",
            "IS_SANDBOX": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_BUG_COMMAND": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
            **({"ENABLE_TOOL_SEARCH": "false"} if run.mcp_servers else {}),
        }

    def last_error(self, output: str) -> str:
        """The ``result`` of its final JSON object when that says it failed (an API error,
        say), else the last error line of its output."""
        for line in reversed(output.splitlines()):
            line = line.strip()
            if line.startswith("{") and '"type":"result"' in line.replace(" ", ""):
                try:
                    result = json.loads(line)
                except ValueError:
                    break
                if result.get("is_error") and result.get("result"):
                    return f"claude-code: {str(result['result'])[:300]}"
                break
        return last_error_line(output)
