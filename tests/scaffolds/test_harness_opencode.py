"""OpenCode (the real CLI from npm, in real local sandboxes) as ``--scaffold opencode``: its
chat-completions calls, streamed with tool calls, are the observations."""

from __future__ import annotations

import pytest

from palaestra.scaffolds import make_scaffold
from tests.scaffolds.harness_support import installed, oracle_and_nop
from tests.scaffolds.test_external import our_processes


@pytest.fixture(scope="module", autouse=True)
def opencode() -> None:
    installed("opencode")


async def test_starter_oracle_passes_and_nop_fails_through_opencode():
    scaffold = make_scaffold("opencode")
    oracle, nop = await oracle_and_nop(scaffold)
    assert oracle.reward == 1.0 and oracle.end_reason == "submitted", oracle.end.error
    assert nop.reward == 0.0 and nop.status == "failed", nop.end.error
    # no side request (a session title): the bash call and the answer; one for nop
    assert len(oracle.turns) == 2 and len(nop.turns) == 1
    first = oracle.turns[0].observation
    assert first.metadata["scaffold"] == "opencode" and first.metadata["api"] == "openai"
    assert {"bash", "read", "edit", "write"} <= {t["function"]["name"] for t in first.tools}
    result = oracle.turns[1].observation.messages[-1]
    assert result["role"] == "tool" and result["tool_call_id"] == "call_0_bash"
    assert our_processes() == [] and scaffold._own_proxy is None
