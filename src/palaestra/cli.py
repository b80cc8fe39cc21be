"""The ``palaestra`` command line: ``eval``, ``export``, ``report``, ``envs``, ``tasks``, ``proxy``."""

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
from rich.progress import Progress, TaskID

from palaestra.cli_output import id_table, print_json
from palaestra.cli_progress import FittedProgress
from palaestra.cli_summary import (
    console,
    eval_clauses,
    pct,
    print_brief,
    print_summary,
    report_errors,
    usd,
)
from palaestra.cli_tasks import app as tasks_app
from palaestra.cli_tasks import select_tasks
from palaestra.env.registry import POLICIES, check_policy, list_envs, make_policy
from palaestra.env.registry import spec as env_spec
from palaestra.env.types import EpisodeStatus
from palaestra.llm.anthropic import AnthropicPolicy
from palaestra.llm.types import SamplingParams
from palaestra.run.evaluate import EpisodeRecord, evaluate
from palaestra.run.ray_executor import RayClusterError, RayOptions
from palaestra.run.report import write_report
from palaestra.run.scalars import JsonlScalarWriter, ScalarStream
from palaestra.run.store import DB_NAME, RunMismatchError, read_episodes
from palaestra.run.store import export as store_export
from palaestra.run.tensorboard import ScalarWriter
from palaestra.sandbox import BACKENDS
from palaestra.scaffolds import SCAFFOLDS, make_scaffold
from palaestra.scaffolds.proxy import ProxyServer

app = typer.Typer(
    help="palaestra: RL environments for LLM coding agents.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


class _Live:
    """Progress bar fields and the scalar streams (--scalars, --tensorboard), fed by each try.

    The counts start from the tries already in the store (``prior``), so a resumed run's bar,
    rates and scalar steps continue where the last invocation stopped; episodes per second
    count this invocation's episodes. The streams only queue each point: their files are
    written by threads of their own, never on the event loop.
    """

    def __init__(
        self,
        progress: Progress,
        bar: TaskID,
        streams: dict[str, ScalarStream],
        prior: list[EpisodeRecord],
    ) -> None:
        self.progress, self.bar, self.streams = progress, bar, streams
        self.done = self.passed = self.errors = self.unknown_cost = self.new = 0
        self.cost: float | None = None
        for record in prior:
            self._count(record)
        self.started = time.perf_counter()

    def fields(self) -> dict[str, str]:
        elapsed = time.perf_counter() - self.started
        cost = "cost unknown" if self.cost is None else usd(self.cost)
        if self.cost is not None and self.unknown_cost:
            cost += f" (+{self.unknown_cost} unknown)"
        return {
            "rate": pct(self.passed / self.done) if self.done else "-",
            "errors": str(self.errors),
            "cost": cost,
            "speed": f"{self.new / elapsed:.2f}" if elapsed > 0 else "-",
        }

    def _count(self, record: EpisodeRecord) -> bool:
        """Add one stored try to the counts; whether it is final (the one that counts)."""
        if record.get("cost_usd") is not None:
            self.cost = (self.cost or 0.0) + record["cost_usd"]
        else:
            self.unknown_cost += 1
        if not record["final"]:
            return False
        self.done += 1
        self.passed += record["status"] == EpisodeStatus.PASSED
        self.errors += record["status"] == EpisodeStatus.ERROR
        return True

    def __call__(self, record: EpisodeRecord) -> None:
        if not self._count(record):
            return
        self.new += 1
        self.progress.update(self.bar, completed=self.done, **self.fields())
        point = {
            "pass_rate": self.passed / self.done,
            "error_rate": self.errors / self.done,
            "cost_usd": self.cost,  # None (left out of TensorBoard, null in JSONL) while unknown
            "reward": record["reward"],
            "episodes_per_s": self.new / (time.perf_counter() - self.started),
        }
        for stream in self.streams.values():
            stream.add_scalars(self.done, point)

    def close(self) -> None:
        """Write every queued point; a stream that failed is reported, not raised."""
        for option, stream in self.streams.items():
            try:
                stream.close()
            except OSError as e:
                Console(stderr=True).print(f"[yellow]warning:[/yellow] {option} failed: {e}")


def _open_streams(scalars: Path | None, tensorboard: Path | None) -> dict[str, ScalarStream]:
    streams: dict[str, ScalarStream] = {}
    for option, target, opener in (
        ("--scalars", scalars, JsonlScalarWriter),
        ("--tensorboard", tensorboard, ScalarWriter),
    ):
        if target is not None:
            try:
                streams[option] = opener(target)
            except OSError as e:
                for stream in streams.values():
                    stream.close()
                raise typer.BadParameter(f"cannot write {target}: {e}", param_hint=option) from None
    return streams


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
        raise typer.BadParameter(
            "Ray is not installed: pip install 'palaestra[ray]'", param_hint="--ray"
        )
    memory = wanted.pop("memory", None)
    return RayOptions(
        address=None if address == "local" else address, actors=actors,
        num_cpus=float(wanted.pop("CPU", 1)), memory=None if memory is None else int(memory),
        resources=wanted,
    )  # fmt: skip


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
        int, typer.Option("--concurrency", "-n", min=1, help="Episodes run at once.")
    ] = 8,
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
            "(function calling), terminus (tmux)."
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
            help="Run the episodes on a Ray cluster (needs palaestra[ray]): the one this "
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
    if scaffold not in SCAFFOLDS:
        raise typer.BadParameter(
            f"unknown scaffold {scaffold!r}; choose one of: {', '.join(sorted(SCAFFOLDS))}",
            param_hint="--scaffold",
        )
    if sandbox not in BACKENDS:
        raise typer.BadParameter(
            f"unknown sandbox backend {sandbox!r}; choose one of: {', '.join(BACKENDS)}",
            param_hint="--sandbox",
        )
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
    try:
        check_policy(policy)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--policy") from None
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
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out_dir = (
        out
        or Path("runs")
        / f"{env_id.replace('/', '_')}-{policy.replace(':', '_').replace('/', '_')}-{stamp}"
    )
    progress = FittedProgress(eval_clauses, console=Console(stderr=True), disable=as_json)
    bar = progress.add_task(f"{env_id} / {policy}", total=len(tasks) * attempts)
    # a resumed run's counts (and scalar steps) continue from the tries already stored
    prior = (
        read_episodes(out_dir, final_only=False)
        if not overwrite and (out_dir / DB_NAME).is_file()
        else []
    )
    live = _Live(progress, bar, _open_streams(scalars, tensorboard), prior)
    progress.update(bar, completed=live.done, **live.fields())
    try:
        with progress:
            summary = asyncio.run(
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
                )  # fmt: skip
            )
    except (RunMismatchError, RayClusterError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        console.print(
            f"[yellow]interrupted; finished episodes are in {out_dir}/results.db. "
            "Run the same command again to resume."
        )
        raise typer.Exit(130) from None
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
    fmt: Annotated[str, typer.Option("--format", "-f", help="jsonl or parquet.")] = "jsonl",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File (default RUN_DIR/episodes.FMT).")
    ] = None,
) -> None:
    """Export a run's episodes with their trajectories for training pipelines."""
    target = output or run_dir / f"episodes.{fmt}"
    try:
        n = store_export(run_dir, target, fmt)
    except (FileNotFoundError, ValueError, ImportError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    console.print(f"wrote {n} episodes to {target}")


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
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    console.print(f"wrote {output}")


@app.command("envs")
def envs_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print them as JSON.")] = False,
) -> None:
    """List the registered environment presets."""
    rows = [(spec.id, len(spec.tasks()), spec.description) for spec in list_envs()]
    if as_json:
        return print_json([dict(zip(("id", "tasks", "description"), r, strict=True)) for r in rows])
    table = id_table("id", "tasks", "description")
    for env, count, description in rows:
        table.add_row(env, str(count), description)
    console.print(table)


app.add_typer(tasks_app, name="tasks")


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
            client = make_policy(check_policy(policy))
        except ValueError as e:
            raise typer.BadParameter(f"{e} (or anthropic:<model>)", param_hint="--policy") from None

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

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    app()
