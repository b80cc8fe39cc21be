"""ATIF export of real runs: every document validated by the ``atif`` package's own models, and
compared with what the store holds (messages, tools, token ids and logprobs per step)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from palaestra.llm import LLMRequest, LLMResponse, ScriptedPolicy
from palaestra.llm.types import ToolCall, Usage
from palaestra.run import evaluate
from palaestra.run.atif import ATIF_VERSION, to_atif
from palaestra.run.export import export
from palaestra.run.store import DB_NAME, read_episodes, read_steps
from tests.run.test_store import _old_store

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

atif = pytest.importorskip("atif")


def _documents(out: Path) -> dict[str, atif.Trajectory]:
    """Each exported file, validated by the atif package; the file is exactly its model's
    JSON (nothing the models would drop or change)."""
    documents = {}
    for path in sorted(out.glob("*.json")):
        raw = json.loads(path.read_text())
        document = atif.Trajectory.model_validate(raw)
        assert document.to_json_dict() == raw
        assert document.schema_version == ATIF_VERSION == "ATIF-v1.8"
        documents[path.stem] = document
    return documents


def _stored(run_dir: Path) -> dict[str, tuple[dict, list[dict]]]:
    steps = read_steps(run_dir)
    return {e["episode_id"]: (e, steps[e["id"]]) for e in read_episodes(run_dir)}


async def test_oracle_runs_export_one_valid_document_per_episode(tmp_path):
    run_dir = tmp_path / "tools"
    await evaluate("starter:0:2", "oracle", scaffold="tools", out_dir=run_dir)
    assert export(run_dir, run_dir / "atif", "atif") == 2
    documents = _documents(run_dir / "atif")
    stored = _stored(run_dir)
    assert set(documents) == set(stored)
    for episode_id, doc in documents.items():
        episode, steps = stored[episode_id]
        opening = steps[0]["new_messages"]
        assert [s.source for s in doc.steps] == ["system", "user", "agent", "agent"]
        assert doc.steps[0].message == opening[0]["content"]  # the system prompt
        assert doc.steps[1].message == opening[1]["content"]  # the task
        tools = steps[0]["tools"]
        assert doc.agent.tool_definitions == tools and len(tools) == 4
        assert "submit" in {t["function"]["name"] for t in tools}
        assert (doc.trajectory_id, doc.extra["task_id"]) == (episode_id, episode["task_id"])
        solve, submit = doc.steps[2:]
        # each call's result is linked to it, from the next request's tool messages
        (call,) = solve.tool_calls
        assert call.function_name == "bash" and "solve.sh" in call.arguments["command"]
        (result,) = solve.observation.results
        assert result.source_call_id == call.tool_call_id
        assert result.content == steps[1]["new_messages"][1]["content"]
        # the last turn's result comes from the scaffold's record
        assert submit.tool_calls[0].function_name == "submit"
        assert submit.observation.results[0].content == "Submitted."
        assert submit.observation.results[0].source_call_id == submit.tool_calls[0].tool_call_id
        assert solve.extra["execution"]["tool_calls"][0]["exit_code"] == 0
        final = doc.final_metrics
        assert final.extra["reward"] == episode["reward"] == 1.0
        assert final.extra["rewards"] == episode["rewards"] and final.extra["status"] == "passed"
        assert final.total_steps == 4 and final.total_cost_usd == episode["cost_usd"]

    bash_dir = tmp_path / "bash"
    await evaluate("starter:0:1", "oracle", out_dir=bash_dir)
    assert export(bash_dir, bash_dir / "atif", "atif") == 1
    ((episode_id, doc),) = _documents(bash_dir / "atif").items()
    _, steps = _stored(bash_dir)[episode_id]
    assert doc.agent.tool_definitions is None and doc.agent.extra["scaffold"] == "bash"
    solve = doc.steps[2]
    assert solve.tool_calls is None and solve.message == steps[0]["response"]["content"]
    # a text protocol's output is a user message: a result that names no call
    (result,) = solve.observation.results
    assert result.source_call_id is None and "<returncode>0</returncode>" in result.content
    assert solve.extra["execution"]["command"] == steps[0]["execution"]["command"]


def _token_policy(returned: dict[tuple[str, int], LLMResponse]) -> ScriptedPolicy:
    """Tool calls with token ids and logprobs that differ per task and turn; turn 0 also
    makes a call whose arguments are not JSON."""

    def answer(request: LLMRequest) -> LLMResponse:
        task, turn = request.metadata["task_id"], request.metadata["turn"]
        prompt = [len(task), turn, *range(7, 7 + len(request.messages))]
        if turn == 0:
            calls = [
                ToolCall(id="c0", name="bash", arguments='{"command": "echo hello"}'),
                ToolCall(id="c1", name="view", arguments='{"path": '),
            ]
        else:
            calls = [ToolCall(id="c2", name="submit")]
        response = LLMResponse(
            content=f"turn {turn}",
            tool_calls=calls,
            finish_reason="tool_calls",
            usage=Usage(prompt_tokens=len(prompt), completion_tokens=3),
            model="scripted-ids",
            prompt_token_ids=prompt,
            completion_token_ids=[900 + turn, len(task), 5],
            logprobs=[-0.5 - turn, -0.25, -len(task) / 100],
            policy_version=turn + 1,
        )
        returned[task, turn] = response
        return response

    return ScriptedPolicy(answer)


async def test_token_ids_and_logprobs_per_step_are_the_stored_ones(tmp_path):
    returned: dict[tuple[str, int], LLMResponse] = {}
    await evaluate("starter:0:2", _token_policy(returned), scaffold="tools", out_dir=tmp_path)
    assert export(tmp_path, tmp_path / "out", "atif") == 2
    documents = _documents(tmp_path / "out")
    stored = _stored(tmp_path)
    assert len(returned) == 4 and set(documents) == set(stored)
    for episode_id, doc in documents.items():
        episode, steps = stored[episode_id]
        agent = [s for s in doc.steps if s.source == "agent"]
        assert len(agent) == len(steps) == 2
        for step, row in zip(agent, steps, strict=True):
            response = returned[episode["task_id"], row["turn"]]
            metrics = step.metrics
            assert metrics.prompt_token_ids == row["response"]["prompt_token_ids"]
            assert metrics.prompt_token_ids == response.prompt_token_ids
            assert metrics.completion_token_ids == row["response"]["completion_token_ids"]
            assert metrics.completion_token_ids == response.completion_token_ids
            assert metrics.logprobs == row["response"]["logprobs"] == response.logprobs
            assert metrics.extra == {"policy_version": response.policy_version}
            assert metrics.prompt_tokens == len(response.prompt_token_ids)
            assert step.model_name == "scripted-ids" and step.message == response.content
        assert doc.agent.model_name == "scripted-ids"
        assert doc.final_metrics.total_prompt_tokens == episode["prompt_tokens"] > 0
        bash, view = agent[0].tool_calls
        assert bash.arguments == {"command": "echo hello"} and bash.extra is None
        assert view.arguments == {} and view.extra == {"raw_arguments": '{"path": '}
        hello, refused = agent[0].observation.results
        assert (hello.source_call_id, refused.source_call_id) == ("c0", "c1")
        assert "hello" in hello.content and "not valid JSON" in refused.content
        assert agent[1].observation.results[0].source_call_id == "c2"


def test_an_old_store_exports_after_its_migration(tmp_path):
    run_dir = _old_store(tmp_path / "old")
    n = export(run_dir, tmp_path / "out", "atif")
    assert n == len(read_episodes(run_dir)) > 0
    documents = _documents(tmp_path / "out")  # its steps have no tools column: none offered
    stored = _stored(run_dir)
    assert set(documents) == set(stored)
    for episode_id, doc in documents.items():
        agent = [s for s in doc.steps if s.source == "agent"]
        assert len(agent) == len(stored[episode_id][1]) and doc.agent.tool_definitions is None
    with sqlite3.connect(run_dir / DB_NAME) as conn:
        assert "tools" in {row[1] for row in conn.execute("PRAGMA table_info(steps)")}


def _cli(*args: str, without: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        f"for name in {without!r}: sys.modules[name] = None\n"
        "from palaestra.cli import app\n"
        "app(prog_name='palaestra')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )


async def test_the_cli_writes_a_directory_and_names_the_extra(tmp_path):
    await evaluate("starter:0:1", "nop", out_dir=tmp_path)
    done = _cli("export", str(tmp_path), "--format", "atif")
    assert done.returncode == 0, done.stderr
    assert "wrote 1 episodes" in done.stdout and len(_documents(tmp_path / "atif")) == 1
    missing = _cli(
        "export", str(tmp_path), "-f", "atif", "-o", str(tmp_path / "x"), without=("atif",)
    )
    assert missing.returncode == 2 and not (tmp_path / "x").exists()
    assert missing.stderr.strip().splitlines() == [
        "error: ATIF export needs the atif package: pip install 'palaestra[atif]'"
    ]
    (tmp_path / "file.json").write_text("{}")
    a_file = _cli("export", str(tmp_path), "-f", "atif", "-o", str(tmp_path / "file.json"))
    assert a_file.returncode == 2 and len(a_file.stderr.strip().splitlines()) == 1
    assert "is a file; ATIF export writes a directory: pass -o DIRECTORY" in a_file.stderr


def test_a_rewritten_conversation_is_repeated_as_copied_context():
    """Rows as ``read_steps`` returns them for an agent that rewrote its history between turns
    (an outside agent behind the proxy, compacting): turn 1's request starts afresh."""
    run = {
        "run_id": "r1",
        "env_id": "e",
        "policy": "openai:m",
        "scaffold": "external",
        "sandbox": "local",
        "palaestra_version": "9.9",
    }
    episode = {
        **dict.fromkeys(
            (
                "family",
                "category",
                "difficulty",
                "seed",
                "sandbox_start_s",
                "agent_s",
                "policy_s",
                "verifier_s",
                "error_class",
                "error_message",
                "verifier_output",
                "cost_usd",
            )
        ),
        "episode_id": "e1",
        "task_id": "t",
        "attempt": 0,
        "steps": 2,
        "wall_s": 1.0,
        "finished_at": 2.0,
        "reward": 0.0,
        "rewards": {"reward": 0.0},
        "status": "failed",
        "end_reason": "step_limit",
        "verified": True,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cached_tokens": 0,
    }
    call = {"id": "k1", "type": "function", "function": {"name": "run", "arguments": "[1]"}}
    steps = [
        {
            "turn": 0,
            "messages_from": 0,
            "tools": None,
            "execution": None,
            "new_messages": [
                {"role": "system", "content": "sys"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": "data:image/webp;base64,AAAA"}},
                    ],
                },
            ],
            "response": {"tool_calls": [{"id": "k1", "name": "run", "arguments": "[1]"}]},
        },
        {
            "turn": 1,
            "messages_from": 0,
            "tools": None,
            "execution": None,
            "new_messages": [
                {"role": "system", "content": "summary so far"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "k1", "content": "ran"},
            ],
            "response": {"content": "done", "model": "m-2"},
        },
    ]
    doc = atif.Trajectory.model_validate(to_atif(run, episode, steps).to_json_dict())
    assert [(s.source, s.is_copied_context) for s in doc.steps] == [
        ("system", None),
        ("user", None),
        ("agent", None),
        ("system", True),
        ("agent", True),
        ("user", True),
        ("agent", None),
    ]
    image = doc.steps[1].message[1]
    assert image.type == "image" and image.source.media_type == "image/webp"
    first = doc.steps[2]
    assert first.tool_calls[0].extra == {"raw_arguments": "[1]"} and first.observation is None
    copied = doc.steps[4]
    assert copied.llm_call_count == 0 and copied.metrics is None
    assert copied.tool_calls[0].tool_call_id == "k1"
    assert doc.steps[5].extra == {"role": "tool", "tool_call_id": "k1"}
    assert doc.steps[6].model_name == "m-2" and doc.agent.model_name == "m-2"
    assert doc.agent.version == "9.9" and doc.final_metrics.extra["end_reason"] == "step_limit"
