"""Curricula against a scripted policy whose success depends on difficulty, and one AdaRFT run
on real sandboxes over generated tasks drawn outside the preset's list."""

from __future__ import annotations

import asyncio
import math
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from palaestra.env.registry import load_tasks, make
from palaestra.rl.curricula import (
    AdaCuRL,
    AdaRFT,
    CurriculumExhausted,
    DifficultyPools,
    LearnabilityBand,
    Uniform,
    difficulty_of,
)
from palaestra.rl.curricula.tally import IdBag
from palaestra.rl.sampler import GroupOutcome, TaskDraw, TaskSampler, has_reward_variance
from palaestra.run import rollout
from palaestra.scaffolds import NopPolicy, OraclePolicy
from palaestra.tasks import generators
from palaestra.tasks.loader import load_task
from palaestra.tasks.source import TaskSet, _ExtraCache

FAMILY = "meeting-rooms"
GROUP = 8


def ids_at(difficulties: list[float], family: str = FAMILY) -> list[str]:
    return [generators.get_family(family).task_id(seed, d) for seed, d in enumerate(difficulties)]


def threshold_model(edge: float = 0.45, noise: float = 0.05) -> Callable[[float], float]:
    """Solves a task below ``edge`` with probability 1 - noise, above it with ``noise``."""
    return lambda d: 1 - noise if d < edge else noise


def logistic_model(mid: float = 0.45, width: float = 0.05) -> Callable[[float], float]:
    return lambda d: 1 / (1 + math.exp((d - mid) / width))


def attempt(draw: TaskDraw, p: Callable[[float], float], rng: random.Random, n: int = GROUP):
    assert draw.difficulty is not None
    passed = tuple(rng.random() < p(draw.difficulty) for _ in range(n))
    return GroupOutcome(draw, rewards=tuple(float(x) for x in passed), passed=passed)


def run(sampler: TaskSampler, p: Callable[[float], float], groups: int, seed: int = 0):
    """Draw, attempt and feed back ``groups`` times; the draws in order."""
    rng, policy_rng = random.Random(seed), random.Random(seed + 1)
    draws = []
    for _ in range(groups):
        draw = sampler.draw(rng)
        sampler.update(attempt(draw, p, policy_rng))
        draws.append(draw)
    return draws


# -- uniform -----------------------------------------------------------------------------------


def test_uniform_covers_the_list_evenly_and_replays_from_the_rng():
    ids = ids_at([0.1, 0.5, 0.9, 0.3])
    draws = run(Uniform(ids), threshold_model(), 4000)
    counts = Counter(d.task_id for d in draws)
    assert set(counts) == set(ids) and all(900 < c < 1100 for c in counts.values())
    assert {d.task_id: d.difficulty for d in draws} == dict(
        zip(ids, [0.1, 0.5, 0.9, 0.3], strict=True)
    )
    again = run(Uniform(ids), threshold_model(), 4000)
    assert again == draws, "same rng seed, same draws (task, reset seed, difficulty)"
    with pytest.raises(ValueError, match="duplicate task ids"):
        Uniform(["a", "a"])


# -- AdaRFT ------------------------------------------------------------------------------------


@pytest.mark.parametrize("start", [0.0, 1.0])
def test_adarft_target_settles_where_mean_reward_is_beta(start: float):
    sampler = AdaRFT([FAMILY, "edit-distance"], target=start, eta=0.02)
    draws = run(sampler, logistic_model(mid=0.45), 400)
    late = [d.difficulty for d in draws[-200:]]
    assert all(x is not None for x in late)
    mean_late = sum(late) / len(late)
    assert abs(mean_late - 0.45) < 0.03, mean_late
    assert abs(sampler.target - 0.45) < 0.06 and sampler.updates == 400


def test_adarft_draws_fresh_generated_tasks_at_the_target():
    sampler = AdaRFT([FAMILY, "edit-distance"], target=0.37, eta=0.0, first_seed=500)
    rng = random.Random(3)
    draws = [sampler.draw(rng) for _ in range(50)]
    assert len({d.task_id for d in draws}) == 50, "a new task every draw"
    for d in draws:
        family, seed, difficulty = generators.parse_task_id(d.task_id)
        assert family in (FAMILY, "edit-distance") and difficulty == d.difficulty == 0.37
        assert seed >= 500 and d.seed == seed
    assert {generators.parse_task_id(d.task_id)[0] for d in draws} == {FAMILY, "edit-distance"}
    spread = AdaRFT([FAMILY], target=0.5, spread=0.1)
    jittered = {spread.draw(rng).difficulty for _ in range(200)}
    assert min(jittered) >= 0.4 and max(jittered) <= 0.6 and len(jittered) > 10


def test_adarft_update_rule_window_and_error_groups():
    sampler = AdaRFT([FAMILY], target=0.5, eta=0.1, alpha=2.0, beta=0.5, window=2)
    draw = sampler.draw(random.Random(0))
    sampler.update(GroupOutcome(draw, (1.0, 1.0), (True, True)))
    assert sampler.target == 0.5 and sampler.state()["pending_groups"] == 1
    sampler.update(GroupOutcome(draw, (0.0, 1.0), (False, True)))  # R̄ = 3/4 over both groups
    assert sampler.target == pytest.approx(0.5 + 0.1 * math.tanh(2 * 0.25))
    sampler.update(GroupOutcome(draw, (), ()))  # every episode errored: not a reward of 0
    assert sampler.state()["skipped"] == 1 and sampler.state()["pending_groups"] == 0
    low = AdaRFT([FAMILY], target=0.02, eta=0.5)
    low.update(GroupOutcome(draw, (0.0,), (False,)))
    assert low.target == 0.0, "clipped to the bounds"
    with pytest.raises(KeyError, match="no generator family"):
        AdaRFT(["meeting-roomz"])


# -- INTELLECT-3 pools -------------------------------------------------------------------------


def test_pools_respect_their_ratios_and_fall_back_to_normal():
    ids = ids_at([i / 30 for i in range(30)])
    initial = {
        t: ("easy" if i < 10 else "hard" if i >= 20 else "normal") for i, t in enumerate(ids)
    }
    sampler = DifficultyPools(ids, easy_fraction=0.2, hard_fraction=0.3, initial=initial)
    rng = random.Random(0)
    for _ in range(10_000):
        sampler.draw(rng)
    drawn = sampler.state()["drawn"]
    assert abs(drawn["easy"] / 10_000 - 0.2) < 0.02
    assert abs(drawn["hard"] / 10_000 - 0.3) < 0.02
    assert abs(drawn["normal"] / 10_000 - 0.5) < 0.02
    only_normal = DifficultyPools(ids[:3], easy_fraction=0.5, hard_fraction=0.5)
    for _ in range(100):
        only_normal.draw(rng)
    assert only_normal.state()["drawn"]["normal"] == 100 and only_normal.fallbacks == 100


def test_pools_file_tasks_by_solve_rate_and_move_them_as_the_policy_changes():
    ids = ids_at([i / 40 for i in range(40)])
    sampler = DifficultyPools(ids)
    run(sampler, threshold_model(edge=0.45, noise=0.0), 600)
    easy, hard = sampler.pool("easy"), sampler.pool("hard")
    assert easy and hard
    assert all(difficulty_of(t) < 0.45 for t in easy)
    assert all(difficulty_of(t) >= 0.45 for t in hard)
    moves = sampler.moves
    run(sampler, threshold_model(edge=1.1, noise=0.0), 1500, seed=7)  # the policy got better
    assert sampler.moves > moves and not sampler.pool("hard")
    assert set(sampler.pool("easy")) > set(easy), "hard tasks moved to easy once solved"


def test_pools_with_the_online_filter_keep_only_groups_that_teach():
    ids = ids_at([i / 20 for i in range(20)])
    sampler = DifficultyPools(ids)
    rng, policy_rng = random.Random(0), random.Random(1)
    p = logistic_model(mid=0.5, width=0.1)
    kept = [has_reward_variance(attempt(sampler.draw(rng), p, policy_rng)) for _ in range(300)]
    assert 0 < sum(kept) < 300, "zero-variance groups exist and are dropped"


# -- AdaCuRL -----------------------------------------------------------------------------------


def test_adacurl_merges_buckets_in_order_once_mastered():
    ids = ids_at([i / 30 for i in range(31)])
    sampler = AdaCuRL.by_difficulty(ids, threshold=0.8, window=8, revisit=0.2)
    tiers = [
        [t for t in ids if generators.tier_of(difficulty_of(t)) == tier]
        for tier in generators.TIERS
    ]
    assert sampler.buckets == tiers and all(tiers)
    rng, policy_rng = random.Random(0), random.Random(1)
    p = threshold_model(edge=0.7, noise=0.02)  # masters easy and medium, not hard
    first_draws = [sampler.draw(rng) for _ in range(5)]
    assert all(d.difficulty < 1 / 3 for d in first_draws), "easiest bucket first"
    for draw in first_draws:
        sampler.update(attempt(draw, p, policy_rng))
    run_state = [sampler.state()["frontier"]]
    for _ in range(200):
        sampler.update(attempt(sampler.draw(rng), p, policy_rng))
        run_state.append(sampler.state()["frontier"])
    assert run_state == sorted(run_state), "the frontier only moves forward"
    assert sampler.frontier == 2 and len(sampler.merged_at) == 3
    assert sampler.merged_at[1] >= 8, "a bucket merges only after a full window"
    stalled = AdaCuRL.by_difficulty(ids, threshold=0.8, window=8)
    run(stalled, threshold_model(edge=0.5, noise=0.02), 300)
    assert stalled.frontier == 1, "medium is half unsolved: hard is never merged"


def test_adacurl_revisits_earlier_buckets_at_the_set_rate():
    ids = ids_at([i / 30 for i in range(31)])
    sampler = AdaCuRL.by_difficulty(ids, threshold=0.0, window=1, revisit=0.3)
    run(sampler, threshold_model(), 10)  # threshold 0: each frontier group merges the next
    assert sampler.frontier == 2
    before = list(sampler.drawn)
    rng = random.Random(5)
    for _ in range(10_000):
        sampler.draw(rng)
    drawn = [a - b for a, b in zip(sampler.drawn, before, strict=True)]
    assert abs((drawn[0] + drawn[1]) / 10_000 - 0.3) < 0.02
    assert abs(drawn[0] - drawn[1]) < 300, "revisits spread evenly over earlier buckets"
    with pytest.raises(ValueError, match="no difficulty"):
        AdaCuRL.by_difficulty(["not-a-generated-id"])


# -- learnability band -------------------------------------------------------------------------


def test_band_evicts_tasks_always_or_never_solved():
    ids = ids_at([i / 20 for i in range(20)])
    sampler = LearnabilityBand(ids, min_attempts=16)

    def p(d: float) -> float:
        return 1.0 if d < 0.3 else 0.0 if d > 0.6 else 0.5

    run(sampler, p, 400)
    left = {t for t in ids if t in sampler.active}
    assert left == {t for t in ids if 0.3 <= difficulty_of(t) <= 0.6}
    assert sampler.state()["evicted_solved"] == 6 and sampler.state()["evicted_unsolved"] == 7
    assert all(0 < sampler.tallies[t].rate < 1 for t in left)
    done = LearnabilityBand(ids[:2], min_attempts=4)
    run(done, lambda d: 1.0, 2)
    with pytest.raises(CurriculumExhausted, match="evicted all 2 tasks"):
        done.draw(random.Random(0))


def test_band_variance_weighting_prefers_a_coin_flip():
    coin, likely = ids_at([0.5, 0.2])
    sampler = LearnabilityBand([coin, likely], min_attempts=10_000, weighting="variance")
    run(sampler, lambda d: 0.5 if d == 0.5 else 0.9, 300)
    assert sampler.weight(coin) > sampler.weight(likely)
    counts = Counter(sampler.draw(random.Random(i)).task_id for i in range(2000))
    assert counts[coin] > 1.5 * counts[likely]


def test_id_bag_removes_and_chooses_in_constant_time():
    bag = IdBag(["a", "b", "c"])
    bag.remove("a")
    assert sorted(bag) == ["b", "c"] and "a" not in bag and len(bag) == 2
    assert {bag.choice(random.Random(i)) for i in range(50)} == {"b", "c"}


# -- an env runs any drawn generated task ------------------------------------------------------


def test_generated_presets_accept_any_valid_id_of_their_families():
    gen, algorithms, family = (
        load_tasks("gen"),
        load_tasks("gen/algorithms"),
        load_tasks(f"gen/{FAMILY}"),
    )
    far = f"{FAMILY}-d043-s987654"
    assert far not in family and family.accepts(far) and gen.accepts(far)
    assert algorithms.accepts(far) and not algorithms.accepts("sort-inbox-d010-s1")
    assert load_tasks("gen/algorithms:0:3").accepts(far), "selections share the source"
    for bad in (f"{FAMILY}-d101-s1", f"{FAMILY}-d043-s01", "meeting-roomz-d043-s1", "x"):
        assert not gen.accepts(bad), bad
    with pytest.raises(KeyError, match="did you mean"):
        family.check("meeting-roomz-d043-s1")
    assert len(family) == 3 * 120, "the listed ids are unchanged"


def test_open_task_set_loads_outside_ids_once_and_bounds_them(make_task):
    path = make_task()
    loads: list[str] = []

    def loader(task_id: str):
        loads.append(task_id)
        return load_task(path, task_id=task_id)

    tasks = TaskSet.lazy(["a"], loader, "t", accepts=lambda t: t.startswith("x-"))
    assert tasks.get("x-1").id == "x-1" and tasks.get("x-1").id == "x-1"
    assert loads == ["x-1"] and len(tasks) == 1 and tasks.ids == ["a"]
    with pytest.raises(KeyError, match="no task 'y' in 't'"):
        tasks.get("y")
    assert not TaskSet.lazy(["a"], loader, "closed").accepts("x-1")
    cache = _ExtraCache(size=2)
    for i in range(3):
        cache.put(loader(f"x-{i}"))
    assert cache.get("x-0") is None and cache.get("x-2") is not None


async def test_unknown_ids_fail_before_any_sandbox(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PALAESTRA_CACHE_DIR", str(tmp_path / "cache"))
    async with make(f"gen/{FAMILY}") as env:
        with pytest.raises(KeyError, match="did you mean"):
            await env.reset(options={"task_id": "meeting-roomz-d040-s1"})
    assert not (tmp_path / "cache").exists(), "nothing was generated"


async def test_adarft_moves_its_target_on_real_episodes(tmp_path: Path, monkeypatch):
    """An oracle below difficulty 0.45, a no-op above it: two groups solved push the target
    up past 0.45, the next group fails and pulls it back."""
    monkeypatch.setenv("PALAESTRA_CACHE_DIR", str(tmp_path / "cache"))
    sampler = AdaRFT([FAMILY], target=0.35, eta=0.1)
    rng = random.Random(0)
    targets = []
    async with make(f"gen/{FAMILY}") as env:
        listed = set(env.tasks.ids)
        for _ in range(3):
            draw = sampler.draw(rng)
            assert draw.task_id not in listed, "a fresh task, outside the preset's list"
            task = await asyncio.to_thread(env.tasks.get, draw.task_id)
            assert draw.difficulty is not None
            policy = OraclePolicy.from_tasks([task]) if draw.difficulty < 0.45 else NopPolicy()
            episodes = [
                await rollout(env, policy, seed=draw.seed, options={"task_id": draw.task_id})
                for _ in range(2)
            ]
            assert {e.task_id for e in episodes} == {draw.task_id}
            rewards = tuple(e.reward for e in episodes)
            sampler.update(GroupOutcome(draw, rewards, tuple(r == 1.0 for r in rewards)))
            targets.append((draw.difficulty, rewards, sampler.target))
    step = 0.1 * math.tanh(1.0)
    assert [t[:2] for t in targets] == [(0.35, (1.0, 1.0)), (0.43, (1.0, 1.0)), (0.5, (0.0, 0.0))]
    assert [t[2] for t in targets] == pytest.approx([0.35 + step, 0.35 + 2 * step, 0.35 + step])
