"""``palaestra tasks pool ...``: a self-play task pool's counts, rejections and difficulties."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from palaestra.tasks.pool import Pool

app = typer.Typer(help="Self-play task pools (docs/self-play.md).", no_args_is_help=True)
console = Console()


@app.command("stats")
def stats_cmd(
    pool: Annotated[Path, typer.Argument(help="The pool directory.")],
) -> None:
    """Counts, acceptance rate, rejection reasons and the solve-rate histogram."""
    if not pool.is_dir():
        console.print(
            f"[red]{pool}: no such pool directory; pass the directory self-play "
            "writes (examples/self_play.py --pool DIR)[/red]"
        )
        raise typer.Exit(2)
    stats = Pool(pool).stats()
    rate = stats["acceptance"]
    console.print(
        f"{pool}: {stats['proposals']} proposals, {stats['accepted']} accepted, "
        f"{stats['rejected']} rejected" + (f" (acceptance {rate:.0%})" if rate is not None else "")
    )
    reasons = Table("rejected at", "proposals", "share", title="rejections")
    for reason, n in stats["rejections"].items():
        reasons.add_row(reason, str(n), f"{n / stats['proposals']:.0%}")
    console.print(reasons)
    histogram = Table("solve rate", "tasks", title="difficulty (measured solve rate)")
    for name in sorted(stats["difficulty"]):
        histogram.add_row(name, str(stats["difficulty"][name]))
    console.print(histogram)
