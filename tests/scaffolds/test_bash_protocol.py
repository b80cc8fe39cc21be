import pickle

import pytest

from palaestra.llm.types import SamplingParams
from palaestra.sandbox.base import ExecResult
from palaestra.scaffolds import make_scaffold
from palaestra.scaffolds.bash import BashScaffold, is_submission, parse_actions
from palaestra.scaffolds.loop import head_tail


def test_parse_exactly_the_fenced_bash_blocks():
    assert parse_actions("x\n```bash\nls -la\n```\n") == ["ls -la"]
    assert parse_actions("```bash\na\n```\n```bash\nb\n```") == ["a", "b"]
    assert parse_actions("```python\nprint(1)\n```") == []
    assert parse_actions(None) == []


def test_submission_needs_sentinel_on_first_line():
    assert is_submission(ExecResult("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\nrest", "", 0))
    assert not is_submission(ExecResult("hello\nCOMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "", 0))


def test_long_output_shows_head_and_tail():
    scaffold = BashScaffold(observation_chars=100)
    text = "H" * 60 + "M" * 1000 + "T" * 60
    obs = scaffold.observation(ExecResult(text, "", 0))
    assert "H" * 50 in obs and "T" * 50 in obs and "M" * 20 not in obs
    assert "1020 characters elided" in obs
    assert head_tail("short", 100) is None


def test_timeout_observation_mentions_limit_and_partial_output():
    scaffold = BashScaffold(command_timeout=5)
    obs = scaffold.observation(ExecResult("partial out", "", None, timed_out=True))
    assert "within 5 seconds and was killed" in obs
    assert "<output>\npartial out</output>" in obs


@pytest.mark.parametrize("name", ["bash", "bash-compact", "tools", "terminus"])
def test_a_turn_scaffold_with_options_pickles_as_its_config(name):
    """What a Ray actor receives: the same config, templates compiled afresh."""
    scaffold = make_scaffold(name, step_limit=7, sampling=SamplingParams(max_tokens=64))
    copy = pickle.loads(pickle.dumps(scaffold))
    assert type(copy) is type(scaffold) and copy.config == scaffold.config
    context = {"task": {"instruction": "Fix it."}, "workdir": "/app", "n_actions": 2}
    assert copy.render("system", **context) == scaffold.render("system", **context)
