"""The live progress line of ``palaestra eval`` and ``tasks check``, fitted to the terminal.

Rich's columns cut a line that is wider than the terminal with "…" (at 80 columns the counts and
the pass rate went first). Here the line is laid out again each time it is drawn, for the
console's width then: the bar shrinks, then the description goes, then the bar, then the last
clauses of the numbers; the counts and the elapsed time always show, whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta

from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.progress import Progress, Task
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

MIN_BAR, MAX_BAR = 10, 40


def fitted_line(
    description: str,
    completed: float,
    total: float | None,
    clauses: list[str],
    elapsed_s: float | None,
    width: int,
) -> RenderableType:
    """``description  bar  completed/total  clause · clause · ...  h:mm:ss`` in ``width`` cells."""
    count = f"{completed:.0f}/{total:.0f}" if total is not None else f"{completed:.0f}"
    clock = "-:--:--" if elapsed_s is None else str(timedelta(seconds=int(elapsed_s)))
    stats = list(clauses)
    while True:
        tail = " ".join(p for p in (count, " · ".join(stats), clock) if p)
        for head in (description, ""):
            room = width - cell_len(tail) - 1 - (cell_len(head) + 1 if head else 0)
            if room >= MIN_BAR:
                return _row(head, min(room, MAX_BAR), completed, total, tail)
        if cell_len(tail) <= width or not stats:
            return _row("", 0, completed, total, tail)
        stats.pop()


def _row(head: str, bar: int, completed: float, total: float | None, tail: str) -> Table:
    grid = Table.grid(padding=(0, 1))
    cells: list[RenderableType] = []
    if head:
        grid.add_column(no_wrap=True)
        cells.append(Text(head, style="bold"))
    if bar:
        grid.add_column(no_wrap=True, width=bar)
        cells.append(ProgressBar(total=total, completed=completed, width=bar))
    grid.add_column(no_wrap=True)
    cells.append(Text(tail))
    grid.add_row(*cells)
    return grid


class FittedProgress(Progress):
    """A :class:`Progress` whose tasks are drawn by :func:`fitted_line`; ``clauses`` gives a
    task's numbers (from its fields), most important first."""

    def __init__(
        self, clauses: Callable[[Task], list[str]], *, console: Console, disable: bool = False
    ) -> None:
        self.clauses, self.out = clauses, console  # before Progress's Live first draws
        super().__init__(console=console, disable=disable)

    def get_renderables(self) -> Iterable[RenderableType]:
        width = self.out.width  # now: a resized terminal gets a line of its new width
        for task in self.tasks:
            if task.visible:
                elapsed = task.finished_time if task.finished else task.elapsed
                yield fitted_line(
                    task.description, task.completed, task.total, self.clauses(task), elapsed, width
                )
