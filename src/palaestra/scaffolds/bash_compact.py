"""``bash-compact``: the bash scaffold with prompts a small model can follow.

The ``bash`` scaffold's prompts (mini-swe-agent's) explain the protocol at length: explore,
test, submit with a sentinel. A 135M-parameter model loses the thread in them: SmolLM2-135M
echoes the headings and the sentinel block back and almost never writes the command (0 of 24
easy ``shell-warmup`` tasks at temperature 0.6). This preset keeps the protocol (one fenced
block per response, run in the sandbox) and says only the task and the answer's form; a block
fenced with no language counts (``bare_fences``), and there is no submission step: the episode
ends at ``step_limit`` responses (default 1) and is then verified. It is the scaffold of the
learning curve (``benchmarks/bench_learning.py``, docs/learning.md).
"""

from __future__ import annotations

from typing import Any

from palaestra.scaffolds.bash import BashScaffold

COMPACT_SYSTEM_TEMPLATE = "You are a helpful assistant who completes tasks in a Linux shell."

COMPACT_INSTANCE_TEMPLATE = """\
{{ instruction }}

Reply with the command in a ```bash code block."""

COMPACT_DEFAULTS: dict[str, Any] = {
    "system_template": COMPACT_SYSTEM_TEMPLATE,
    "instance_template": COMPACT_INSTANCE_TEMPLATE,
    "bare_fences": True,
    "step_limit": 1,
}


def compact_bash_scaffold(**overrides: Any) -> BashScaffold:
    """The bash scaffold with :data:`COMPACT_DEFAULTS`; keyword arguments override them."""
    return BashScaffold(**(COMPACT_DEFAULTS | overrides))
