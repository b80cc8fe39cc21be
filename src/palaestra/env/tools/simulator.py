"""Tools simulated by an LLM: any policy answers as the tool, from its spec and sample data.

:class:`~palaestra.env.tools.env.ToolEnv` with a ``simulator`` sends each call of a simulated
tool here: the simulator gets the tool's spec, the world's sample data and the call, and what
it answers is what the policy reads. The Python implementation still runs on the episode's
state (the goal is checked on that state, never on what the simulator said), and both answers
are logged in the call's record in ``info["executions"]``, with the simulator's token usage and
cost (the policy's own usage never includes them).
"""

from __future__ import annotations

import json
from typing import Any

from palaestra.env.tools.tool import Tool, dumps
from palaestra.llm.client import LLMClient
from palaestra.llm.types import LLMRequest, LLMResponse

SYSTEM_PROMPT = """\
You simulate a software tool. Answer every call exactly as the real tool would: only the \
tool's output (JSON where the tool returns data), no commentary. Stay consistent with the \
sample data of the world below; invent plausible values only where it says nothing.

The tool's spec:
{spec}

Sample data of the world:
{sample_data}"""


async def simulate(
    simulator: LLMClient, tool: Tool, args: dict[str, Any], sample_data: str, task_id: str
) -> LLMResponse:
    """What ``simulator`` answers as ``tool`` called with ``args`` (its ``content`` is the
    tool's output)."""
    spec = json.dumps(tool.spec()["function"], indent=1)
    request = LLMRequest(
        messages=[
            {"role": "system", "content": SYSTEM_PROMPT.format(spec=spec, sample_data=sample_data)},
            {"role": "user", "content": f"{tool.name}({dumps(args)})"},
        ],
        metadata={"task_id": task_id, "role": "tool_simulator", "tool": tool.name},
    )
    return await simulator.complete(request)
