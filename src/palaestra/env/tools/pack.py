"""The generated pack of tool-use and game tasks: families, tiers, seeds and ids.

A task id is ``<family>-<tier>-<seed>`` (``crm-hard-7``, ``twenty-questions-easy-0``): the
family's generator, seeded by the id, builds the same scenario every time. The registry's
presets (``tools``, ``tools/<family>``, ``games``, ``games/<family>``) list
:data:`SEEDS` seeds of every tier of their families and are open: they also take any other
seed's id (``options={"task_id": "crm-easy-5000"}``).
"""

from __future__ import annotations

import random
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from palaestra.env.games import mastermind, twenty_questions
from palaestra.env.tools import calendar, crm, files
from palaestra.env.tools.tool import TIERS, Scenario, ToolTask
from palaestra.tasks.source import TaskSet

#: Seeds per (family, tier) in the presets.
SEEDS = 50


@dataclass(frozen=True)
class ScenarioFamily:
    """A generator of tool-use or game scenarios (not a task generator's
    :class:`palaestra.tasks.generators.Family`): ``category`` is ``tools`` or ``games``;
    ``distractors`` the number of distractor tools each tier declares by default."""

    name: str
    category: str
    build: Callable[[random.Random, str], Scenario]
    distractors: tuple[int, int, int] = (0, 0, 0)


FAMILIES = {
    f.name: f
    for f in (
        ScenarioFamily("crm", "tools", crm.build, (0, 3, 8)),
        ScenarioFamily("files", "tools", files.build, (0, 3, 8)),
        ScenarioFamily("calendar", "tools", calendar.build, (0, 3, 8)),
        ScenarioFamily("twenty-questions", "games", twenty_questions.build),
        ScenarioFamily("mastermind", "games", mastermind.build),
    )
}
CATEGORIES = ("tools", "games")
_ID = re.compile(r"^(?P<family>[a-z-]+)-(?P<tier>easy|medium|hard)-(?P<seed>\d+)$")


def families(category: str) -> list[str]:
    return [name for name, f in FAMILIES.items() if f.category == category]


def task(task_id: str) -> ToolTask:
    """The task ``task_id`` names; a KeyError saying the id's form when it names none."""
    m = _ID.match(task_id)
    if m is None or m["family"] not in FAMILIES:
        raise KeyError(
            f"no tool task {task_id!r}: an id is <family>-<easy|medium|hard>-<seed> with a "
            f"family among {', '.join(FAMILIES)}"
        )
    f = FAMILIES[m["family"]]
    tier = m["tier"]
    return ToolTask(
        f.name, f.category, tier, int(m["seed"]), f.build, f.distractors[TIERS.index(tier)]
    )


def _accepts(names: Sequence[str]) -> Callable[[str], bool]:
    def accepts(task_id: str) -> bool:
        m = _ID.match(task_id)
        return m is not None and m["family"] in names

    return accepts


def tasks(names: Sequence[str], *, seeds: range = range(SEEDS), name: str) -> TaskSet:
    """The lazy, open task set of these families: every tier of each, ``seeds`` seeds a tier."""
    ids = [f"{f}-{tier}-{seed}" for f in names for tier in TIERS for seed in seeds]
    return TaskSet.lazy(ids, task, name, accepts=_accepts(names))  # type: ignore[arg-type]


def __getattr__(name: str) -> object:
    """``Family``: the deprecated name of :class:`ScenarioFamily`."""
    if name == "Family":
        warnings.warn(
            "palaestra.env.tools.pack.Family is deprecated: use ScenarioFamily",
            DeprecationWarning,
            stacklevel=2,
        )
        return ScenarioFamily
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
