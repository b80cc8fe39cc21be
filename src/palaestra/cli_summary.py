"""What ``palaestra eval`` prints at the end: a short summary (the tables with ``--verbose``),
and the episodes that errored."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Task
from rich.table import Table

console = Console()


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def usd(x: float | None) -> str:
    return "unknown" if x is None else f"${x:.4f}"


def eval_clauses(task: Task) -> list[str]:
    """The live line's numbers of ``palaestra eval`` (from the bar's fields), first ones kept
    longest on a narrow terminal."""
    f = task.fields
    return [f"pass {f['rate']}", f"errors {f['errors']}", f["cost"], f"{f['speed']} ep/s"]


def _rates_table(title: str, groups: dict[str, dict[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("", no_wrap=True, overflow="fold")  # names are copied: never cut
    for col in ("episodes", "passed", "pass rate", "mean reward", "errors"):
        table.add_column(col, justify="right")
    for name, g in groups.items():
        table.add_row(
            name,
            str(g["episodes"]),
            str(g["passed"]),
            pct(g["pass_rate"]),
            f"{g['mean_reward']:.3f}",
            str(g["errors"]),
        )
    return table


def print_brief(summary: dict[str, Any], run_dir: str) -> None:
    """What ``palaestra eval`` prints by default: the pass rate with its count, errors, cost,
    time, where the results are and how to see more, in a few lines whatever the task count."""
    cost = summary["cost"]
    money = "cost " + usd(cost["total_usd"])
    if cost["total_usd"] is not None and cost["unknown_trials"]:
        money += f" (+{cost['unknown_trials']} unknown)"
    parts = [f"passed {summary['passed']}/{summary['episodes']} ({pct(summary['pass_rate'])})"]
    k, at_k = max(summary["pass_at_k"].items(), key=lambda kv: int(kv[0]), default=(1, 0.0))
    if int(k) > 1:
        parts.append(f"pass@{k} {pct(at_k)}")
    parts += [f"errors {summary['errors']}", money, f"{summary['run_wall_s']:.1f} s"]
    if summary["skipped"]:
        parts.append(f"{summary['skipped']} already done")
    if summary.get("lost"):
        parts.append(f"{summary['lost']} lost with a dead Ray actor and rerun")
    out = Console(soft_wrap=True, highlight=False)  # lines long paths make are not broken
    out.print(
        f"[bold]{escape(summary['env_id'])} / {escape(summary['policy'])}[/bold]: "
        + escape(" · ".join(parts))
    )
    _notes(out, summary)
    out.print(escape(f"results: {run_dir}/results.db, {run_dir}/summary.json"))
    out.print(
        escape(
            f"more: --verbose prints the tables (by category, difficulty, family; "
            f"pass@k, cost, times); `palaestra report {run_dir}` draws them, with "
            "every trajectory"
        )
    )


def _notes(out: Console, summary: dict[str, Any]) -> None:
    if summary["invalid_tasks"]:
        out.print(
            f"[yellow]skipped {len(summary['invalid_tasks'])} invalid task(s)[/yellow]: "
            + escape(", ".join(t["task"] for t in summary["invalid_tasks"]))
        )
    if summary["stop_reason"]:
        out.print(f"[yellow]stopped early: {escape(summary['stop_reason'])}")


def print_summary(summary: dict[str, Any]) -> None:
    """The tables of ``palaestra eval --verbose``: rates, pass@k, errors, cost, tokens, phase
    times."""
    overall = {k: summary[k] for k in ("episodes", "passed", "pass_rate", "mean_reward", "errors")}
    console.print(_rates_table(f"{summary['env_id']} / {summary['policy']}", {"all": overall}))
    for title, key in (
        ("By category", "by_category"),
        ("By difficulty", "by_difficulty"),
        ("By family", "by_family"),
    ):
        if set(summary[key]) - {"—"}:  # one "—" row (no task has one) repeats "all"
            console.print(_rates_table(title, summary[key]))
    passk = Table("k", "pass@k", title="pass@k (unbiased)", title_justify="left")
    for k, v in summary["pass_at_k"].items():
        passk.add_row(str(k), pct(v))
    console.print(passk)
    if summary["errors_by_class"]:
        errors = Table("error class", "episodes", "rate", title="Errors", title_justify="left")
        for name, e in summary["errors_by_class"].items():
            errors.add_row(name, str(e["count"]), pct(e["rate"]))
        console.print(errors)
    cost, tokens = summary["cost"], summary["tokens"]
    money = Table("", "value", title="Cost and tokens", title_justify="left")
    money.add_row("total", usd(cost["total_usd"]))
    money.add_row("per trial", usd(cost["per_trial_usd"]))
    money.add_row("per solved task", usd(cost["per_solved_usd"]))
    money.add_row("trials with unknown cost", str(cost["unknown_trials"]))
    for key, value in tokens.get("per_trial", {}).items():
        money.add_row(f"{key.replace('_', ' ')} per trial", f"{value:.1f}")
    console.print(money)
    phases = Table(
        "phase", "mean s", "p50 s", "p90 s", title="Wall time per phase", title_justify="left"
    )
    for phase, t in summary["timings"].items():
        if t is not None:
            phases.add_row(
                phase.removesuffix("_s"), *(f"{t[q]:.3f}" for q in ("mean", "p50", "p90"))
            )
    console.print(phases)
    console.print(
        f"mean steps {summary['mean_steps']:.1f} · planned {summary['planned']} · skipped "
        f"(already done) {summary['skipped']} · retried {summary['retried']} · "
        f"{summary['episodes_per_s']:.2f} episodes/s"
        + (
            f" · {summary['lost']} lost with a dead Ray actor (run again)"
            if summary.get("executor") == "ray"
            else ""
        )
    )
    _notes(Console(soft_wrap=True, highlight=False), summary)


def report_errors(summary: dict[str, Any]) -> None:
    """Say on stderr that episodes errored, quoting the first errors; exit 1 when all did."""
    if not summary["errors"]:
        return
    err = Console(stderr=True, soft_wrap=True)
    every = summary["errors"] == summary["episodes"]
    color = "red" if every else "yellow"
    err.print(
        f"[{color}]{summary['errors']} of {summary['episodes']} episodes ended in an "
        f"error[/{color}]; the first:",
        highlight=False,
    )
    for e in summary["first_errors"]:
        message = (e["error_message"] or "").strip().splitlines()
        first = message[0][:300] if message else ""
        kind = "transient" if e["infra_error"] else "deterministic: not retried"
        err.print(
            f"  {e['task_id']}: {e['error_class']}: {first} ({kind})", markup=False, highlight=False
        )
    if every:
        err.print("[red]error:[/red] every episode errored; no result to report")
        raise typer.Exit(1)
