"""Names renamed for one name per concept (docs/architecture.md, Glossary) still work for one
release under their old spelling, each with a DeprecationWarning that names the new one and
points at the caller's line."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from palaestra.env.code_env import CodeEnv
from palaestra.env.registry import make, make_policy
from palaestra.env.types import LastInfo, termination
from palaestra.run.rollout import rollout
from palaestra.scaffolds import EndReason, Outcome
from palaestra.tasks.source import TaskSet

HERE = Path(__file__).name


def test_outcome_takes_and_gives_its_old_field_names_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        old = Outcome(status="step_limit", steps=4, trajectory=[{"turn": 0}])  # type: ignore[call-arg]
    assert {str(w.message) for w in caught} == {
        "Outcome.status is deprecated: use Outcome.reason",
        "Outcome.steps is deprecated: use Outcome.turns",
        "Outcome.trajectory is deprecated: use Outcome.executions",
    }
    assert all(w.filename.endswith(HERE) for w in caught)
    assert (old.reason, old.turns, old.executions) == (EndReason.STEP_LIMIT, 4, [{"turn": 0}])
    assert old.truncated
    new = Outcome(EndReason.SUBMITTED, 2, "done", [{"turn": 1}])
    for name, value in (("status", "submitted"), ("steps", 2), ("trajectory", [{"turn": 1}])):
        with pytest.warns(DeprecationWarning, match=f"Outcome.{name} is deprecated") as caught:
            assert getattr(new, name) == value
        assert caught[0].filename.endswith(HERE)


def test_outcome_under_its_new_names_warns_nothing(recwarn: pytest.WarningsRecorder) -> None:
    outcome = Outcome(reason="error", turns=0, message="boom", executions=[])
    assert outcome.error_class == "ScaffoldError" and outcome.turns == 0
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


def test_last_info_reads_trajectory_as_executions_with_a_warning() -> None:
    records = [{"turn": 0, "output": "hi"}]
    ts = termination(1.0, None, {"executions": records, "step": 1})
    assert isinstance(ts.info, LastInfo) and ts.info == {"executions": records, "step": 1}
    with pytest.warns(
        DeprecationWarning, match=r'info\["trajectory"\] .*info\["executions"\]'
    ) as w:
        assert ts.info["trajectory"] is records
    assert w[0].filename.endswith(HERE)
    with pytest.warns(DeprecationWarning, match="trajectory"):
        assert ts.info.get("trajectory") is records
    assert ts.info.get("usage", "none") == "none" and "trajectory" not in ts.info
    with pytest.raises(KeyError):
        LastInfo({})["trajectory"]  # nothing to stand for: a missing key stays missing
    assert LastInfo({}).get("trajectory") is None


async def test_codeenv_sampler_is_pick_with_a_warning(make_task, tmp_path: Path) -> None:
    for i in range(3):
        make_task(f"t{i}", root=tmp_path)
    tasks = TaskSet.from_dir(tmp_path)
    with pytest.warns(DeprecationWarning, match=r"CodeEnv\(sampler=...\) .*pick=") as w:
        env = CodeEnv(tasks, sampler="cycle")
    assert w[0].filename.endswith(HERE)
    async with env:
        assert env.pick == "cycle"
        assert [env._pick({}) for _ in range(4)] == ["t0", "t1", "t2", "t0"]


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("palaestra.scaffolds.loop", "Observation", "Execution"),
        ("palaestra.env.tools.pack", "Family", "ScenarioFamily"),
    ],
)
def test_old_module_names_are_the_new_classes_with_a_warning(module: str, old: str, new: str):
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=f"{module}.{old} is deprecated: use {new}") as w:
        assert getattr(mod, old) is getattr(mod, new)
    assert w[0].filename.endswith(HERE)
    with pytest.raises(AttributeError):
        mod.NoSuchName  # noqa: B018


def test_the_rl_sampling_module_is_the_sampler_module_with_a_warning() -> None:
    sampler = importlib.import_module("palaestra.rl.sampler")
    sys.modules.pop("palaestra.rl.sampling", None)
    with pytest.warns(DeprecationWarning, match="palaestra.rl.sampling is deprecated"):
        old = importlib.import_module("palaestra.rl.sampling")
    for name in old.__all__:
        assert getattr(old, name) is getattr(sampler, name)
    defined = {
        n for n, v in vars(sampler).items() if getattr(v, "__module__", "") == sampler.__name__
    }
    assert set(old.__all__) == defined | {"GroupFilter"}  # GroupFilter: a type alias


async def test_a_played_episode_still_reads_info_trajectory_with_a_warning() -> None:
    """End to end: a real ToolEnv episode's LAST info, as rollout hands it over."""
    async with make("tools/crm") as env:
        episode = await rollout(env, make_policy("nop"), options={"task_id": "crm-easy-0"})
    executions = episode.info["executions"]
    assert executions and executions[0]["turn"] == 0
    with pytest.warns(DeprecationWarning, match=r'info\["trajectory"\] is deprecated') as w:
        assert episode.info["trajectory"] is executions
    assert w[0].filename.endswith(HERE)
