"""How the ``tasks`` subcommands and ``envs`` print: tables whose ids are never cut, JSON for
scripts, and ``tasks check``'s live line and short summary."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.progress import Task, TaskID
from rich.table import Table

from palaestra.cli_progress import FittedProgress
from palaestra.run.check import ScenarioResult

console = Console()


class IdTable(Table):
    """A table whose ``ids`` columns are never cut: ids are meant to be copied, so each stays on
    one line while the widest ids and every other column at its header's width fit, and folds
    onto further lines (whole, never cut short) when they do not. No column is squeezed below
    its header: a narrow terminal or a pipe (80 columns) keeps every column's values."""

    def __init__(self, *columns: str, ids: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for column in columns:
            if column in ids:
                self.add_column(column, no_wrap=True, overflow="fold")
            else:
                self.add_column(column, min_width=len(column), overflow="fold")
        self._ids = [i for i, column in enumerate(columns) if column in ids]

    def __rich_console__(self, console: Any, options: Any) -> Any:
        needed = 3 * len(self.columns) + 1  # a border and one space each side of every cell
        for i, column in enumerate(self.columns):
            if i in self._ids:
                widths = [Measurement.get(console, options, c).maximum for c in column.cells]
                needed += max([len(str(column.header)), *widths])
            else:
                needed += column.min_width or 0
        for i in self._ids:
            self.columns[i].no_wrap = needed <= options.max_width
        yield from super().__rich_console__(console, options)


def id_table(*columns: str, ids: tuple[str, ...] = ("id",), **kwargs: Any) -> Table:
    """An :class:`IdTable` of these columns."""
    return IdTable(*columns, ids=ids, **kwargs)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout, unwrapped (for scripts: ``--json``)."""
    print(json.dumps(data, indent=2))


def _check_clauses(task: Task) -> list[str]:
    return [f"as expected {task.fields['ok']}", f"not {task.fields['bad']}"]


class CheckProgress:
    """``tasks check``'s live line on stderr, fed each scenario's result as it comes."""

    def __init__(self, description: str, total: int, *, disable: bool) -> None:
        self.progress = FittedProgress(
            _check_clauses, console=Console(stderr=True), disable=disable
        )
        self.ok = self.bad = 0
        self.bar: TaskID = self.progress.add_task(description, total=total, ok=0, bad=0)

    def __call__(self, result: ScenarioResult) -> None:
        self.ok += result.ok
        self.bad += not result.ok
        self.progress.update(self.bar, advance=1, ok=self.ok, bad=self.bad)


def _verdict(r: ScenarioResult) -> str:
    return "ok" if r.ok else ("WRONG" if r.status == "ok" else r.status)


def _reward(r: ScenarioResult) -> str:
    return "-" if r.reward is None else f"{r.reward:g}"


def check_json(results: list[ScenarioResult]) -> dict[str, Any]:
    return {
        "tasks": len({r.task_id for r in results}),
        "scenarios": len(results),
        "as_expected": sum(r.ok for r in results),
        "results": [{**dataclasses.asdict(r), "ok": r.ok, "verdict": _verdict(r)} for r in results],
    }


def print_check(results: list[ScenarioResult], elapsed_s: float, *, verbose: bool) -> None:
    """The failures' output, then one line a failure (whole ids), then the count; with
    ``verbose`` the table of every scenario first."""
    if verbose:
        table = id_table(
            "task", "scenario", "expected", "reward", "verdict", "time", ids=("task", "scenario")
        )
        for r in results:
            color = "green" if r.ok else "red"
            table.add_row(
                r.task_id,
                r.scenario,
                r.expectation,
                _reward(r),
                f"[{color}]{_verdict(r)}[/{color}]",
                f"{r.duration_s:.2f}s",
            )
        console.print(table)
    bad = [r for r in results if not r.ok]
    for r in bad:
        console.rule(escape(f"{r.task_id} {r.scenario}"))
        console.print(r.detail[-2000:], markup=False, highlight=False)
    out = Console(soft_wrap=True, highlight=False)  # a long id stays on one line, copyable
    if bad:
        out.print(f"[red]{len(bad)} scenario(s) not as expected[/red]:")
        for r in bad:
            out.print(
                escape(
                    f"  {r.task_id} {r.scenario}: expected {r.expectation}, reward {_reward(r)} "
                    f"({_verdict(r)})"
                )
            )
    tasks = len({r.task_id for r in results})
    out.print(
        f"{len(results) - len(bad)}/{len(results)} scenarios as expected ({tasks} "
        f"task{'s' if tasks != 1 else ''}, "
        f"{elapsed_s:.0f} s)" + ("" if verbose else "; --verbose lists every scenario")
    )
