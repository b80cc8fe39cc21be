import io
import tarfile
from pathlib import Path

import pytest

from palaestra.verify.harbor import (
    RewardFileError,
    _tests_archive,
    parse_reward_json,
    parse_reward_txt,
    scalar_reward,
)


def test_reward_json_flat_numbers():
    assert parse_reward_json('{"reward": 1, "tests_passed": 3}') == {
        "reward": 1.0,
        "tests_passed": 3.0,
    }


@pytest.mark.parametrize(
    "text,match",
    [
        ("", "empty"),
        ("{", "not valid JSON"),
        ("[1]", "object"),
        ("{}", "reward kit writes {} when it finds no criteria"),
        ('{"reward": "1"}', "finite number"),
        ('{"reward": true}', "finite number"),
        ('{"reward": {"a": 1}}', "finite number"),
        ('{"reward": NaN}', "finite number"),
    ],
)
def test_reward_json_malformed(text, match):
    with pytest.raises(RewardFileError, match=match):
        parse_reward_json(text)


@pytest.mark.parametrize("text,value", [("1", 1.0), ("0\n", 0.0), (" 0.25 ", 0.25)])
def test_reward_txt(text, value):
    assert parse_reward_txt(text) == {"reward": value}


@pytest.mark.parametrize("text", ["", "\n", "passed", "1 2", "inf", "nan"])
def test_reward_txt_malformed(text):
    with pytest.raises(RewardFileError):
        parse_reward_txt(text)


def test_scalar_reward_prefers_reward_key_then_single_key():
    assert scalar_reward({"reward": 0.5, "x": 1}) == 0.5
    assert scalar_reward({"score": 0.7}) == 0.7


def test_reward_kit_dimensions_give_their_mean_or_the_named_primary():
    # rewardkit's multi-reward layout (tests/correctness/, tests/quality/...) without a root
    # reward.toml: one key per dimension, no "reward" key
    dimensions = parse_reward_json('{"correctness": 1.0, "structure": 0.5, "quality": 0.0}')
    assert scalar_reward(dimensions) == 0.5
    assert scalar_reward(dimensions, "structure") == 0.5
    assert scalar_reward(dimensions, "correctness") == 1.0
    # run_multi's namespaced keys, one test directory each
    assert scalar_reward({"unit/reward": 1.0, "lint/reward": 0.0}) == 0.5
    # a root [[reward]] name = "reward" aggregate is the reward; a named primary wins over it
    assert scalar_reward({"reward": 0.8, "correctness": 1.0}) == 0.8
    assert scalar_reward({"reward": 0.8, "correctness": 1.0}, "correctness") == 1.0
    with pytest.raises(RewardFileError, match=r"no 'style' key, which \[metadata\] primary_reward"):
        scalar_reward(dimensions, "style")
    # declared outcome keys (counts) are never averaged in
    counts = {"tests_total": 12.0, "tests_passed": 12.0}
    assert scalar_reward({"correctness": 0.25, **counts}, outcomes=frozenset(counts)) == 0.25
    with pytest.raises(RewardFileError, match="only outcome keys .* add a 'reward' key"):
        scalar_reward(counts, outcomes=frozenset(counts))


def test_resolve_env_vars(monkeypatch):
    from palaestra.verify.harbor import resolve_env_vars

    monkeypatch.setenv("PALAESTRA_T_TOKEN", "s3cret")
    monkeypatch.delenv("PALAESTRA_T_MISSING", raising=False)
    assert resolve_env_vars(
        {"A": "plain", "B": "${PALAESTRA_T_TOKEN}", "C": "${PALAESTRA_T_MISSING:-dflt}"}
    ) == {"A": "plain", "B": "s3cret", "C": "dflt"}
    with pytest.raises(KeyError, match="PALAESTRA_T_MISSING"):
        resolve_env_vars({"D": "${PALAESTRA_T_MISSING}"})


def test_the_tests_archive_is_made_again_once_a_file_changed(tmp_path: Path) -> None:
    """A run packs a task's tests once; an edit to any file under them (or a new one) is in
    the next verification's archive."""
    tests = tmp_path / "tests"
    (tests / "data").mkdir(parents=True)
    (tests / "test.sh").write_text("echo one\n")
    first = _tests_archive((tests,))
    assert _tests_archive((tests,)) is first  # from the cache
    (tests / "test.sh").write_text("echo three\n")
    second = _tests_archive((tests,))
    assert b"echo three" in second and b"echo one" not in second
    (tests / "data" / "x.json").write_text("{}")
    with tarfile.open(fileobj=io.BytesIO(_tests_archive((tests,)))) as tar:
        assert "data/x.json" in tar.getnames()
