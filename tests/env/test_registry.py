import pytest

import palaestra
from palaestra.env.registry import load_tasks, parse_env_id
from palaestra.tasks.source import SelectorError


def test_starter_preset_is_listed():
    ids = [spec.id for spec in palaestra.list_envs()]
    assert "starter" in ids


@pytest.mark.parametrize(
    "env_id,name,selector",
    [
        ("starter", "starter", ""),
        ("starter:3", "starter", ":3"),
        ("starter:0:6", "starter", ":0:6"),
        ("starter:-2:", "starter", ":-2:"),
        ("starter@1/4", "starter", "@1/4"),
    ],
)
def test_parse_env_id(env_id, name, selector):
    assert parse_env_id(env_id) == (name, selector)


def test_selectors_pick_tasks():
    everything = load_tasks("starter")
    assert len(everything) >= 18
    assert load_tasks("starter:3").ids == [everything[3].id]
    assert load_tasks("starter:0:6").ids == everything.ids[0:6]
    shards = [load_tasks(f"starter@{k}/4").ids for k in range(4)]
    assert sorted(sum(shards, [])) == sorted(everything.ids)
    assert all(set(a).isdisjoint(b) for i, a in enumerate(shards) for b in shards[i + 1 :])


@pytest.mark.parametrize(
    "env_id,match",
    [
        ("starter:999", "out of range"),
        ("starter:5:5", "empty"),
        ("starter@4/4", "invalid"),
    ],
)
def test_bad_selectors_say_why(env_id, match):
    with pytest.raises(SelectorError, match=match):
        load_tasks(env_id)


def test_unknown_env_names_the_known_ones():
    with pytest.raises(KeyError, match="starter"):
        palaestra.make("no-such-env")


def test_make_builds_code_env_with_overrides(make_task):
    env = palaestra.make("starter:0:2", pick="cycle")
    assert isinstance(env, palaestra.CodeEnv) and len(env.tasks) == 2 and env.pick == "cycle"
    path_env = palaestra.make(str(make_task().parent))
    assert path_env.tasks.ids == ["answer-task"]


def test_register_custom_preset(make_task):
    from palaestra.tasks.source import TaskSet

    root = make_task().parent
    palaestra.register(
        "my-tasks",
        lambda: TaskSet.from_dir(root),
        description="mine",
        overwrite=True,
        verify_on_truncation=False,
    )
    env = palaestra.make("my-tasks")
    assert env.tasks.ids == ["answer-task"] and env.verify_on_truncation is False
    with pytest.raises(ValueError, match="already registered"):
        palaestra.register("my-tasks", lambda: TaskSet.from_dir(root))
