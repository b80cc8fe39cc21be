"""Codex (the real ``@openai/codex`` 0.171.0 binary) as ``--scaffold codex``: real local
sandboxes, the proxy's Responses route, scripted policies in Codex's own tool protocol."""

from __future__ import annotations

import json

import pytest

import palaestra
from palaestra import CodeEnv
from palaestra.llm import LLMRequest, LLMResponse, ToolCall
from palaestra.rl.trajectory import to_trajectories
from palaestra.run import rollout
from palaestra.scaffolds import NopPolicy, OraclePolicy, make_scaffold
from palaestra.tasks.source import TaskSet
from tests.scaffolds.harness_support import installed
from tests.scaffolds.test_external import our_processes

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

PATCH = """apply_patch <<'EOF'
*** Begin Patch
*** Update File: /app/answer.txt
@@
-41
+42
*** End Patch
EOF"""


@pytest.fixture(scope="module", autouse=True)
def codex() -> None:
    installed("codex")


def exec_call(turn: int, cmd: str) -> LLMResponse:
    args = json.dumps({"cmd": cmd, "yield_time_ms": 30000})
    return LLMResponse(
        tool_calls=[ToolCall(id=f"call_{turn}", name="exec_command", arguments=args)],
        finish_reason="tool_calls",
    )


def render(message: dict) -> str:
    """A toy chat template: every field of a message, in a fixed order."""
    calls = "".join(
        f"<call {c['id']} {c['function']['name']}>{c['function']['arguments']}"
        for c in message.get("tool_calls") or ()
    )
    return (
        f"<{message['role']}>{message.get('reasoning_content') or ''}|"
        f"{json.dumps(message.get('content'))}{calls}</>"
    )


class ScriptedCodexUser:
    """Reads, edits with apply_patch, runs a check, then answers: in Codex's protocol. Token
    ids are the toy template's bytes, so the episode's turns must extend one sequence."""

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        turn = len(self.requests) - 1
        if turn == 0:
            response = exec_call(turn, "cat /app/answer.txt")
            response = response.model_copy(update={"reasoning": "Read the file first."})
        elif turn == 1:
            response = exec_call(turn, PATCH)
        elif turn == 2:
            response = exec_call(turn, "grep -qx 42 /app/answer.txt && echo checked")
        else:
            response = LLMResponse(content="The answer is 42.")
        prompt = "".join(render(m) for m in request.messages).encode()
        message = {**response.to_message(), "reasoning_content": response.reasoning}
        completion = render(message).encode()
        return response.model_copy(
            update={
                "prompt_token_ids": list(prompt),
                "completion_token_ids": list(completion),
                "logprobs": [-0.5] * len(completion),
            }
        )


async def test_reads_edits_and_shell_calls_through_codex(make_task):
    task = make_task(
        instruction="Change the number in /app/answer.txt to 42.",
        files={"answer.txt": "41\n"},
        dockerfile="FROM debian:bookworm-slim\nWORKDIR /app\nCOPY answer.txt /app/answer.txt\n",
    )
    policy = ScriptedCodexUser()
    async with CodeEnv(TaskSet.from_dir(task.parent), scaffold=make_scaffold("codex")) as env:
        episode = await rollout(env, policy)
    assert episode.reward == 1.0, episode.end.error_message
    assert len(episode.turns) == 4
    outputs = [r.messages[-1] for r in policy.requests[1:]]
    assert [m["role"] for m in outputs] == ["tool"] * 3
    assert "41" in outputs[0]["content"] and "checked" in outputs[2]["content"]
    first = policy.requests[0]
    assert first.metadata["api"] == "responses" and first.metadata["scaffold"] == "codex"
    assert "Change the number in /app/answer.txt to 42." in first.last_user_text
    names = {t["function"]["name"] for t in first.tools}
    assert "exec_command" in names and "spawn_agent" not in names
    assert "dropped_tools" not in first.metadata  # web search is off
    # the reasoning went to Codex as an item and came back on the assistant turn
    assert policy.requests[1].messages[-2]["reasoning_content"] == "Read the file first."
    # token ids captured: the turns are one token-exact sequence (Codex resends its history
    # unchanged, and the proxy rebuilds it as the policy wrote it)
    result = to_trajectories(episode, on_break="error")
    assert result.breaks == [] and len(result) == 1
    sample = result.samples[0]
    assert sum(sample.loss_mask) == sum(len(t.action.completion_token_ids) for t in episode.turns)
    assert our_processes() == []


async def test_starter_pack_oracle_passes_and_nop_fails_through_codex():
    async with palaestra.make("starter:0:3", scaffold=make_scaffold("codex")) as env:
        oracle = OraclePolicy.from_tasks(env.tasks)
        each = [{"task_index": i} for i in range(3)]
        passed = [await rollout(env, oracle, options=o) for o in each]
        failed = [await rollout(env, NopPolicy(), options=o) for o in each]
    assert len({e.task_id for e in passed}) == 3
    assert [e.reward for e in passed] == [1.0] * 3, [e.end.error_message for e in passed]
    assert [e.reward for e in failed] == [0.0] * 3
    assert all(e.status == "failed" and e.end_reason == "submitted" for e in failed)
    assert our_processes() == []
