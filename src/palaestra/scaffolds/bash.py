"""The ``bash`` scaffold: mini-swe-agent's protocol, in our own code.

Each response must hold exactly one fenced ```` ```bash ```` block; the command runs in the
sandbox and its return code and output come back as the next user message. The agent submits by
running ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` (the first line of the output must be the
sentinel). A response with zero or several blocks gets a format-error message; too many in a row
end the episode. Every response counts against the step limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from palaestra.llm.types import LLMRequest, LLMResponse
from palaestra.scaffolds.actions import ProtocolActions, text_response
from palaestra.scaffolds.loop import (
    Execution,
    FormatError,
    LoopConfig,
    TurnLoop,
    TurnScaffold,
    head_tail,
)

if TYPE_CHECKING:
    from palaestra.sandbox.base import ExecResult

SUBMIT_SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
ACTION_RE = re.compile(r"```(?:bash|sh)\s*\n(.*?)\n```", re.DOTALL)
#: With ``bare_fences``: also ```` ```shell ```` and a fence that names no language.
LENIENT_ACTION_RE = re.compile(r"```(?:bash|sh|shell)?[ \t]*\n(.*?)\n```", re.DOTALL)

SYSTEM_TEMPLATE = """\
You are a skilled software engineer working in a Linux shell to complete a task.

Every response must contain EXACTLY ONE bash code block with the command(s) to run, in this form:

```bash
your_command_here
```

Begin with a short explanation of your reasoning, then the block. Each command runs in a fresh \
subshell started in {{ workdir }}: a `cd` or variable does not carry over to the next command, so \
chain with `&&` where needed. Commands are not interactive (no editors, no pagers); edit files \
with scripts, `sed` or heredocs. Each command may run for at most {{ command_timeout }} seconds.
"""

INSTANCE_TEMPLATE = """\
<task>
{{ instruction }}
</task>

You are in {{ workdir }}, which holds the files of the task. Work step by step: explore, make \
the change, and test it yourself. You have {{ step_limit }} responses in all.

When you are done, and only then, submit your work by running exactly this command, on its own:

```bash
echo {{ sentinel }}
```

After submission you cannot continue. Your work is then checked by tests you cannot see.
"""

OBSERVATION_TEMPLATE = """\
<returncode>{{ result.exit_code }}</returncode>
{% if truncated_output is none -%}
<output>
{{ result.output }}</output>
{%- else -%}
<warning>The output was {{ result.output | length }} characters long; only its head and tail \
are shown. Narrow your command (grep, head, tail, sed -n) to see what you need.</warning>
<output_head>
{{ truncated_output[0] }}</output_head>
<elided_chars>{{ truncated_output[2] }} characters elided</elided_chars>
<output_tail>
{{ truncated_output[1] }}</output_tail>
{%- endif %}"""

TIMEOUT_TEMPLATE = """\
The command did not finish within {{ timeout }} seconds and was killed.
{% if result.output -%}
Output before it was killed:
<output>
{{ result.output[-4000:] }}</output>
{%- endif %}
Use a faster command, run it in the background with a timeout, or split the work."""

FORMAT_ERROR_TEMPLATE = """\
Your response contained {{ n_actions }} bash code blocks; it must contain EXACTLY ONE, like this:

```bash
your_command_here
```

If you are done, submit with:

```bash
echo {{ sentinel }}
```"""


@dataclass
class BashScaffoldConfig(LoopConfig):
    system_template: str = SYSTEM_TEMPLATE
    instance_template: str = INSTANCE_TEMPLATE
    observation_template: str = OBSERVATION_TEMPLATE
    timeout_template: str = TIMEOUT_TEMPLATE
    format_error_template: str = FORMAT_ERROR_TEMPLATE
    command_timeout: float = 180.0
    #: Also take a block fenced with no language (or ``shell``) as the command: small models
    #: often drop the tag. Off by default, where a bare block may be output the agent quotes.
    bare_fences: bool = False


def parse_actions(content: str | None, *, bare_fences: bool = False) -> list[str]:
    """Every fenced bash block in a response, in order."""
    pattern = LENIENT_ACTION_RE if bare_fences else ACTION_RE
    return [m.strip() for m in pattern.findall(content or "")]


def is_submission(result: ExecResult) -> bool:
    lines = result.stdout.lstrip().splitlines()
    return bool(lines) and lines[0].strip() == SUBMIT_SENTINEL


class BashActions(ProtocolActions):
    """A fenced bash block; submitting runs ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``."""

    def run(self, request: LLMRequest, command: str, why: str = "") -> LLMResponse:
        return text_response(f"{why}\n\n```bash\n{command}\n```")

    def submit(self, request: LLMRequest) -> LLMResponse:
        return self.run(request, f"echo {SUBMIT_SENTINEL}", "Submitting.")


class BashTurns(TurnLoop["BashScaffold", str]):
    """One episode: exactly one bash block per response, run in the sandbox."""

    async def context(self) -> dict[str, Any]:
        return {"workdir": self.sandbox.spec.workdir}

    def parse(self, response: LLMResponse) -> str:
        actions = parse_actions(response.content, bare_fences=self.config.bare_fences)
        if len(actions) != 1:
            guidance = self.scaffold.render("format_error", n_actions=len(actions))
            raise FormatError(guidance, len(actions))
        return actions[0]

    async def execute(self, action: str) -> Execution:
        result = await self.sandbox.exec(action, timeout=self.config.command_timeout)
        record = {
            "command": action,
            "exit_code": result.exit_code,
            "output": result.output,
            "timed_out": result.timed_out,
            "truncated": result.truncated,
            "duration_s": result.duration_s,
        }
        if is_submission(result):
            submitted = "".join(result.stdout.lstrip().splitlines(keepends=True)[1:])
            return Execution(record, submission=submitted)
        observation = {"role": "user", "content": self.scaffold.observation(result)}
        return Execution(record, [observation])


class BashScaffold(TurnScaffold[BashScaffoldConfig]):
    """One bash block per response; see the module docstring for the protocol."""

    name = "bash"
    config_class = BashScaffoldConfig
    template_keys = ("system", "instance", "observation", "timeout", "format_error")
    turns = BashTurns
    actions = BashActions()

    def template_vars(self) -> dict[str, Any]:
        return {
            "sentinel": SUBMIT_SENTINEL,
            "command_timeout": int(self.config.command_timeout),
            **super().template_vars(),
        }

    def observation(self, result: ExecResult) -> str:
        if result.timed_out:
            return self.render("timeout", result=result, timeout=self.config.command_timeout)
        return self.render(
            "observation",
            result=result,
            truncated_output=head_tail(result.output, self.config.observation_chars),
        )
