"""The ``tools`` scaffold end to end on the real local sandbox, driven through CodeEnv."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from palaestra import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.llm.types import LLMResponse, ToolCall
from palaestra.run import rollout
from palaestra.run.store import read_episodes
from palaestra.scaffolds import ToolsScaffold, make_scaffold
from palaestra.scaffolds.tools import TOOL_SPECS, ToolCallError, check_arguments
from palaestra.tasks.source import TaskSet
from tests.scaffolds.procs import own_sandbox_processes

DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY answer.txt /app/answer.txt\n"


def call(name: str, call_id: str | None = None, raw: str | None = None, **args) -> ToolCall:
    return ToolCall(id=call_id or f"id-{name}", name=name, arguments=raw or json.dumps(args))


def act(*calls: ToolCall, content: str | None = None) -> LLMResponse:
    return LLMResponse(content=content, tool_calls=list(calls), finish_reason="tool_calls")


SUBMIT = act(call("submit"))


def env_for(task_dir, **scaffold_overrides) -> CodeEnv:
    scaffold = ToolsScaffold(**scaffold_overrides) if scaffold_overrides else "tools"
    return CodeEnv(TaskSet.from_dir(task_dir), scaffold=scaffold)


def tool_messages(ts) -> list[dict]:
    """The tool messages answering the latest assistant message."""
    messages = ts.observation.messages
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return [m for m in messages[last + 1 :] if m["role"] == "tool"]


@pytest.fixture
def answer_task(make_task):
    return make_task(files={"answer.txt": "41\n"}, dockerfile=DOCKERFILE)


async def test_solves_a_task_with_bash_edit_and_submit(answer_task):
    policy = ScriptedPolicy(
        [
            act(call("bash", "c1", command="cat answer.txt && pwd")),
            act(call("edit", "c2", path="answer.txt", old_str="41", new_str="42")),
            SUBMIT,
        ]
    )
    async with env_for(answer_task) as env:
        episode = await rollout(env, policy)
    assert episode.terminated and episode.reward == 1.0
    assert episode.end_reason == "submitted" and episode.info["step"] == 3
    first, second, third = policy.requests
    assert [t["function"]["name"] for t in first.tools] == ["bash", "view", "edit", "submit"]
    assert first.messages[0]["role"] == "system" and "42" in first.messages[1]["content"]
    assert first.metadata["task_id"] == "answer-task" and first.metadata["turn"] == 0
    assert third.metadata["turn"] == 2 and third.metadata["scaffold"] == "tools"
    bash_reply = second.messages[-1]
    assert bash_reply == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "exit code: 0\n41\n/app\n",
    }
    assert second.messages[-2]["tool_calls"][0]["function"]["name"] == "bash"
    edit_reply = third.messages[-1]["content"]
    assert edit_reply.startswith("Edited /app/answer.txt") and "     1\t42" in edit_reply
    assert not own_sandbox_processes()


async def test_view_file_windows_and_directory(make_task):
    body = "".join(f"line {i}\n" for i in range(1, 501))
    task = make_task(
        files={"big.txt": body, "pkg/mod.py": "x = 1\n", "pkg/.cache": "", ".git/HEAD": ""},
        dockerfile="FROM debian:bookworm-slim\nWORKDIR /app\nCOPY . /app/\n",
    )
    async with env_for(task, view_lines=100) as env:
        await env.reset()
        ts = await env.step(
            act(
                call("view", "v1", path="big.txt"),
                call("view", "v2", path="/app/big.txt", view_range=[498, -1]),
                call("view", "v3", path="."),
                call("view", "v4", path="missing.txt"),
                call("view", "v5", path="big.txt", view_range=[10, 9999]),
            )
        )
        full, tail, listing, missing, bad_range = (m["content"] for m in tool_messages(ts))
        assert full.startswith("     1\tline 1\n") and "   100\tline 100" in full
        assert "line 101" not in full and "has 500 lines; lines 1-100 shown" in full
        assert tail == "   498\tline 498\n   499\tline 499\n   500\tline 500"
        assert listing.splitlines()[1:] == ["Dockerfile", "big.txt", "pkg", "pkg/mod.py"]
        assert "does not exist" in missing
        assert "invalid" in bad_range and "500 lines" in bad_range
        await env.step(SUBMIT)


async def test_edit_guidance_create_and_mode(make_task):
    task = make_task(
        files={"dup.py": "x = 1\ny = 2\nx = 1\n", "run.sh": "#!/bin/sh\necho old\n"},
        dockerfile="FROM debian:bookworm-slim\nWORKDIR /app\nCOPY . /app/\n",
    )
    async with env_for(task) as env:
        await env.reset()
        setup = r"chmod 755 run.sh && printf 'a\377b' > latin.txt && printf 'a\0b' > nul.bin"
        await env.step(act(call("bash", command=setup)))
        ts = await env.step(
            act(
                call("edit", "e1", path="dup.py", old_str="x = 1", new_str="x = 3"),
                call("edit", "e2", path="dup.py", old_str="z = 9", new_str="z = 0"),
                call("edit", "e3", path="sub/new.py", old_str="", new_str="print('hi')\n"),
                call("edit", "e4", path="dup.py", old_str="", new_str="overwrite"),
                call("edit", "e5", path="nope.py", old_str="a", new_str="b"),
                call("edit", "e6", path="run.sh", old_str="echo old", new_str="echo new"),
                call(
                    "bash", "e7", command="cat dup.py sub/new.py && ./run.sh && stat -c %a run.sh"
                ),
                call("edit", "e8", path="latin.txt", old_str="a", new_str="c"),
                call("view", "e9", path="nul.bin"),
            )
        )
        multiple, zero, created, exists, absent, edited, check, latin, binary = (
            m["content"] for m in tool_messages(ts)
        )
        assert "not UTF-8 text" in latin and "binary file" in binary
        assert "occurs 2 times" in multiple and "lines 1, 3" in multiple
        assert "0 matches" in zero and "exactly" in zero
        assert created == "Created /app/sub/new.py (1 lines)."
        assert "already exists" in exists
        assert "does not exist" in absent and "empty old_str" in absent
        assert edited.startswith("Edited /app/run.sh")
        # the refused edits changed nothing; the accepted ones kept the file's mode
        assert check == "exit code: 0\nx = 1\ny = 2\nx = 1\nprint('hi')\nnew\n755\n"
        await env.step(SUBMIT)


async def test_parallel_calls_answered_in_order_and_submit_ends_after_the_rest(answer_task):
    async with env_for(answer_task) as env:
        await env.reset()
        ts = await env.step(
            act(
                call("bash", "a", command="echo first"),
                call("view", "b", path="answer.txt"),
                call("bash", "c", command="echo third"),
            )
        )
        replies = tool_messages(ts)
        assert [m["tool_call_id"] for m in replies] == ["a", "b", "c"]
        assert [m["content"] for m in replies] == [
            "exit code: 0\nfirst\n",
            "     1\t41",
            "exit code: 0\nthird\n",
        ]
        last = await env.step(
            act(
                call("bash", "d", command="echo 42 > answer.txt"),
                call("submit", "e"),
                call("bash", "f", command="echo after > after.txt"),
            )
        )
    assert last.terminated and last.reward == 1.0
    turn = last.info["executions"][-1]
    assert [c["id"] for c in turn["tool_calls"]] == ["d", "e", "f"]
    assert turn["tool_calls"][2]["exit_code"] == 0


async def test_malformed_calls_get_guidance_and_the_rest_still_run(answer_task):
    async with env_for(answer_task) as env:
        await env.reset()
        ts = await env.step(
            act(
                call("bash", "j", raw='{"command": "ls'),
                call("shell", "u", command="ls"),
                call("bash", "m"),
                call("bash", "x", command="ls", cwd="/"),
                call("bash", "t", command=5),
                call("bash", "ok", command="echo fine"),
            )
        )
        bad_json, unknown, missing, extra, wrong, ok = (m["content"] for m in tool_messages(ts))
        assert "not valid JSON" in bad_json and '"command"' in bad_json
        assert "no tool named 'shell'" in unknown and "bash, view, edit, submit" in unknown
        assert "missing argument(s): command" in missing and '"required"' in missing
        assert "unknown argument(s): cwd" in extra
        assert "'command' must be string, got 5" in wrong
        assert ok == "exit code: 0\nfine\n"
        await env.step(SUBMIT)


async def test_format_errors_reminded_and_capped(answer_task):
    async with env_for(answer_task, max_consecutive_format_errors=3) as env:
        await env.reset()
        ts = await env.step(act(content="I think I am done."))
        reminder = ts.observation.messages[-1]
        assert reminder["role"] == "user" and "no tool call" in reminder["content"]
        # a response whose only call is malformed counts too; one good call resets the count
        ts = await env.step(act(call("nonsense")))
        ts = await env.step(act(call("bash", command="true")))
        ts = await env.step(act(content="still chatting"))
        ts = await env.step(act(call("bash", raw="[1]")))
        assert ts.mid()
        ts = await env.step(act(content="and again"))
    assert ts.last() and ts.terminated and ts.end.reason == "format_error_limit"
    assert ts.info["executions"][-1]["format_error"] is True


async def test_step_limit_timeout_and_output_cap(answer_task):
    async with env_for(answer_task, step_limit=2, observation_chars=200) as env:
        await env.reset()
        ts = await env.step(
            act(
                call("bash", "s", command="echo partial; sleep 30", timeout=0.5),
                call("bash", "q", command="seq 1 5000"),
            )
        )
        slow, long = (m["content"] for m in tool_messages(ts))
        assert "did not finish within 0.5 seconds" in slow and "partial" in slow
        assert long.startswith("exit code: 0\n1\n2\n") and long.endswith("4999\n5000\n")
        assert "characters elided" in long and len(long) < 400
        ts = await env.step(act(call("bash", command="true")))
    assert ts.last() and ts.truncated and ts.end.reason == "step_limit"


def test_check_arguments_names_the_problem():
    assert check_arguments(call("view", path="a", view_range=[1, 2])) == {
        "path": "a",
        "view_range": [1, 2],
    }
    with pytest.raises(ToolCallError, match="array of 2 integer values"):
        check_arguments(call("view", path="a", view_range=[1]))
    with pytest.raises(ToolCallError, match="must be a JSON object"):
        check_arguments(call("bash", raw='["ls"]'))
    with pytest.raises(ToolCallError, match="'timeout' must be number"):
        check_arguments(call("bash", command="ls", timeout=True))
    assert check_arguments(call("submit")) == {}
    assert {t["function"]["name"] for t in TOOL_SPECS} == {"bash", "view", "edit", "submit"}
    assert isinstance(make_scaffold("tools", step_limit=5), ToolsScaffold)


@pytest.mark.slow
def test_cli_oracle_passes_every_starter_task(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "palaestra.cli",
            "eval",
            "starter",
            "--policy",
            "oracle",
            "--scaffold",
            "tools",
            "-n",
            "6",
            "--json",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["episodes"] == 18 and summary["pass_rate"] == 1.0 and summary["errors"] == 0
    records = read_episodes(tmp_path)
    assert len(records) == 18 and all(r["end_reason"] == "submitted" for r in records)


def test_cli_names_the_scaffolds_on_a_bad_one(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "palaestra.cli", "eval", "starter:0:1", "--scaffold", "tool"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    message = " ".join(proc.stderr.replace("│", " ").split())  # rich wraps it in a box
    assert "unknown scaffold 'tool'; choose one of: bash," in message
    assert "terminus" in message and "tools" in message
