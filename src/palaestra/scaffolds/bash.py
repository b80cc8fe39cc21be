"""The ``bash`` scaffold: mini-swe-agent's protocol, in our own code.

Each response must hold exactly one fenced ```` ```bash ```` block; the command runs in the
sandbox and its return code and output come back as the next user message. The agent submits by
running ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` (the first line of the output must be the
sentinel). A response with zero or several blocks gets a format-error message; too many in a row
end the episode. Every response counts against the step limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

from palaestra.llm.types import LLMRequest, SamplingParams
from palaestra.scaffolds.base import Outcome

if TYPE_CHECKING:
    from palaestra.llm.client import LLMClient
    from palaestra.sandbox.base import ExecResult, Sandbox
    from palaestra.tasks import Task

SUBMIT_SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
ACTION_RE = re.compile(r"```(?:bash|sh)\s*\n(.*?)\n```", re.DOTALL)

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
class BashScaffoldConfig:
    system_template: str = SYSTEM_TEMPLATE
    instance_template: str = INSTANCE_TEMPLATE
    observation_template: str = OBSERVATION_TEMPLATE
    timeout_template: str = TIMEOUT_TEMPLATE
    format_error_template: str = FORMAT_ERROR_TEMPLATE
    step_limit: int = 50
    command_timeout: float = 180.0
    max_consecutive_format_errors: int = 3
    #: Observations longer than this many characters show only head and tail halves.
    observation_chars: int = 10_000
    sampling: SamplingParams = field(default_factory=SamplingParams)


_jinja = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True)


def head_tail(text: str, limit: int) -> tuple[str, str, int] | None:
    """Split text longer than ``limit`` into (head, tail, elided count); None when it fits."""
    if len(text) <= limit:
        return None
    half = limit // 2
    return text[:half], text[-half:], len(text) - 2 * half


def parse_actions(content: str | None) -> list[str]:
    """Every fenced bash block in a response, in order."""
    return [m.strip() for m in ACTION_RE.findall(content or "")]


def is_submission(result: ExecResult) -> bool:
    lines = result.stdout.lstrip().splitlines()
    return bool(lines) and lines[0].strip() == SUBMIT_SENTINEL


class BashScaffold:
    """One bash block per response; see the module docstring for the protocol."""

    name = "bash"

    def __init__(self, config: BashScaffoldConfig | None = None, **overrides: Any) -> None:
        self.config = replace(config or BashScaffoldConfig(), **overrides)
        self._templates = {
            key: _jinja.from_string(getattr(self.config, f"{key}_template"))
            for key in ("system", "instance", "observation", "timeout", "format_error")
        }

    def _render(self, key: str, **context: Any) -> str:
        return self._templates[key].render(
            sentinel=SUBMIT_SENTINEL,
            command_timeout=int(self.config.command_timeout),
            step_limit=self.config.step_limit,
            **context,
        )

    def observation(self, result: ExecResult) -> str:
        if result.timed_out:
            return self._render("timeout", result=result, timeout=self.config.command_timeout)
        return self._render(
            "observation",
            result=result,
            truncated_output=head_tail(result.output, self.config.observation_chars),
        )

    async def run(self, task: Task, sandbox: Sandbox, llm: LLMClient) -> Outcome:
        cfg = self.config
        workdir = sandbox.spec.workdir
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self._render("system", workdir=workdir)},
            {
                "role": "user",
                "content": self._render(
                    "instance", instruction=task.instruction.strip(), workdir=workdir
                ),
            },
        ]
        trajectory: list[dict[str, Any]] = []
        format_errors = 0
        for turn in range(cfg.step_limit):
            response = await llm.complete(
                LLMRequest(
                    messages=list(messages),
                    sampling=cfg.sampling,
                    metadata={"task_id": task.id, "turn": turn, "scaffold": self.name},
                )
            )
            messages.append(response.to_message())
            actions = parse_actions(response.content)
            if len(actions) != 1:
                format_errors += 1
                trajectory.append({"turn": turn, "format_error": len(actions)})
                if format_errors >= cfg.max_consecutive_format_errors:
                    return Outcome(
                        "format_error_limit",
                        turn + 1,
                        f"{format_errors} malformed responses in a row",
                        trajectory,
                    )
                messages.append(
                    {
                        "role": "user",
                        "content": self._render("format_error", n_actions=len(actions)),
                    }
                )
                continue
            format_errors = 0
            result = await sandbox.exec(actions[0], timeout=cfg.command_timeout)
            trajectory.append(
                {
                    "turn": turn,
                    "command": actions[0],
                    "exit_code": result.exit_code,
                    "output": result.output,
                    "timed_out": result.timed_out,
                    "truncated": result.truncated,
                    "duration_s": result.duration_s,
                }
            )
            if is_submission(result):
                submitted = "".join(result.stdout.lstrip().splitlines(keepends=True)[1:])
                return Outcome("submitted", turn + 1, submitted, trajectory)
            messages.append({"role": "user", "content": self.observation(result)})
        return Outcome("step_limit", cfg.step_limit, f"reached {cfg.step_limit} steps", trajectory)
