"""Procedural generators: the contract every family keeps, and the measured strength of its verifier.

The sample (CI exercises a sample, ``benchmarks/bench_generators.py --sample 20`` the whole, as
docs/tasks.md reports): for every Python family, one seed in each tier, the seeds shifted by the
family's place in the list so that the families together cover seeds 0-3, 7-10 and 14-17 of
every tier (3 tasks a family, 93 over the 31 families). On every sampled task the reference
solution must score 1.0, doing nothing 0.0 and every shipped wrong solution 0.0, with the
checker's checks actually run. The fast tier (``make test-fast``) checks one task of one family
per category. The families of other languages (their toolchains make each task slower) have their
own, smaller sample in test_language_families.py.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

import pytest

from palaestra.run.check import check_tasks, scenarios
from palaestra.tasks import generators as g
from palaestra.tasks import load_task
from palaestra.tasks.generators import _armed
from tests.tasks.family_facts import python_families
from tests.tasks.test_generator_attacks import EXPECTED as ATTACKS

FAMILIES = [f.name for f in g.families()]
#: The fast tier's families: the first of each category; every family in the full suite.
FIRST_OF_CATEGORY = {g.families(category)[0].name for category in g.CATEGORIES}
EACH_FAMILY = [
    name if name in FIRST_OF_CATEGORY else pytest.param(name, marks=pytest.mark.slow)
    for name in FAMILIES
]
PYTHON_FAMILIES = python_families()
FIRST_SEED = {"easy": 0, "medium": 7, "hard": 14}
#: ``attack-fork-relay`` spends all the CPU the checker gives the agent's runs (a third of its
#: alarm, 30-70 s a task: every run relays forks up to its bar until that budget is spent),
#: and what it proves, a CPU bar over the process tree, is the jail's and its hook's whatever
#: the family (``tests/sandbox/test_hostile_jail.py`` plays the class on both backends). So
#: the tiers play it on a sample: the fast tier on the optimization category's task, the slow
#: tier on one task of the last such family of each category; every family's in
#: ``benchmarks/bench_generators.py``. The other attacks cost what a wrong answer does.
RELAY = "wrong:" + _armed.RELAY


def _relaying(category: str) -> list[str]:
    """The category's Python families whose tasks carry the fork-relay attack."""
    return [
        f.name
        for f in g.families(category)
        if f.name in PYTHON_FAMILIES and _armed.RELAY in ATTACKS.get(f.name, ())
    ]


RELAY_SAMPLE = {_relaying(c)[-1] for c in g.CATEGORIES if _relaying(c)}
FAST_RELAY = {next(f.name for f in g.families("optimization") if f.name in PYTHON_FAMILIES)}


@pytest.fixture(autouse=True, scope="module")
def _cache(tmp_path_factory: pytest.TempPathFactory):
    old = os.environ.get("PALAESTRA_CACHE_DIR")
    os.environ["PALAESTRA_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        del os.environ["PALAESTRA_CACHE_DIR"]
    else:
        os.environ["PALAESTRA_CACHE_DIR"] = old


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        h.update(rel.encode())
        if path.is_file():
            h.update(path.read_bytes())
            h.update(str(path.stat().st_mode & 0o777).encode())
    return h.hexdigest()


def sample_tasks(family: str):
    """One task in each tier: seeds 0-3, 7-10 and 14-17 in turn over the families."""
    shift = FAMILIES.index(family) % 4
    return [
        g.load_generated(family, first + shift, g.tier_difficulty(tier, first + shift))
        for tier, first in FIRST_SEED.items()
    ]


async def assert_strong(tasks, relay: Collection[str] = ()) -> None:
    """The reference scores 1.0, doing nothing and every wrong solution (at least three) 0.0;
    the fork-relay attack is played on the tasks whose ids are in ``relay`` only (see
    :data:`RELAY_SAMPLE`)."""
    others = sorted({s for task in tasks for s in scenarios(task)} - {RELAY})
    results = await check_tasks(tasks, concurrency=4, only=others)
    relayed = [task for task in tasks if task.id in relay]
    if relayed:
        results += await check_tasks(relayed, concurrency=4, only=[RELAY])
        assert {r.task_id for r in results if r.scenario == RELAY} == set(relay)
    bad = [
        f"{r.task_id} {r.scenario}: expected {r.expected}, got {r.reward} ({r.status})\n"
        f"{r.detail[-800:]}"
        for r in results
        if not r.ok
    ]
    assert not bad, "\n\n".join(bad)
    for task in tasks:
        wrong = {
            r.scenario for r in results if r.task_id == task.id and r.scenario.startswith("wrong:")
        }
        assert len(wrong) >= 3, task.id


def test_five_different_families_in_each_category():
    for category in g.CATEGORIES:
        fams = g.families(category)
        assert len(fams) >= 5, f"{category} has {len(fams)} families"
        assert len({f.generate_fn for f in fams}) == len(fams)


def test_difficulty_and_tiers():
    assert g.tier_of(0.0) == "easy" and g.tier_of(0.33) == "easy"
    assert g.tier_of(0.34) == "medium" and g.tier_of(0.66) == "medium"
    assert g.tier_of(0.67) == "hard" and g.tier_of(1.0) == "hard"
    for bad in (-0.1, 1.01, "hard"):
        with pytest.raises(ValueError, match="difficulty must be a number in"):
            g.tier_of(bad)  # type: ignore[arg-type]
    for tier in g.TIERS:
        assert {g.tier_of(g.tier_difficulty(tier, s)) for s in range(200)} == {tier}
        assert len({g.tier_difficulty(tier, s) for s in range(200)}) > 20  # spread over the tier


def test_unknown_family_is_named():
    with pytest.raises(KeyError, match="no generator family 'meeting-room'.*meeting-rooms"):
        g.get_family("meeting-room")


def test_task_ids_round_trip():
    assert g.parse_task_id("meeting-rooms-d035-s12") == ("meeting-rooms", 12, 0.35)
    with pytest.raises(ValueError, match="not a generated task id"):
        g.parse_task_id("meeting-rooms-35")


@pytest.mark.parametrize("family", EACH_FAMILY)
def test_same_inputs_byte_identical_task_across_processes(family: str, tmp_path: Path):
    """Generated in two fresh interpreters with different hash seeds: the same bytes."""
    digests = []
    for hash_seed in ("1", "2"):
        dest = tmp_path / hash_seed
        code = (
            "import sys; from pathlib import Path; from palaestra.tasks import generators as g; "
            f"g.write({family!r}, 5, 0.5, Path(sys.argv[1]))"
        )
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-c", code, str(dest)], check=True, env=env)
        digests.append(tree_digest(dest))
    assert digests[0] == digests[1]
    other = tmp_path / "other-seed"
    g.write(family, 6, 0.5, other)
    assert tree_digest(other) != digests[0], "a different seed must give a different task"


@pytest.mark.slow
def test_generating_leaves_nothing_in_the_temporary_directory(tmp_path: Path):
    """Every family, each tier, generated in a fresh interpreter whose TMPDIR is empty: the
    references run at generation time (their ``tempfile.mkdtemp``s included) leave nothing
    there (nine directories a pass before their children got a TMPDIR of their own)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    code = (
        "from palaestra.tasks import generators as g\n"
        "for f in g.families():\n"
        "    for d in (0.1, 0.5, 0.9):\n"
        "        g.generate(f.name, 11, d)\n"
    )
    env = {**os.environ, "TMPDIR": str(scratch)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=600)
    assert sorted(p.name for p in scratch.iterdir()) == []


@pytest.mark.parametrize("family", EACH_FAMILY)
def test_metadata_and_harbor_validation(family: str):
    fam = g.get_family(family)
    for difficulty in (0.0, 0.5, 1.0):
        task = g.load_generated(family, 3, difficulty)  # the Harbor loader validates it
        meta = task.config.metadata
        assert task.category == fam.category
        assert task.difficulty == g.tier_of(difficulty)
        assert (meta["family"], meta["seed"], meta["difficulty_value"]) == (family, 3, difficulty)
        assert (task.tests_dir / "test.sh").is_file() and task.solve_script is not None
        assert len(list((task.path / "wrong_solutions").iterdir())) >= 3


@pytest.mark.parametrize("family", EACH_FAMILY)
def test_difficulty_changes_the_problem(family: str):
    """Not only the wording: the workspace or the hidden tests differ in size across tiers."""
    easy, hard = g.generate(family, 1, 0.0), g.generate(family, 1, 1.0)

    def size(files) -> int:
        return sum(len(v) for v in files.values())

    assert (size(easy.workspace), size(easy.tests)) != (size(hard.workspace), size(hard.tests))


def test_pack_is_lazy_and_reaches_ten_thousand_tasks(tmp_path: Path):
    os.environ["PALAESTRA_CACHE_DIR"] = str(tmp_path)
    seeds_per = -(-10_000 // (len(FAMILIES) * 3))
    pack = g.pack(seeds=range(seeds_per))
    assert len(pack) >= 10_000 and len(set(pack.ids)) == len(pack)
    assert pack.is_lazy and not any(tmp_path.iterdir()), "building a pack generates nothing"
    sub = pack.select(":5:8")
    assert sub.is_lazy and len(sub) == 3
    task = sub[1]
    assert task.id == pack.ids[6]
    assert [p.name for p in tmp_path.rglob("task.toml")] == ["task.toml"], "only the drawn task"
    assert pack.get(task.id) is task, "slices share the pack's cache"


def _tiers(ids: list[str]) -> list[str]:
    return [g.tier_of(g.parse_task_id(tid)[2]) for tid in ids]


@pytest.mark.parametrize("category", [None, "debugging"])
def test_slices_of_a_pack_are_balanced_across_families_and_tiers(category: str | None):
    """``gen:0:60`` used to hold only easy and medium tasks (the pack listed a seed's easy tier
    of every family first); every window of one task a family now holds each family once and
    the tiers in equal shares, and two seeds' worth of windows each family at every tier."""
    pack = g.pack(category=category, seeds=range(4))
    n = len(g.families(category))
    for start in range(0, len(pack) - n + 1, n):
        window = pack.ids[start : start + n]
        assert sorted(g.parse_task_id(t)[0] for t in window) == sorted(
            f.name for f in g.families(category)
        )
        counts = [_tiers(window).count(tier) for tier in g.TIERS]
        assert max(counts) - min(counts) <= 1, (start, counts)
    first = pack.ids[: 2 * n]
    assert {"easy", "medium", "hard"} <= set(_tiers(first)), "a short prefix reaches hard tasks"
    per_family = g.pack(families_=[FAMILIES[0]], seeds=range(2))
    assert _tiers(per_family.ids) == ["easy", "medium", "hard"] * 2


def test_exported_directory_round_trips(tmp_path: Path):
    family = FAMILIES[0]
    cached = g.materialise(family, 9, 0.7)
    exported = g.write(family, 9, 0.7, tmp_path / "export")
    assert tree_digest(exported) == tree_digest(cached)
    loaded = load_task(exported)
    assert loaded.instruction == g.generate(family, 9, 0.7).instruction.rstrip() + "\n" or (
        loaded.instruction.strip() == g.generate(family, 9, 0.7).instruction.strip()
    )


@pytest.mark.slow
@pytest.mark.parametrize("family", PYTHON_FAMILIES)
async def test_sample_oracle_passes_nop_and_wrong_solutions_fail(family: str):
    tasks = sample_tasks(family)
    relay = [tasks[FAMILIES.index(family) % 3].id] if family in RELAY_SAMPLE else []
    await assert_strong(tasks, relay)


async def test_one_task_of_one_family_a_category_is_strong():
    """The fast tier's sample: each category's first Python family, one task, its tier turning
    with the category."""
    tasks = []
    for i, category in enumerate(g.CATEGORIES):
        family = next(f.name for f in g.families(category) if f.name in PYTHON_FAMILIES)
        tier = g.TIERS[i % 3]
        tasks.append(g.load_generated(family, 1, g.tier_difficulty(tier, 1)))
    relay = [t.id for t in tasks if g.parse_task_id(t.id)[0] in FAST_RELAY]
    await assert_strong(tasks, relay)
