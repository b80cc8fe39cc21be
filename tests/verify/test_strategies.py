"""Reward strategies end to end: HumanEval and one graded generator family per category, each
driven by scripted policies in real sandboxes (the oracle, nothing, a syntax error, a runtime
error, a known-wrong solution), scored through ``make(..., reward=...)``; plus the pure
strategies, a task that declares nothing, and CURE's two rewards."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from palaestra.env.code_env import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.scaffolds.oracle import NopPolicy, OraclePolicy
from palaestra.tasks import generators
from palaestra.tasks.datasets import humaneval
from palaestra.tasks.source import TaskSet
from palaestra.verify.strategies import (
    Assertions,
    CodeRL,
    ExecutionOnly,
    IOMatch,
    PartialCredit,
    get_strategy,
)
from tests.conftest import SUBMIT_ACTION, bash_action

#: One family per category, with the wrong solution that fails some but not all checks.
FAMILIES = {
    "edit-distance": "unit-costs",
    "access-log-report": None,
    "log-query-cli": None,
    "disk-usage-report": None,
    "log-split-io": None,
    "model-validation": None,
}
DIFFICULTY, SEED = 0.2, 0


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PALAESTRA_CACHE_DIR", str(tmp_path / "cache"))


def _written(solve: str) -> list[str]:
    """The files a solve.sh writes (``cat > FILE <<``), relative to /app."""
    return [f.strip("'\"") for f in re.findall(r"cat > (\S+) <<", solve)]


async def _episode(task, policy, reward="coderl"):
    async with CodeEnv(TaskSet([task]), reward=reward) as env:
        return await rollout(env, policy)


def _scripts(task) -> dict[str, list[str]]:
    """Scripted policies' actions: oracle code broken by a syntax error or a runtime error."""
    solve = (task.solution_dir / "solve.sh").read_text()
    first = next(f for f in _written(solve) if f.endswith(".py"))
    path = first if first.startswith("/") else f"/app/{first}"
    return {
        "syntax": [bash_action(solve + f"\nprintf 'def broken(:\\n' >> {path}"), SUBMIT_ACTION],
        "runtime": [
            bash_action(solve + f"\nsed -i '1i raise RuntimeError(\"boom\")' {path}"),
            SUBMIT_ACTION,
        ],
    }


def _wrong(task, name: str | list[str] | None) -> list[str]:
    if isinstance(name, list):
        return name
    root = task.path / "wrong_solutions"
    # the family's own wrong solutions, not the attacks added beside them (they error on purpose)
    own = sorted(p.name for p in root.iterdir() if not p.name.startswith("attack-"))
    names = [name] if name else own
    return [bash_action((root / names[0] / "solve.sh").read_text()), SUBMIT_ACTION]


def _counts(episode) -> dict[str, float]:
    assert episode.status != "error", episode.end.error
    return dict(episode.end.rewards)


async def _grades(task, wrong: str | list[str] | None):
    scripts = _scripts(task)
    oracle = await _episode(task, OraclePolicy.from_tasks([task]))
    r = _counts(oracle)
    assert oracle.reward == 1.0 and r["harbor_reward"] == 1.0
    assert PartialCredit().score(r).reward == 1.0 and ExecutionOnly().score(r).reward == 1.0

    nop = await _episode(task, NopPolicy())
    r = _counts(nop)
    assert r["harbor_reward"] == 0.0 and PartialCredit().score(r).reward < 1.0
    assert nop.reward == (-0.6 if r["tests_errored"] else -0.3)

    syntax = await _episode(task, ScriptedPolicy(scripts["syntax"]))
    r = _counts(syntax)
    assert syntax.reward == -1.0 and r["compile_error"] == 1.0
    assert ExecutionOnly().score(r).reward == 0.0

    runtime = await _episode(task, ScriptedPolicy(scripts["runtime"]))
    r = _counts(runtime)
    assert runtime.reward == -0.6 and r["tests_errored"] > 0 and r["compile_error"] == 0.0
    assert PartialCredit().score(r).reward == 0.0

    failing = await _episode(task, ScriptedPolicy(_wrong(task, wrong)))
    r = _counts(failing)
    assert failing.reward == -0.3, r
    assert 0.0 < PartialCredit().score(r).reward < 1.0, r
    return r


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
async def test_graded_family(family):
    task = generators.load_generated(family, SEED, DIFFICULTY)
    assert {"tests_total", "compile_error"} <= task.reward_outcomes
    r = await _grades(task, FAMILIES[family])
    kind = IOMatch() if "io_total" in task.reward_outcomes else Assertions()
    assert set(kind.requires) <= task.reward_outcomes
    assert 0.0 < kind.score(r).reward < 1.0


async def test_humaneval_graded():
    task = humaneval.load("humaneval-0")
    always_true = bash_action("sed -i 's/raise NotImplementedError/return True/' /app/solution.py")
    r = await _grades(task, [always_true, SUBMIT_ACTION])  # right on the close-pair cases only
    assert r["assert_total"] == r["tests_total"] > 1


def test_strategies_are_pure_functions_of_the_counts():
    counts = {
        "reward": 0.0,
        "tests_total": 4.0,
        "tests_passed": 3.0,
        "tests_failed": 1.0,
        "tests_errored": 0.0,
        "compile_error": 0.0,
        "io_total": 4.0,
        "io_passed": 3.0,
    }
    assert get_strategy("partial").score(counts).reward == 0.75
    assert get_strategy("coderl").score(counts).reward == -0.3
    assert get_strategy("exec_only").score(counts).reward == 1.0
    assert IOMatch(all_or_nothing=True).score(counts).reward == 0.0
    assert CodeRL().score({**counts, "tests_errored": 1.0}).reward == -0.6
    assert CodeRL().score({**counts, "tests_passed": 4.0}).reward == 1.0
    with pytest.raises(ValueError, match="unknown reward strategy 'pass@1'"):
        get_strategy("pass@1")


async def test_a_strategy_the_task_does_not_declare_is_an_error_episode():
    task = generators.load_generated("build-order", SEED, DIFFICULTY)
    assert not task.reward_outcomes
    episode = await _episode(task, OraclePolicy.from_tasks([task]), reward="partial")
    assert episode.status == "error"
    assert episode.end.error_class == "RewardStrategyError"
    assert "reward='partial' needs a task that reports tests_total" in episode.end.error


_GOOD_TESTS = """\
from solution import has_close_elements


def test_pairs_near_and_far():
    assert has_close_elements([1.0, 2.0, 2.05], 0.1) is True
    assert has_close_elements([1.0, 2.0, 3.0], 0.5) is False


def test_threshold_is_strict_and_pairs_distinct():
    assert has_close_elements([1.0, 1.5], 0.5) is False
    assert has_close_elements([4.0], 1.0) is False
    assert has_close_elements([0.0, 0.3], 0.31) is True
"""
_LAX_TESTS = """\
from solution import has_close_elements


def test_runs():
    has_close_elements([1.0, 2.0], 0.5)


def test_anything():
    assert True
"""


async def _cure(task, tests: str):
    solve = (task.solution_dir / "solve.sh").read_text()
    write = f"cat > /app/test_solution.py <<'EOF_TESTS'\n{tests}EOF_TESTS"
    policy = ScriptedPolicy([bash_action(solve + "\n" + write), SUBMIT_ACTION])
    async with CodeEnv(TaskSet([task]), reward="cure") as env:
        episode = await rollout(env, policy)
    assert episode.status != "error", episode.end.error
    assert "/app/test_solution.py" in episode.turns[0].observation.messages[-1]["content"]
    return episode


async def test_cure_rewards_good_tests_and_not_lax_ones():
    task = humaneval.load("humaneval-0")
    good = await _cure(task, _GOOD_TESTS)
    lax = await _cure(task, _LAX_TESTS)
    assert good.reward == lax.reward == 1.0  # the code reward: the reference passes
    g, x = good.end.rewards, lax.end.rewards
    assert g["cure_wrong_total"] >= 2 and g["cure_tests_total"] == 2
    assert g["test_reward"] > 0.5, g
    assert x["test_reward"] <= 0.0 and x["test_reward"] < g["test_reward"], x


def test_cure_variants_ship_with_the_tests_only():
    task = humaneval.load("humaneval-0")
    cure = sorted(p.name for p in (task.tests_dir / "cure").iterdir())
    assert cure[0].startswith("mutant_") and "reference.py" in cure
    assert not list(Path(task.environment_dir).rglob("*mutant*"))
