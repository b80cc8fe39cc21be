"""Training and evaluation tasks held out by construction.

A generated task is a function of its family, seed and difficulty. Seeds from
:data:`HELD_OUT_FIRST_SEED` on are the **evaluation** split, seeds below it the **training**
split, and the families that take part (``shell-warmup``, ``shell-lookup``) draw every word, file
name, directory and path of a task from a vocabulary of its split: the two splits' vocabularies
are disjoint, so no evaluation instruction can occur among training ones, and an evaluation task
is never a renamed copy of a training task's answer. Some kinds of task exist only in the
evaluation split (:func:`kinds`): a trained policy meets them for the first time when it is
evaluated.

:func:`overlapping_instructions` is the check a benchmark runs before it trusts a held-out
figure: the instructions two task sets have in common (none, by construction, for the families
here; a family without splits would show up).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, TypeVar

from palaestra.tasks.task import Task

#: The first seed of the evaluation split.
HELD_OUT_FIRST_SEED = 100_000

Split = Literal["train", "eval"]
T = TypeVar("T")


def split_of(seed: int) -> Split:
    """``"eval"`` for seeds from :data:`HELD_OUT_FIRST_SEED` on, else ``"train"``."""
    return "eval" if seed >= HELD_OUT_FIRST_SEED else "train"


def vocabulary(seed: int, train: Sequence[T], held_out: Sequence[T]) -> Sequence[T]:
    """The vocabulary of ``seed``'s split (the two must not overlap)."""
    if set(train) & set(held_out):
        raise ValueError(
            f"split vocabularies overlap: {sorted(map(str, set(train) & set(held_out)))}"
        )
    return held_out if split_of(seed) == "eval" else train


def kinds(seed: int, shared: Sequence[T], held_out_only: Sequence[T] = ()) -> list[T]:
    """The kinds of task ``seed`` may draw: ``shared`` in both splits, plus ``held_out_only``
    in the evaluation split."""
    return [*shared, *held_out_only] if split_of(seed) == "eval" else list(shared)


def overlapping_instructions(train: Iterable[Task], evaluation: Iterable[Task]) -> list[str]:
    """The instructions of ``evaluation`` that also occur in ``train`` (sorted, once each)."""
    seen = {task.instruction.strip() for task in train}
    return sorted({task.instruction.strip() for task in evaluation} & seen)
