"""The ``terminus`` scaffold end to end on the real local sandbox (real tmux), through CodeEnv."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from palaestra import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.run.store import read_episodes
from palaestra.scaffolds import TerminusScaffold, make_scaffold
from palaestra.scaffolds.terminus import TerminusFormatError, parse_action
from palaestra.scaffolds.tmux import Snapshot, key_ops, new_output
from palaestra.tasks.source import TaskSet
from tests.scaffolds.procs import own_sandbox_processes


def keys(*commands: tuple[str, float], complete: bool = False) -> str:
    return json.dumps(
        {
            "analysis": "looking",
            "plan": "type",
            "commands": [{"keystrokes": k, "duration": d} for k, d in commands],
            "task_complete": complete,
        }
    )


DONE = keys(complete=True)


def env_for(task_dir, **overrides) -> CodeEnv:
    scaffold = TerminusScaffold(**overrides) if overrides else "terminus"
    return CodeEnv(TaskSet.from_dir(task_dir), scaffold=scaffold)


def last(ts) -> str:
    return ts.observation.messages[-1]["content"]


async def step_until(env, action: str, expected: str, tries: int = 40):
    """Step, then wait 0.25 s at a time until ``expected`` showed (robust on a busy machine).

    Returns the last time step and every observation since the action.
    """
    ts = await env.step(action)
    seen = [last(ts)]
    while expected not in "\n".join(seen):
        assert tries, f"{expected!r} never showed in {seen}"
        tries -= 1
        ts = await env.step(keys(("", 0.25)))
        seen.append(last(ts))
    return ts, seen


def new_parts(seen: list[str]) -> str:
    return "\n".join(o for o in seen if o.startswith("New Terminal Output:"))


async def test_full_episode_with_reward_and_no_tmux_left(make_task):
    script = iter(
        [
            keys(("echo 42 > answer.txt\n", 0.5), ("cat answer.txt\n", 0.5)),
            DONE,
            DONE,
        ]
    )
    seen_during: list[str] = []

    def spy(request):
        seen_during.extend(own_sandbox_processes())
        return next(script)

    async with env_for(make_task()) as env:
        episode = await rollout(env, ScriptedPolicy(spy))
    assert episode.terminated and episode.reward == 1.0
    assert episode.end_reason == "submitted" and episode.info["step"] == 3
    first = episode.turns[0].observation
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert "/app/answer.txt" in first.messages[1]["content"]
    assert "root@sandbox:/app#" in first.messages[1]["content"]  # the initial screen
    assert first.metadata["scaffold"] == "terminus" and first.metadata["turn"] == 0
    second = episode.turns[1].observation.messages[-1]["content"]
    assert second.startswith("New Terminal Output:\nroot@sandbox:/app# echo 42 > answer.txt")
    assert "cat answer.txt" in second
    confirm = episode.turns[2].observation.messages[-1]["content"]
    assert "Are you sure you want to mark the task as complete?" in confirm
    assert any(cmd.startswith("tmux") for cmd in seen_during)
    assert not own_sandbox_processes()


async def test_output_is_diffed_between_turns_and_capped(make_task):
    async with env_for(make_task(), observation_chars=300, step_limit=200) as env:
        await env.reset()
        ts, seen = await step_until(env, keys(("echo alpha-$((1+1))\n", 0.2)), "alpha-2")
        ts, seen = await step_until(env, keys(("echo beta-$((2+1))\n", 0.2)), "beta-3")
        assert seen[0].startswith("New Terminal Output:\nroot@sandbox:/app# echo beta")
        assert "beta-3" in new_parts(seen) and "alpha" not in new_parts(seen)
        ts, seen = await step_until(env, keys(("seq 1 2000\n", 0.5)), "2000\nroot@sandbox")
        out = new_parts(seen)
        assert "characters in the middle omitted" in out and all(len(o) < 500 for o in seen)
        assert "\n1\n2\n" in out and "1999\n2000" in out and "beta" not in out
        ts = await env.step(keys(("", 0.0)))  # nothing new: the visible screen
        assert last(ts).startswith("Current Terminal Screen:\n") and "2000" in last(ts)
        ts, seen = await step_until(env, keys(("clear\n", 0.2), ("echo gamma\n", 0.2)), "gamma\n")
        assert "1999" not in last(ts)
        await env.step(DONE)
        await env.step(DONE)


@pytest.mark.slow
async def test_ctrl_c_interrupts_and_interactive_programs_get_keystrokes(make_task):
    async with env_for(make_task(), step_limit=200) as env:
        await env.reset()
        await step_until(env, keys(("sleep 100\n", 0.3)), "sleep 100")
        ts, seen = await step_until(
            env, keys(("C-c", 0.2), ("echo back-$((3*3))\n", 0.2)), "back-9\n"
        )
        assert "^C" in "\n".join(seen)
        await step_until(env, keys(("python3 -q\n", 0.5)), ">>>")
        ts, seen = await step_until(env, keys(("print(6 * 7)\n", 0.3)), "42\n>>>")
        assert ">>> print(6 * 7)\n42\n>>>" in "\n".join(seen)
        await step_until(env, keys(("C-d", 0.3)), "root@sandbox:/app#")
        await step_until(env, keys(("read -p 'name? ' n; echo hello-$n\n", 0.3)), "name?")
        await step_until(env, keys(("world\n", 0.2)), "hello-world")
        await env.step(DONE)
        ts = await env.step(DONE)
    assert ts.last() and ts.end.reason == "submitted"


async def test_malformed_json_gets_guidance_and_is_capped(make_task):
    async with env_for(make_task(), max_consecutive_format_errors=3) as env:
        await env.reset()
        ts = await env.step("I will now run ls.")
        assert "no JSON object" in last(ts) and "nothing was typed" in last(ts)
        ts = await env.step('{"analysis": "x", "commands": [{"keystrokes": 1}]}')
        assert 'commands[0] must be an object with a string "keystrokes"' in last(ts)
        ts = await env.step('Sure! {"plan": "p", "commands": [{"keystrokes": "echo ok\\n"}]}')
        warn = last(ts)  # a usable answer with warnings resets the count
        assert warn.startswith("Previous response had warnings:")
        assert "text outside the JSON object" in warn and 'no "duration"; waited 1 s' in warn
        assert "ok" in warn
        for _ in range(2):
            ts = await env.step('{"commands": [}')
            assert ts.mid() and "does not parse" in last(ts)
        ts = await env.step("{}")
    assert ts.last() and ts.terminated and ts.end.reason == "format_error_limit"


async def test_confirmation_is_asked_once_and_can_be_declined(make_task):
    async with env_for(make_task(), step_limit=4) as env:
        await env.reset()
        ts = await env.step(keys(("echo 41 > answer.txt\n", 0.2), complete=True))
        assert "Are you sure" in last(ts) and "echo 41" in last(ts)
        ts = await env.step(keys(("echo 42 > answer.txt\n", 0.2)))  # declined: carries on
        assert "Are you sure" not in last(ts)
        ts = await env.step(DONE)
        assert ts.mid() and "Are you sure" in last(ts)
        ts = await env.step(DONE)
    assert ts.last() and ts.reward == 1.0 and ts.info["step"] == 4


async def test_step_limit_truncates(make_task):
    async with env_for(make_task(), step_limit=1) as env:
        await env.reset()
        ts = await env.step(keys(("echo 42 > answer.txt\n", 0.2)))
    assert ts.truncated and ts.end.reason == "step_limit" and ts.reward == 1.0


def test_key_mapping():
    assert key_ops("ls -la\n") == [("text", "ls -la"), ("key", "Enter")]
    assert key_ops("C-c") == [("key", "C-c")]
    assert key_ops("Escape :wq Enter") == [("text", "Escape :wq Enter")]
    assert key_ops("Escape Enter") == [("key", "Escape"), ("key", "Enter")]
    assert key_ops("echo C-c\n") == [("text", "echo C-c"), ("key", "Enter")]
    assert key_ops("a\n\nb") == [("text", "a"), ("key", "Enter"), ("key", "Enter"), ("text", "b")]
    assert key_ops("") == []


def test_new_output_diff():
    # 2 history lines and a 5-row screen; the cursor is on line 5 ("$")
    lines = ["old", "$ ls", "a", "$ echo x", "x", "$", ""]
    snap = Snapshot(history_size=2, cursor_y=3, rows=5, lines=lines)
    assert snap.cursor_line == 5 and snap.first_line == 0
    # the previous observation ended on line 1, then a bare prompt "$" the agent typed on
    assert new_output(snap, 1, "$") == ["$ ls", "a", "$ echo x", "x", "$"]
    assert new_output(snap, 5, "$") is None  # only the unchanged cursor line: nothing new
    assert new_output(snap, 6, "") is None  # the mark is past the cursor: history cleared


def test_parse_action_rules():
    action = parse_action('```json\n{"analysis": "a", "plan": "p", "commands": []}\n```')
    assert action.commands == [] and not action.task_complete and not action.warnings
    with pytest.raises(TerminusFormatError, match='"commands" is missing'):
        parse_action('{"analysis": "a", "plan": "p"}')
    with pytest.raises(TerminusFormatError, match="task_complete"):
        parse_action('{"commands": [], "task_complete": "yes"}')
    with pytest.raises(TerminusFormatError, match="duration"):
        parse_action('{"commands": [{"keystrokes": "ls", "duration": -1}]}')
    assert isinstance(make_scaffold("terminus"), TerminusScaffold)


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
            "terminus",
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


async def test_exiting_the_shell_starts_a_new_session(make_task):
    async with env_for(make_task()) as env:
        await env.reset()
        ts = await env.step(keys(("exit\n", 0.3), ("echo lost\n", 0.1)))
        assert "a new session was started" in last(ts) and "root@sandbox:/app#" in last(ts)
        ts = await env.step(keys(("echo 42 > answer.txt; echo again\n", 0.2)))
        assert "again" in last(ts)
        await env.step(DONE)
        ts = await env.step(DONE)
    assert ts.reward == 1.0 and "echo lost" not in str(ts.info["executions"][0]["output"])


async def test_full_screen_programs_and_scrollback_limit(make_task):
    async with env_for(make_task(), history_limit=50, step_limit=200) as env:
        await env.reset()
        ts, seen = await step_until(env, keys(("seq 1 200\n", 0.5)), "200\nroot@sandbox")
        out = new_parts(seen)
        assert "[earlier lines of new output went past the scrollback" in out
        assert "199\n200\nroot@sandbox:/app#" in out and "\n100\n" not in out
        # a program on the alternate screen (as vim and less use) is shown as its screen
        fullscreen = r"printf '\033[?1049h\033[HFULL-%s' SCREEN; read x; printf '\033[?1049l'"
        ts, seen = await step_until(env, keys((fullscreen + "\n", 0.3)), "FULL-SCREEN")
        assert seen[-1] == "Current Terminal Screen:\nFULL-SCREEN"
        ts, seen = await step_until(env, keys(("\n", 0.3)), "read x;")  # it ends
        assert seen[-1].startswith("Current Terminal Screen:\n") and "FULL-SCREEN" not in seen[-1]
        ts, seen = await step_until(env, keys(("echo after\n", 0.2)), "after\nroot@")
        assert new_parts(seen).endswith("\nafter\nroot@sandbox:/app#")
        await env.step(DONE)
        await env.step(DONE)
