"""The ``palaestra`` command line: ``eval``, ``export``, ``report``, ``envs``, ``tasks``, ``proxy``,
``serve``.

Options mean one thing in every command: ``-j``/``--concurrency`` is how many run at once,
``-n``/``--limit`` how many tasks at most (``eval``'s old ``-n`` for concurrency still works,
with a deprecation line). Mistakes are one line and exit code 2 (:mod:`palaestra.cli_errors`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.markup import escape

from palaestra.cli_checks import (
    check_policy_ready,
    check_run_dir,
    check_scaffold_tools,
    default_run_dir,
)
from palaestra.cli_errors import SIGTERM_EXIT, OneLineErrors, Terminated, fail, run_async
from palaestra.cli_harness import app as harness_app
from palaestra.cli_live import Live, open_streams
from palaestra.cli_output import id_table, print_json
from palaestra.cli_progress import FittedProgress
from palaestra.cli_serve import serve_cmd
from palaestra.cli_summary import (
    console,
    eval_clauses,
    print_brief,
    print_summary,
    report_errors,
)
from palaestra.cli_tasks import app as tasks_app
from palaestra.cli_tasks import select_tasks
from palaestra.env.registry import POLICIES, check_policy, list_envs, make_policy
from palaestra.env.registry import spec as env_spec
from palaestra.llm.anthropic_policy import AnthropicPolicy
from palaestra.llm.types import SamplingParams
from palaestra.run.evaluate import evaluate, run_identity
from palaestra.run.export import default_target
from palaestra.run.export import export as store_export
from palaestra.run.ray_executor import RayClusterError, RayOptions
from palaestra.run.report import write_report
from palaestra.run.store import DB_NAME, RunMismatchError, palaestra_version, read_episodes
from palaestra.sandbox import BACKENDS
from palaestra.scaffolds import SCAFFOLDS, make_scaffold
from palaestra.scaffolds.harness import HARNESSES
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


def _ray_options(address: str, resources: str, actors: int | None) -> RayOptions:
    """``--ray`` and its options as :class:`RayOptions`; bad JSON is one clear line."""
    try:
        wanted = json.loads(resources)
        if not isinstance(wanted, dict) or not all(
            isinstance(v, int | float) for v in wanted.values()
        ):
            raise ValueError("not an object of numbers")
    except ValueError as e:
        raise typer.BadParameter(
            f'{resources!r} is not a JSON object of numbers ({e}); e.g. \'{{"CPU": 1, '
            '"docker": 1}\'',
            param_hint="--ray-resources",
        ) from None
    if importlib.util.find_spec("ray") is None:
        fail("--ray: Ray is not installed: pip install 'palaestra[ray]'")
    memory = wanted.pop("memory", None)
    return RayOptions(
        address=None if address == "local" else address,
        actors=actors,
        num_cpus=float(wanted.pop("CPU", 1)),
        memory=None if memory is None else int(memory),
        resources=wanted,
    )


@app.command("eval")
def eval_cmd(
    env_id: Annotated[
        str,
        typer.Argument(
            help="Preset with optional selector (starter, starter:0:6, starter@0/4) "
            "or a directory of Harbor tasks."
        ),
    ] = "starter",
    policy: Annotated[
        str, typer.Option("--policy", "-p", help=f"One of: {', '.join(POLICIES)}.")
    ] = "oracle",
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-j", min=1, help="Episodes run at once.")
    ] = 8,
    old_concurrency: Annotated[
        int | None,
        typer.Option("-n", min=1, hidden=True, help="Deprecated spelling of -j/--concurrency."),
    ] = None,
    attempts: Annotated[
        int, typer.Option("--attempts", "-k", min=1, help="Attempts per task.")
    ] = 1,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Run directory (default runs/<env>-<policy>-<time>). Running again on the "
            "same directory resumes: finished episodes are skipped.",
        ),
    ] = None,
    scaffold: Annotated[
        str,
        typer.Option(
            help="Scaffold name: bash, bash-compact (short prompts, for small models), tools "
            "(function calling), terminus (tmux), mini-swe-agent; real coding-agent CLIs "
            f"(`palaestra harness install NAME` first): {', '.join(HARNESSES)}."
        ),
    ] = "bash",
    sandbox: Annotated[
        str, typer.Option(help=f"Sandbox backend: {', '.join(BACKENDS)}.")
    ] = "local",
    step_limit: Annotated[
        int | None, typer.Option(min=1, help="Responses per episode (the scaffold's default: 50).")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="Tokens per response (default: the policy's).")
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(min=0.0, help="Sampling temperature, 0 for greedy (default: the policy's)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Base seed of the episodes.")] = 0,
    retries: Annotated[
        int,
        typer.Option(min=0, help="Retries of an episode that hit an infrastructure error."),
    ] = 2,
    max_cost_usd: Annotated[
        float | None,
        typer.Option(help="Stop scheduling episodes once the run has cost this much (USD)."),
    ] = None,
    max_trial_cost_usd: Annotated[
        float | None,
        typer.Option(help="End an episode as an error once it has cost this much (USD)."),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Discard results already in --out.")
    ] = False,
    scalars: Annotated[
        Path | None,
        typer.Option(help="Append live scalars (pass rate, errors, cost, ...) as JSONL here."),
    ] = None,
    tensorboard: Annotated[
        Path | None,
        typer.Option(
            help="Write the live scalars as a TensorBoard event file in this directory "
            "(view with `tensorboard --logdir DIR`)."
        ),
    ] = None,
    strict_tasks: Annotated[
        bool,
        typer.Option(
            "--strict-tasks",
            help="Refuse a directory holding task directories that do not load (by default "
            "they are skipped, each with a warning, and counted in the summary).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Print the summary's tables too.")
    ] = False,
    ray: Annotated[
        bool,
        typer.Option(
            "--ray",
            help="Run the episodes on a Ray cluster (needs "
            + escape("palaestra[ray]")
            + "): the one this "
            "machine joined with `ray start`, or --ray-address's.",
        ),
    ] = False,
    ray_address: Annotated[
        str | None,
        typer.Option(
            help="The Ray cluster (implies --ray): 'auto' (the default: the one this machine "
            "joined), ray://HOST:PORT, or 'local' (a new one-machine instance).",
            metavar="ADDRESS",
        ),
    ] = None,
    ray_resources: Annotated[
        str,
        typer.Option(
            help='What each Ray actor reserves, as JSON: {"CPU": 1, "memory": BYTES, '
            '"docker": 1, ...} (custom resources place actors on the nodes that have '
            "them).",
            metavar="JSON",
        ),
    ] = '{"CPU": 1}',
    ray_actors: Annotated[
        int | None, typer.Option(min=1, help="Ray actors (default: one per alive node).")
    ] = None,
) -> None:
    """Evaluate a policy on a task set; results go to RUN_DIR/results.db and summary.json."""
    if old_concurrency is not None:
        Console(stderr=True).print(
            "[yellow]warning:[/yellow] -n for concurrency is deprecated (-n is --limit in "
            "`palaestra tasks`): use -j/--concurrency"
        )
        concurrency = old_concurrency
    if scaffold not in SCAFFOLDS:
        fail(
            f"--scaffold: unknown scaffold {scaffold!r}; choose one of: {', '.join(sorted(SCAFFOLDS))}"
        )
    if sandbox not in BACKENDS:
        fail(
            f"--sandbox: unknown sandbox backend {sandbox!r}; choose one of: {', '.join(BACKENDS)}"
        )
    check_scaffold_tools(scaffold, sandbox)
    limits: dict[str, Any] = {} if step_limit is None else {"step_limit": step_limit}
    if max_tokens is not None or temperature is not None:
        limits["sampling"] = SamplingParams(max_tokens=max_tokens, temperature=temperature)
    try:
        chosen = make_scaffold(scaffold, **limits) if limits else scaffold
    except TypeError:
        raise typer.BadParameter(
            f"the {scaffold} scaffold takes no step limit or sampling options; drop "
            "--step-limit, --max-tokens and --temperature",
            param_hint="--scaffold",
        ) from None
    check_policy_ready(policy)
    tasks = select_tasks(env_id, strict=strict_tasks, harbor=False)
    sandboxed_options = scaffold != "bash" or sandbox != "local" or bool(limits)
    if sandboxed_options and env_spec(env_id).factory is not None:
        raise typer.BadParameter(
            f"{env_id} runs no scaffold and no sandbox (its tools are Python functions): drop "
            "--scaffold, --sandbox, --step-limit and --max-tokens",
            param_hint="ENV_ID",
        )
    executor: Literal["local"] | RayOptions = "local"
    if ray or ray_address is not None:
        executor = _ray_options(ray_address or "auto", ray_resources, ray_actors)
    out_dir = out or default_run_dir(env_id, policy, time.strftime("%Y%m%d-%H%M%S"))
    if not overwrite:  # refused here, before any stream, bar or episode
        check_run_dir(
            out_dir,
            run_identity(
                env_id,
                policy,
                tasks,
                attempts=attempts,
                seed=seed,
                scaffold=chosen,
                sandbox=sandbox,
            ),
        )
    progress = FittedProgress(eval_clauses, console=Console(stderr=True), disable=as_json)
    bar = progress.add_task(f"{env_id} / {policy}", total=len(tasks) * attempts)
    # a resumed run's counts (and scalar steps) continue from the tries already stored
    prior = (
        read_episodes(out_dir, final_only=False)
        if not overwrite and (out_dir / DB_NAME).is_file()
        else []
    )
    live = Live(progress, bar, open_streams(scalars, tensorboard), prior)
    progress.update(bar, completed=live.done, **live.fields())
    try:
        with progress:
            summary = run_async(
                evaluate(
                    env_id,
                    policy,
                    attempts=attempts,
                    concurrency=concurrency,
                    out_dir=out_dir,
                    seed=seed,
                    retries=retries,
                    max_cost_usd=max_cost_usd,
                    max_trial_cost_usd=max_trial_cost_usd,
                    overwrite=overwrite,
                    on_episode=live,
                    tasks=tasks,
                    scaffold=chosen,
                    sandbox=sandbox,
                    executor=executor,
                )
            )
    except (RunMismatchError, RayClusterError) as e:
        fail(str(e))
    except (KeyboardInterrupt, Terminated) as e:
        how = "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted"
        Console(stderr=True).print(
            f"[yellow]{how}; finished episodes are in {escape(str(out_dir))}/results.db. "
            "Run the same command again to resume.",
            highlight=False,
        )
        raise typer.Exit(SIGTERM_EXIT if isinstance(e, Terminated) else 130) from None
    finally:
        live.close()
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        if verbose:
            print_summary(summary)
        print_brief(summary, str(out_dir))
    report_errors(summary)


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
