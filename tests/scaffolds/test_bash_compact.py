"""The ``bash-compact`` preset: short prompts, bare fences, one response, then verification."""

from __future__ import annotations

from palaestra import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.scaffolds import make_scaffold
from palaestra.scaffolds.bash import SUBMIT_SENTINEL, parse_actions
from palaestra.tasks import generators
from palaestra.tasks.source import TaskSet


def test_bare_fences_count_only_when_asked():
    bare = "Here:\n```\nls /app\n```\n"
    assert parse_actions(bare) == []
    assert parse_actions(bare, bare_fences=True) == ["ls /app"]
    assert parse_actions("```shell\npwd\n```", bare_fences=True) == ["pwd"]
    assert parse_actions("```python\nprint(1)\n```", bare_fences=True) == []
    assert parse_actions("```bash\na\n```\n```\nb\n```", bare_fences=True) == ["a", "b"]


def one_command_task():
    """A generated shell-warmup task and its reference command (the solve script's last line)."""
    task = generators.pack(families_=["shell-warmup"], tiers=("easy",), seeds=range(1))[0]
    command = task.solve_script.read_text().strip().splitlines()[-1]
    return task, command


async def episode(task, response: str):
    scaffold = make_scaffold("bash-compact")
    async with CodeEnv(TaskSet([task]), scaffold=scaffold) as env:
        return await rollout(env, ScriptedPolicy([response]))


async def test_one_bare_fenced_command_is_run_and_verified():
    task, command = one_command_task()
    solved = await episode(task, f"Sure.\n```\n{command}\n```\nThat creates it.")
    assert solved.reward == 1.0 and solved.end_reason == "step_limit" and len(solved.turns) == 1
    assert solved.turns[0].observation.metadata["scaffold"] == "bash-compact"
    request = solved.turns[0].observation.messages
    assert (
        request[0]["role"] == "system" and "skilled software engineer" not in request[0]["content"]
    )
    assert task.instruction.strip() in request[1]["content"]
    assert SUBMIT_SENTINEL not in request[1]["content"]  # no submission step to explain
    wrong = await episode(task, "```\ntrue\n```")
    assert wrong.reward == 0.0 and wrong.end_reason == "step_limit"
