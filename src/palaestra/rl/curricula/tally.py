"""Per-task solve counts: what the pool, band and bucket curricula learn from outcomes."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from palaestra.rl.sampler import GroupOutcome, TaskDraw
from palaestra.tasks import generators


class CurriculumExhausted(RuntimeError):
    """A curriculum has no task left to draw (every task was evicted)."""


@dataclass
class Tally:
    """How often one task was attempted and solved (episodes, not groups)."""

    attempts: int = 0
    solved: int = 0

    @property
    def rate(self) -> float | None:
        return self.solved / self.attempts if self.attempts else None

    def add(self, outcome: GroupOutcome) -> None:
        self.attempts += len(outcome.passed)
        self.solved += sum(outcome.passed)


def difficulty_of(task_id: str) -> float | None:
    """The generators' difficulty float of a generated task id, else None."""
    try:
        return generators.parse_task_id(task_id)[2]
    except ValueError:
        return None


def unique_ids(task_ids: Iterable[str], who: str) -> list[str]:
    """``task_ids`` as a list, refusing an empty or duplicated one with a clear line."""
    ids = list(task_ids)
    if not ids:
        raise ValueError(f"{who} needs at least one task id; got none")
    if len(set(ids)) != len(ids):
        dupes = sorted({t for t in ids if ids.count(t) > 1})
        raise ValueError(f"{who}: duplicate task ids {', '.join(dupes[:5])}; pass each once")
    return ids


def difficulties_of(
    task_ids: Iterable[str], given: Mapping[str, float] | None = None
) -> dict[str, float | None]:
    """Each id's difficulty: from ``given`` where it has one, else parsed from a generated id."""
    given = given or {}
    return {t: given[t] if t in given else difficulty_of(t) for t in task_ids}


def draw_of(task_id: str, rng: random.Random, difficulty: float | None) -> TaskDraw:
    """A draw of a listed task, with a reset seed from ``rng`` (so runs replay exactly)."""
    return TaskDraw(task_id=task_id, seed=rng.randrange(2**31), difficulty=difficulty)


def unknown(who: str, outcome: GroupOutcome) -> ValueError:
    return ValueError(
        f"{who} got an outcome for task {outcome.draw.task_id!r}, which it never draws; feed "
        "each sampler only the outcomes of its own draws"
    )


class IdBag:
    """A set of ids with O(1) add, remove and uniform choice, in a deterministic order."""

    def __init__(self, ids: Iterable[str] = ()) -> None:
        self._items: list[str] = []
        self._at: dict[str, int] = {}
        for task_id in ids:
            self.add(task_id)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._at

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def add(self, task_id: str) -> None:
        if task_id not in self._at:
            self._at[task_id] = len(self._items)
            self._items.append(task_id)

    def remove(self, task_id: str) -> None:
        i = self._at.pop(task_id)
        last = self._items.pop()
        if i < len(self._items):
            self._items[i] = last
            self._at[last] = i

    def choice(self, rng: random.Random) -> str:
        return self._items[rng.randrange(len(self._items))]
