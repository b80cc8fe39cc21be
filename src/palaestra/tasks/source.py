"""Task sets: an ordered, indexable collection of tasks with the registry's selectors.

Selectors (the part of an env id after the preset name) pick a subset::

    :i       the task at index i          starter:3
    :a:b     the slice a..b (python)      starter:0:6
    @k/n     shard k of n (every n-th)    starter@1/4

A lazy set may also be *open*: besides its listed ids it resolves any id its ``accepts``
predicate admits (a generated pack takes every valid ``<family>-dNNN-sSEED`` id of its
families), so a curriculum can draw tasks at any difficulty and seed. Selectors, ``len`` and
iteration see only the listed ids; :meth:`TaskSet.get` and :meth:`TaskSet.check` see both.
"""

from __future__ import annotations

import difflib
import re
import threading
import warnings
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal, overload

from palaestra.tasks.errors import TaskError
from palaestra.tasks.loader import load_tasks, scan_tasks
from palaestra.tasks.task import Task

_INDEX = re.compile(r"^:(-?\d+)$")
_SLICE = re.compile(r"^:(-?\d*):(-?\d*)$")
_SHARD = re.compile(r"^@(\d+)/(\d+)$")


#: How many tasks outside the listed ids an open set keeps loaded (least recently used go first):
#: a curriculum drawing a fresh task per group must not grow memory without bound.
EXTRA_CACHE_SIZE = 256


class SelectorError(ValueError):
    pass


class SkippedTasksWarning(UserWarning):
    """:meth:`TaskSet.from_dir` left out task directories that do not load (see
    :attr:`TaskSet.invalid`)."""


class _ExtraCache:
    """A small thread-safe LRU of tasks loaded for ids outside the list (``get`` runs in worker
    threads when the set is lazy)."""

    def __init__(self, size: int = EXTRA_CACHE_SIZE) -> None:
        self._size = size
        self._tasks: OrderedDict[str, Task] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, task_id: str) -> Task | None:
        with self._lock:
            task = self._tasks.get(task_id)
            if task is not None:
                self._tasks.move_to_end(task_id)
            return task

    def put(self, task: Task) -> None:
        with self._lock:
            self._tasks[task.id] = task
            self._tasks.move_to_end(task.id)
            while len(self._tasks) > self._size:
                self._tasks.popitem(last=False)


class TaskSet(Sequence[Task]):
    """An immutable, ordered set of tasks with unique ids.

    A set is either *eager* (built from loaded tasks) or *lazy* (:meth:`lazy`: ids plus a loader
    called the first time a task is used, so a generated pack of 10,000 tasks costs nothing until
    its tasks are drawn). Slices, shards and selections of a lazy set stay lazy and share its cache.
    """

    #: ``(directory, error)`` of each task directory :meth:`from_dir` left out because it does
    #: not load; subsets keep it (an eval run reports what its source skipped).
    invalid: tuple[tuple[Path, TaskError], ...] = ()

    def __init__(self, tasks: Iterable[Task], name: str = "tasks") -> None:
        tasks = tuple(tasks)
        self._init([t.id for t in tasks], {t.id: t for t in tasks}, None, name, None)

    def _init(
        self,
        ids: Sequence[str],
        cache: dict[str, Task],
        loader: Callable[[str], Task] | None,
        name: str,
        open_: tuple[Callable[[str], bool], _ExtraCache] | None,
    ) -> None:
        self._ids = tuple(ids)
        self._cache = cache
        self._loader = loader
        self._open = open_
        self.name = name
        self._index = {task_id: i for i, task_id in enumerate(self._ids)}
        if len(self._index) != len(self._ids):
            counts = Counter(self._ids)
            dupes = sorted(task_id for task_id, n in counts.items() if n > 1)
            raise ValueError(f"task set {name!r} has duplicate task ids: {', '.join(dupes)}")

    @classmethod
    def lazy(
        cls,
        ids: Iterable[str],
        loader: Callable[[str], Task],
        name: str,
        *,
        accepts: Callable[[str], bool] | None = None,
    ) -> TaskSet:
        """A set whose task ``i`` is ``loader(ids[i])``, called once, on first use.

        ``accepts`` makes the set open: :meth:`get` also loads any id outside ``ids`` for which
        ``accepts(id)`` is true (it must be cheap and must not load anything). Such tasks are
        kept in a bounded cache of :data:`EXTRA_CACHE_SIZE`, shared with the set's subsets.
        """
        open_ = (accepts, _ExtraCache()) if accepts is not None else None
        return cls._derived(tuple(ids), {}, loader, name, open_)

    @classmethod
    def _derived(
        cls,
        ids: Sequence[str],
        cache: dict[str, Task],
        loader: Callable[[str], Task] | None,
        name: str,
        open_: tuple[Callable[[str], bool], _ExtraCache] | None,
    ) -> TaskSet:
        new = cls.__new__(cls)
        new._init(ids, cache, loader, name, open_)
        return new

    def _subset(self, ids: Sequence[str], name: str) -> TaskSet:
        subset = TaskSet._derived(ids, self._cache, self._loader, name, self._open)
        subset.invalid = self.invalid
        return subset

    @classmethod
    def from_dir(
        cls,
        path: Path | str,
        name: str | None = None,
        *,
        errors: Literal["skip", "raise"] = "skip",
    ) -> TaskSet:
        """Every Harbor task under ``path`` (one task directory, or a directory of them).

        A task directory that does not load is left out with a :class:`SkippedTasksWarning`
        and listed in :attr:`invalid` (``errors="skip"``, the default: one broken task of a
        downloaded dataset does not stop the others), or raises one :class:`TaskError` naming
        every such task (``errors="raise"``). A set left with no task raises either way."""
        path = Path(path)
        name = name or path.name
        if errors == "raise":
            return cls(load_tasks(path), name=name)
        return cls.skipping(*scan_tasks(path), name=name, root=path)

    @classmethod
    def skipping(
        cls,
        tasks: Sequence[Task],
        failed: Sequence[tuple[Path, TaskError]],
        *,
        name: str,
        root: Path,
    ) -> TaskSet:
        """The set of ``tasks`` that loaded, with ``failed`` (``(directory, error)`` of the task
        directories under ``root`` that did not) as :attr:`invalid` and one
        :class:`SkippedTasksWarning`; a :class:`TaskError` when none loaded."""
        if failed and not tasks:
            raise TaskError(
                root,
                f"none of its {len(failed)} tasks loads",
                fix="correct them",
                errors=[error for _, error in failed],
            )
        made = cls(tasks, name=name)
        made.invalid = tuple(failed)
        if failed:
            names = ", ".join(directory.name for directory, _ in failed)
            warnings.warn(
                f"{name}: skipped {len(failed)} of {len(tasks) + len(failed)} tasks that do not "
                f"load ({names})",
                SkippedTasksWarning,
                stacklevel=3,
            )
        return made

    def _load(self, task_id: str) -> Task:
        assert self._loader is not None, "an eager task set holds every task"
        task = self._loader(task_id)
        if task.id != task_id:
            raise ValueError(f"the loader of {self.name!r} gave task {task.id!r} for {task_id!r}")
        return task

    def _task(self, task_id: str) -> Task:
        task = self._cache.get(task_id)
        if task is None:
            task = self._cache[task_id] = self._load(task_id)
        return task

    def _extra_task(self, task_id: str) -> Task:
        assert self._open is not None
        extra = self._open[1]
        task = extra.get(task_id)
        if task is None:
            task = self._load(task_id)
            extra.put(task)
        return task

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> Task: ...
    @overload
    def __getitem__(self, index: slice) -> TaskSet: ...
    def __getitem__(self, index: int | slice) -> Task | TaskSet:
        if isinstance(index, slice):
            return self._subset(self._ids[index], self.name)
        return self._task(self._ids[index])

    def __iter__(self) -> Iterator[Task]:
        return (self._task(task_id) for task_id in self._ids)

    def __contains__(self, item: object) -> bool:
        return (item if isinstance(item, str) else getattr(item, "id", None)) in self._index

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    def id_at(self, index: int) -> str:
        """The id of task ``index`` (without loading it)."""
        return self._ids[index]

    @property
    def is_lazy(self) -> bool:
        return self._loader is not None

    @property
    def is_open(self) -> bool:
        """Whether :meth:`get` also resolves ids outside the list (see :meth:`lazy`)."""
        return self._open is not None

    def accepts(self, task_id: str) -> bool:
        """Whether :meth:`get` can give ``task_id`` (without loading anything)."""
        return task_id in self._index or (self._open is not None and self._open[0](task_id))

    def check(self, task_id: str) -> str:
        """``task_id`` if :meth:`get` can give it, else a KeyError naming close ids. Loads
        nothing, so it is safe on the event loop."""
        if not self.accepts(task_id):
            close = difflib.get_close_matches(task_id, self._ids, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            if self._open is not None:
                hint += " (it also takes any valid id its source can generate)"
            raise KeyError(f"no task {task_id!r} in {self.name!r}{hint}") from None
        return task_id

    def get(self, task_id: str) -> Task:
        """The task ``task_id``: a listed one, or one an open set accepts (loaded on demand:
        call it off the event loop when the set is lazy)."""
        if task_id in self._index:
            return self._task(task_id)
        return self._extra_task(self.check(task_id))

    def shard(self, k: int, n: int) -> TaskSet:
        if n < 1 or not 0 <= k < n:
            raise SelectorError(f"shard @{k}/{n} is invalid: need n >= 1 and 0 <= k < n")
        return self._subset(self._ids[k::n], f"{self.name}@{k}/{n}")

    def select(self, selector: str) -> TaskSet:
        """Apply a selector (``:i``, ``:a:b`` or ``@k/n``); ``""`` selects everything."""
        if not selector:
            return self
        if m := _INDEX.match(selector):
            i = int(m.group(1))
            if not -len(self) <= i < len(self):
                raise SelectorError(
                    f"index {i} is out of range: {self.name!r} has {len(self)} tasks "
                    f"(0..{len(self) - 1})"
                )
            return self._subset([self._ids[i]], f"{self.name}{selector}")
        if m := _SLICE.match(selector):
            a, b = (int(g) if g else None for g in m.groups())
            subset = self._subset(self._ids[a:b], f"{self.name}{selector}")
            if not subset:
                raise SelectorError(
                    f"slice {selector} of {self.name!r} ({len(self)} tasks) is empty"
                )
            return subset
        if m := _SHARD.match(selector):
            return self.shard(int(m.group(1)), int(m.group(2)))
        raise SelectorError(
            f"cannot read selector {selector!r}; use ':i' (one task), ':a:b' (a slice) "
            "or '@k/n' (shard k of n)"
        )
