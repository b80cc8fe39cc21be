"""The harnesses on the Docker backend: the CLI's install is bind-mounted read-only into the
task's container (``palaestra/base:bookworm``-based, glibc), reaches the proxy through the
mounted socket and the in-sandbox forwarder, and solves the starter task (oracle: 1) or not
(nop: 0), as on the local backend."""

from __future__ import annotations

import pytest

from palaestra.scaffolds import make_scaffold
from tests.sandbox.docker_support import labelled_containers, needs_docker
from tests.scaffolds.conftest import proxy_stopped
from tests.scaffolds.harness_support import installed, oracle_and_nop

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier


@needs_docker
async def test_starter_oracle_passes_and_nop_fails_through_claude_code_on_docker():
    installed("claude-code")
    scaffold = make_scaffold("claude-code")
    oracle, nop = await oracle_and_nop(scaffold, sandbox="docker")
    assert oracle.reward == 1.0 and oracle.end_reason == "submitted", oracle.end.error
    assert nop.reward == 0.0 and nop.status == "failed", nop.end.error
    assert len(oracle.turns) == 2 and len(nop.turns) == 1
    assert oracle.turns[0].observation.metadata["scaffold"] == "claude-code"
    # the Bash call ran in the container: its output came back as the tool result
    result = oracle.turns[1].observation.messages
    assert any(m["role"] == "tool" and m["tool_call_id"] == "call_0_Bash" for m in result)
    assert await labelled_containers() == [] and await proxy_stopped(scaffold)
