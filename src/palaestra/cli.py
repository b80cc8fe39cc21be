"""The ``palaestra`` command line: ``eval``, ``export``, ``report``, ``envs``, ``tasks``, ``proxy``,
``serve``.

Options mean one thing in every command: ``-j``/``--concurrency`` is how many run at once,
``-n``/``--limit`` how many tasks at most (``eval``'s old ``-n`` for concurrency still works,
with a deprecation line). Mistakes are one line and exit code 2 (:mod:`palaestra.cli_errors`).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from palaestra.cli_checks import (
    check_policy_ready,
)
from palaestra.cli_errors import OneLineErrors, Terminated, fail, run_async
from palaestra.cli_eval import eval_cmd
from palaestra.cli_harness import app as harness_app
from palaestra.cli_output import id_table, print_json
from palaestra.cli_serve import serve_cmd
from palaestra.cli_summary import (
    console,
)
from palaestra.cli_tasks import app as tasks_app
from palaestra.env.registry import check_policy, list_envs, make_policy
from palaestra.llm.anthropic_policy import AnthropicPolicy
from palaestra.run.export import default_target
from palaestra.run.export import export as store_export
from palaestra.run.report import write_report
from palaestra.run.store import palaestra_version
from palaestra.scaffolds.proxy import ProxyServer

app = typer.Typer(
    cls=OneLineErrors,
    help="palaestra: RL environments for LLM coding agents.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"palaestra {palaestra_version()}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """palaestra: RL environments for LLM coding agents."""


app.command("eval")(eval_cmd)


@app.command("export")
def export_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory of `palaestra eval`.")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="jsonl, parquet or atif (one file an episode).")
    ] = "jsonl",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="File (default RUN_DIR/episodes.FMT); atif: a directory (default RUN_DIR/atif/).",
        ),
    ] = None,
) -> None:
    """Export a run's episodes with their trajectories for training pipelines."""
    target = output or default_target(run_dir, fmt)
    try:
        n = store_export(run_dir, target, fmt)
    except (FileNotFoundError, ValueError, ImportError) as e:
        fail(str(e))
    console.print(f"wrote {n} episodes to {escape(str(target))}")


@app.command("report")
def report_cmd(
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run directories.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file.")] = Path(
        "report.html"
    ),
    max_trajectories: Annotated[
        int,
        typer.Option(help="Trajectories embedded per run for the viewer (first ones; -1: all)."),
    ] = 2000,
) -> None:
    """Write one self-contained HTML report of one run, or a comparison of several."""
    try:
        write_report(run_dirs, output, max_trajectories=max_trajectories)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))
    console.print(f"wrote {escape(str(output))}")


@app.command("envs")
def envs_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print them as JSON.")] = False,
) -> None:
    """List the registered environment presets, and the extra each missing one needs."""
    rows: list[dict[str, Any]] = []
    for spec in list_envs():
        extra = spec.missing_extra()  # listed, not loaded: its package is missing
        count = len(spec.tasks()) if extra is None else None
        rows.append({"id": spec.id, "tasks": count, "description": spec.description})
        if extra is not None:
            rows[-1]["needs"] = extra
    if as_json:
        return print_json(rows)
    table = id_table("id", "tasks", "description")
    for row in rows:
        description = row["description"]
        if "needs" in row:
            description = f"needs pip install 'palaestra[{row['needs']}]' · {description}"
        count = "-" if row["tasks"] is None else str(row["tasks"])
        table.add_row(escape(row["id"]), count, escape(description))
    console.print(table)


app.add_typer(tasks_app, name="tasks")
app.add_typer(harness_app, name="harness")
app.command("serve")(serve_cmd)


@app.command("proxy")
def proxy_cmd(
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            "-p",
            help="What answers every call: nop, openai:<model> (OPENAI_BASE_URL / "
            "OPENAI_API_KEY), anthropic:<model> (ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY).",
        ),
    ] = "nop",
    port: Annotated[
        int, typer.Option("--port", help="TCP port on 127.0.0.1 (0: any free).")
    ] = 8000,
    token: Annotated[str, typer.Option("--token", help="The debug episode's token.")] = "debug",
) -> None:
    """Run the OpenAI/Anthropic-compatible proxy standalone, to check that a harness talks to it.

    One debug episode is served, with no environment and no sandbox: each call goes straight to
    --policy and is printed. Point the harness at the printed base URL (or use the token as its
    API key on /v1). Inside an environment, the external scaffold runs its own proxy instead.
    """
    if policy.startswith("anthropic:"):
        client: Any = AnthropicPolicy(policy.removeprefix("anthropic:"))
    else:
        try:
            check_policy(policy)
        except ValueError as e:
            fail(f"--policy: {e} (or anthropic:<model>)")
        check_policy_ready(policy)
        client = make_policy(policy)

    class _Logged:
        async def complete(self, request: Any) -> Any:
            response = await client.complete(request)
            turn = request.metadata.get("turn")
            console.print(
                f"[bold]call {turn}[/bold] ({len(request.messages)} messages) "
                f"<- {request.last_user_text[-200:]!r}"
            )
            console.print(
                f"  -> {(response.content or '')[:200]!r} "
                f"{[tc.name for tc in response.tool_calls]} {response.finish_reason}"
            )
            return response

    async def serve() -> None:
        async with ProxyServer(port=port) as proxy:
            ep = proxy.register(_Logged(), episode_id="debug", token=token)
            console.print(f"palaestra proxy on {proxy.base_url}, answering with {policy}")
            console.print(f"  OPENAI_BASE_URL={proxy.url_for(ep)}")
            console.print(f"  ANTHROPIC_BASE_URL={proxy.base_url}/e/{ep.token}")
            console.print(f"  or base URL {proxy.base_url}/v1 with API key {ep.token}")
            console.print("Ctrl-C stops it.")
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt, Terminated):
        run_async(serve())


if __name__ == "__main__":
    app()
