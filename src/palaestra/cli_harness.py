"""``palaestra harness ...``: install the real coding-agent CLIs that ``--scaffold`` runs, and
list them with where each is installed."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from palaestra.cli_errors import fail
from palaestra.scaffolds.harness import HARNESSES, HarnessNotReady, harness_dir, install

app = typer.Typer(
    help="Real coding-agent CLIs as scaffolds (docs/scaffolds.md).", no_args_is_help=True
)
console = Console()


def _known(name: str) -> None:
    if name not in HARNESSES:
        fail(f"unknown harness {name!r}; choose one of: {', '.join(sorted(HARNESSES))}")


@app.command("install")
def install_cmd(
    names: Annotated[
        list[str] | None,
        typer.Argument(help=f"Harnesses to install (default: all): {', '.join(HARNESSES)}."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Install again over an install.")] = False,
) -> None:
    """Install harnesses from npm at their pinned versions (needs Node.js and npm); an
    install is kept and reused by every sandbox."""
    for name in names or list(HARNESSES):
        _known(name)
    for name in names or list(HARNESSES):
        harness = HARNESSES[name]
        try:
            path = install(harness, force=force)
        except HarnessNotReady as e:
            fail(str(e))
        console.print(f"{name}: {harness.package}@{harness.version} in {escape(str(path))}")


@app.command("list")
def list_cmd() -> None:
    """The harnesses, the API each speaks, their pinned versions and installs."""
    for name, harness in HARNESSES.items():
        path = harness_dir(harness)
        where = str(path) if path.exists() else f"not installed: palaestra harness install {name}"
        print(f"{name}\t{harness.package}@{harness.version}\t{harness.wire}\t{where}")
