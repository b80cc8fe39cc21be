"""Procedural task generators: families of verifiable tasks with a difficulty knob.

    from palaestra.tasks import generators
    fam = generators.get_family("merge-intervals")
    task = generators.load_generated("merge-intervals", seed=7, difficulty=0.8)  # a Harbor Task
    pack = generators.pack(category="debugging", tiers=("hard",), seeds=range(100))  # lazy TaskSet

A task is written to a content-addressed cache directory the first time it is used
(``$PALAESTRA_CACHE_DIR/generated``, default ``~/.cache/palaestra/generated``), keyed by family,
generator version (a hash of its source), seed and difficulty; nothing is generated until a task is
drawn, so packs of any size are free to build. Families live in one module each under a package
per category and register themselves with :func:`family`.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import os
import pkgutil
import re
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from palaestra.tasks.generators.base import (
    CATEGORIES,
    TIERS,
    Family,
    GeneratedTask,
    GenSpec,
    Tier,
    module_version,
    python_test_sh,
    quantise,
    solve_sh_writing,
    task_id,
    tier_of,
    write_atomically,
    write_task,
)
from palaestra.tasks.loader import load_task
from palaestra.tasks.source import TaskSet
from palaestra.tasks.task import Task

__all__ = [
    "CATEGORIES",
    "TIERS",
    "Family",
    "GenSpec",
    "GeneratedTask",
    "accepts_id",
    "cache_dir",
    "families",
    "family",
    "generate",
    "get_family",
    "load_generated",
    "materialise",
    "pack",
    "parse_task_id",
    "python_test_sh",
    "solve_sh_writing",
    "tier_of",
    "tier_difficulty",
    "balanced_order",
]

_FAMILIES: dict[str, Family] = {}
_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_TASK_ID = re.compile(r"^(?P<family>[a-z0-9-]+?)-d(?P<d>\d{3})-s(?P<seed>\d+)$")


def family(
    name: str, *, category: str, summary: str
) -> Callable[[Callable[[GenSpec], GeneratedTask]], Callable[[GenSpec], GeneratedTask]]:
    """Register a generator function as the family ``name`` of ``category``."""
    if not _NAME.match(name):
        raise ValueError(f"family name {name!r}: use lower-case words joined by '-'")
    if category not in CATEGORIES:
        raise ValueError(f"family {name!r}: unknown category {category!r}; one of {CATEGORIES}")

    def register(fn: Callable[[GenSpec], GeneratedTask]) -> Callable[[GenSpec], GeneratedTask]:
        if name in _FAMILIES and _FAMILIES[name].generate_fn is not fn:
            raise ValueError(f"family {name!r} is registered twice")
        _FAMILIES[name] = Family(name, category, summary, fn, module_version(fn))
        return fn

    return register


@functools.cache
def _discover() -> None:
    """Import every family module (each registers itself)."""
    for info in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        leaf = info.name.rsplit(".", 1)[-1]
        if leaf == "base" or leaf.startswith(("_", "palaestra_")):  # the shipped runtime too
            continue
        importlib.import_module(info.name)


def families(category: str | None = None) -> list[Family]:
    """Registered families (of one category), sorted by category then name."""
    _discover()
    if category is not None and category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}; one of {', '.join(CATEGORIES)}")
    found = [f for f in _FAMILIES.values() if category in (None, f.category)]
    return sorted(found, key=lambda f: (CATEGORIES.index(f.category), f.name))


def get_family(name: str) -> Family:
    _discover()
    try:
        return _FAMILIES[name]
    except KeyError:
        close = difflib.get_close_matches(name, _FAMILIES, n=3)
        hint = (
            f"; did you mean {', '.join(close)}?" if close else "; see `palaestra tasks families`"
        )
        raise KeyError(f"no generator family {name!r}{hint}") from None


def generate(name: str, seed: int, difficulty: float) -> GeneratedTask:
    return get_family(name).generate(seed, difficulty)


def cache_dir() -> Path:
    root = os.environ.get("PALAESTRA_CACHE_DIR") or Path.home() / ".cache" / "palaestra"
    return Path(root) / "generated"


def write(name: str, seed: int, difficulty: float, dest: Path) -> Path:
    """Generate and write the task as a Harbor directory at ``dest`` (which must not exist)."""
    fam = get_family(name)
    spec = fam.spec(seed, difficulty)
    return write_task(fam, spec, fam.generate(seed, difficulty), dest)


def materialise(name: str, seed: int, difficulty: float, root: Path | None = None) -> Path:
    """The task's directory in the cache, generated on first use (atomically: concurrent
    processes asking for the same task never see a half-written directory)."""
    fam = get_family(name)
    difficulty = quantise(difficulty)
    tid = task_id(name, seed, difficulty)
    dest = (root or cache_dir()) / name / fam.version / tid
    return write_atomically(dest, lambda tmp: write(name, seed, difficulty, tmp))


def parse_task_id(tid: str) -> tuple[str, int, float]:
    """``"merge-intervals-d035-s12"`` -> ``("merge-intervals", 12, 0.35)``."""
    m = _TASK_ID.match(tid)
    if not m:
        raise ValueError(
            f"{tid!r} is not a generated task id; they read <family>-d<000..100>-s<seed>, "
            "e.g. merge-intervals-d035-s12"
        )
    return m.group("family"), int(m.group("seed")), int(m.group("d")) / 100


def accepts_id(tid: str, family_names: Collection[str] | None = None) -> bool:
    """Whether ``tid`` is a canonical generated task id (difficulty 000..100, a seed without
    leading zeros) of a registered family, or of one of ``family_names``. Loads nothing."""
    try:
        name, seed, difficulty = parse_task_id(tid)
    except ValueError:
        return False
    _discover()
    if name not in _FAMILIES or (family_names is not None and name not in family_names):
        return False
    return difficulty <= 1.0 and task_id(name, seed, difficulty) == tid


def load_generated(name: str, seed: int, difficulty: float) -> Task:
    """The generated task as a loaded Harbor :class:`Task` (from the cache)."""
    path = materialise(name, seed, difficulty)
    return load_task(path, task_id=task_id(name, seed, difficulty))


def _load_by_id(tid: str) -> Task:
    return load_generated(*parse_task_id(tid))


#: The tier ranges on the two-decimal grid task ids use.
_TIER_GRID: dict[str, tuple[int, int]] = {"easy": (0, 33), "medium": (34, 66), "hard": (67, 100)}


def tier_difficulty(tier: Tier, seed: int) -> float:
    """A difficulty inside ``tier``'s range, spread by ``seed`` (a golden-ratio sequence), so a
    pack's tasks cover the whole tier rather than one point of it."""
    low, high = _TIER_GRID[tier]
    frac = (seed * 0.6180339887498949) % 1.0
    return (low + round((high - low) * frac)) / 100


def balanced_order(n_families: int, n_tiers: int) -> list[tuple[int, int]]:
    """The (family, tier) indices of one seed of a pack, in rounds: round ``r`` lists every
    family once, family ``f`` at tier ``(f + r) mod n_tiers``, so each round spreads the tiers
    evenly over the families and each family meets every tier once in ``n_tiers`` rounds.

    A pack repeats this for seed 0, 1, ...: any slice of ``n_families`` consecutive tasks holds
    every family once and the tiers in equal shares (within one), and any ``n_tiers``
    consecutive tasks of one family's pack hold one task of each tier."""
    return [(f, (f + r) % n_tiers) for r in range(n_tiers) for f in range(n_families)]


def pack(
    *,
    families_: Iterable[str] | None = None,
    category: str | None = None,
    tiers: Iterable[Tier] = TIERS,
    seeds: Iterable[int] = range(100),
    name: str = "gen",
    open_ids: bool = True,
) -> TaskSet:
    """A lazy task set: every chosen family x tier x seed, in the balanced order of
    :func:`balanced_order` (so any slice of it is a sample across families and tiers). Tasks
    are generated when first drawn.

    With ``open_ids`` (the default) the set also resolves any other valid id of the chosen
    families, at any difficulty and seed (``reset(options={"task_id": ...})``: what an AdaRFT
    curriculum draws); its listed ids, ``len`` and selectors are unchanged."""
    chosen = [get_family(n) for n in families_] if families_ is not None else families(category)
    if not chosen:
        raise ValueError(f"no generator families match (category={category!r})")
    tiers = tuple(tiers)
    for tier in tiers:
        if tier not in TIERS:
            raise ValueError(f"unknown tier {tier!r}; one of {', '.join(TIERS)}")
    ids = [
        task_id(chosen[f].name, seed, tier_difficulty(tiers[t], seed))
        for seed in seeds
        for f, t in balanced_order(len(chosen), len(tiers))
    ]
    names = frozenset(fam.name for fam in chosen)
    accepts = functools.partial(accepts_id, family_names=names) if open_ids else None
    return TaskSet.lazy(ids, _load_by_id, name=name, accepts=accepts)
