"""Claude Code (the real CLI from npm, in real local sandboxes) as ``--scaffold claude-code``:
its Anthropic Messages calls, streamed, are the observations; a scripted policy answers with
its own tools (Bash, Write, Read, Edit)."""

from __future__ import annotations

import pytest

from palaestra import CodeEnv
from palaestra.llm.types import LLMResponse
from palaestra.rl.trajectory import to_trajectories
from palaestra.run import rollout
from palaestra.scaffolds import NopPolicy, make_scaffold
from palaestra.scaffolds.harness import HarnessScaffold
from palaestra.scaffolds.harness.claude_code import ClaudeCode
from palaestra.tasks.source import TaskSet
from tests.scaffolds.conftest import proxy_stopped
from tests.scaffolds.harness_support import (
    ProtocolScript,
    TokenPolicy,
    call,
    installed,
    oracle_and_nop,
)
from tests.scaffolds.test_external import our_processes

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier


@pytest.fixture(scope="module", autouse=True)
def claude_code() -> None:
    installed("claude-code")


async def test_starter_oracle_passes_and_nop_fails_through_claude_code():
    scaffold = make_scaffold("claude-code")
    oracle, nop = await oracle_and_nop(scaffold)
    assert oracle.reward == 1.0 and oracle.end_reason == "submitted", oracle.end.error
    assert nop.reward == 0.0 and nop.status == "failed", nop.end.error
    # two requests (the Bash call, then the answer that ends it); one for nop
    assert len(oracle.turns) == 2 and len(nop.turns) == 1
    first = oracle.turns[0].observation
    assert first.metadata["scaffold"] == "claude-code" and first.metadata["api"] == "anthropic"
    assert {"Bash", "Read", "Edit", "Write"} <= {t["function"]["name"] for t in first.tools}
    # the Bash call's output came back as its tool result
    result = oracle.turns[1].observation.messages
    assert any(m["role"] == "tool" and m["tool_call_id"] == "call_0_Bash" for m in result)
    assert our_processes() == [] and await proxy_stopped(scaffold)


async def test_its_own_tools_read_write_edit_and_bash(make_task):
    """Write a wrong answer, read it back, edit it, check it with Bash, then end: each step
    one of Claude Code's tools, run by Claude Code in the sandbox."""
    answer = "/app/answer.txt"
    script = ProtocolScript(
        [
            lambda r: call("Write", 0, file_path=answer, content="41\n"),
            lambda r: call("Read", 1, file_path=answer),
            lambda r: call("Edit", 2, file_path=answer, old_string="41", new_string="42"),
            lambda r: call("Bash", 3, command=f"cat {answer}", description="Show the answer"),
            lambda r: LLMResponse(content="The answer is written."),
        ]
    )
    async with CodeEnv(TaskSet.from_dir(make_task().parent), scaffold="claude-code") as env:
        episode = await rollout(env, script)
    assert episode.reward == 1.0 and episode.end_reason == "submitted", episode.end.error
    tool_results = [r.messages[-1]["content"] for r in script.requests[1:]]
    assert "41" in tool_results[1]  # Read shows the file
    assert tool_results[3].strip() == "42"  # Bash's output
    assert our_processes() == []


async def test_token_ids_give_one_exact_trajectory(make_task):
    """With a policy that returns ids, the episode's turns give token-exact samples: Claude
    Code resends its history as it was, so its turns extend one sequence (no break)."""
    script = ProtocolScript(
        [
            lambda r: call("Bash", 0, command="echo 42 > /app/answer.txt", description="x"),
            lambda r: call("Bash", 1, command="cat /app/answer.txt", description="y"),
            lambda r: LLMResponse(content="Done."),
        ]
    )
    async with CodeEnv(TaskSet.from_dir(make_task().parent), scaffold="claude-code") as env:
        episode = await rollout(env, TokenPolicy(script))
    assert episode.reward == 1.0, episode.end.error
    trajectories = to_trajectories(episode)
    assert trajectories.breaks == [] and len(trajectories.samples) == 1
    sample = trajectories.samples[0]
    assert len(sample.spans) == 3 and sample.reward == 1.0
    completions = [t.action.completion_token_ids for t in episode.turns]
    assert sample.completion_tokens == sum(len(c) for c in completions)
    for span, ids in zip(sample.spans, completions, strict=True):
        assert sample.token_ids[span.completion_start : span.completion_end] == ids
        assert set(sample.loss_mask[span.completion_start : span.completion_end]) == {1}


async def test_a_failure_inside_claude_code_is_its_own_error_line(make_task):
    """Claude Code cannot reach its API (a closed port; no retries): it exits 1, and the
    episode's error message starts with Claude Code's own error, which eval prints."""
    closed = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "CLAUDE_CODE_MAX_RETRIES": "0"}
    scaffold = HarnessScaffold(ClaudeCode(), env=closed)
    async with CodeEnv(TaskSet.from_dir(make_task().parent), scaffold=scaffold) as env:
        episode = await rollout(env, NopPolicy())
    assert episode.status == "error"  # before its first call: an error at reset
    first = episode.end.error.splitlines()[0]
    assert "claude-code 2.1.332 exited with status 1: claude-code: API Error" in first, first
    assert "connection refused" in first.lower(), first
    assert not episode.end.verified and our_processes() == []
