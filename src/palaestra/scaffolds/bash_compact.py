"""``bash-compact``: the bash scaffold with prompts a small model can follow.

The ``bash`` scaffold's prompts (mini-swe-agent's) explain the protocol at length: explore,
test, submit with a sentinel. A 135M-parameter model loses the thread in them: SmolLM2-135M
echoes the headings and the sentinel block back and almost never writes the command (0 of 16
easy ``shell-warmup`` tasks at temperature 0.7). This preset keeps the protocol (one fenced
block per response, run in the sandbox) and says only the task and the answer's form; a block
fenced with no language counts (``bare_fences``), and there is no submission step: the episode
ends at ``step_limit`` responses (default 1) and is then verified. With a step limit of 2 or
more (tasks that need what a command shows, ``shell-lookup``) the command's output comes back
plainly, followed by the same one-line reminder of the answer's form. It is the scaffold of the
learning curve (``benchmarks/bench_learning.py``, docs/learning.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from palaestra.scaffolds.bash import BashScaffold, BashScaffoldConfig

COMPACT_SYSTEM_TEMPLATE = "You are a helpful assistant who completes tasks in a Linux shell."

COMPACT_INSTANCE_TEMPLATE = """\
{{ instruction }}

Reply with the command in a ```bash code block."""

COMPACT_OBSERVATION_TEMPLATE = """\
Output:
{% if truncated_output is none -%}
{{ result.output.rstrip() if result.output.strip() else "(nothing)" }}
{%- else -%}
{{ truncated_output[0] }}
[{{ truncated_output[2] }} characters left out]
{{ truncated_output[1] }}
{%- endif %}

Reply with the next command in a ```bash code block."""


@dataclass
class CompactBashScaffoldConfig(BashScaffoldConfig):
    system_template: str = COMPACT_SYSTEM_TEMPLATE
    instance_template: str = COMPACT_INSTANCE_TEMPLATE
    observation_template: str = COMPACT_OBSERVATION_TEMPLATE
    bare_fences: bool = True
    step_limit: int = 1


class CompactBashScaffold(BashScaffold):
    """The bash protocol with :class:`CompactBashScaffoldConfig`'s defaults; its requests say
    ``bash-compact`` in ``metadata["scaffold"]`` and runs record that name."""

    name = "bash-compact"
    config_class = CompactBashScaffoldConfig
