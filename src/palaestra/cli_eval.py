"""``palaestra eval``: the command's options, and its steps in the order they run.

Check the names (scaffold, sandbox, policy) and build the scaffold with its limits
(:func:`_scaffold`), select the tasks, choose the executor (:func:`_executor`), refuse a run
directory holding a different run (:func:`~palaestra.cli_checks.check_run_dir`), run
:func:`~palaestra.run.evaluate.evaluate` under a progress bar with live scalars
(:func:`_run`), print the summary (:func:`_print`).
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Callable, Coroutine
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
from palaestra.cli_errors import SIGTERM_EXIT, Terminated, fail, run_async
from palaestra.cli_live import Live, open_streams
from palaestra.cli_progress import FittedProgress
from palaestra.cli_summary import eval_clauses, print_brief, print_summary, report_errors
from palaestra.cli_tasks import select_tasks
from palaestra.env.registry import POLICIES
from palaestra.env.registry import spec as env_spec
from palaestra.llm.types import SamplingParams
from palaestra.run.evaluate import EpisodeRecord, evaluate, run_identity
from palaestra.run.ray_executor import RayClusterError, RayOptions
from palaestra.run.store import DB_NAME, RunMismatchError, read_episodes
from palaestra.sandbox import BACKENDS
from palaestra.scaffolds import SCAFFOLDS, Scaffold, make_scaffold
from palaestra.scaffolds.harness import HARNESSES


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
    prepare_ahead: Annotated[
        bool,
        typer.Option(
            "--prepare-ahead",
            help="Each of the -j workers starts its next episode (sandbox, the scaffold up to "
            "its first request: a harness CLI's start-up) while its current one runs: shorter "
            "episodes, one sandbox more per worker, no less CPU. Not with --ray.",
        ),
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
    chosen, limited = _scaffold(scaffold, sandbox, step_limit, max_tokens, temperature)
    check_policy_ready(policy)
    tasks = select_tasks(env_id, strict=strict_tasks, harbor=False)
    sandboxed_options = scaffold != "bash" or sandbox != "local" or limited
    if sandboxed_options and env_spec(env_id).factory is not None:
        raise typer.BadParameter(
            f"{env_id} runs no scaffold and no sandbox (its tools are Python functions): drop "
            "--scaffold, --sandbox, --step-limit and --max-tokens",
            param_hint="ENV_ID",
        )
    executor = _executor(ray, ray_address, ray_resources, ray_actors)
    if prepare_ahead and executor != "local":
        raise typer.BadParameter(
            "a Ray run's next episode may go to any actor: drop --prepare-ahead or --ray",
            param_hint="--prepare-ahead",
        )
    out_dir = out or default_run_dir(env_id, policy, time.strftime("%Y%m%d-%H%M%S"))
    if not overwrite:  # refused here, before any stream, bar or episode
        identity = run_identity(
            env_id, policy, tasks, attempts=attempts, seed=seed, scaffold=chosen, sandbox=sandbox
        )
        check_run_dir(out_dir, identity)

    def run(on_episode: Callable[[EpisodeRecord], None]) -> Coroutine[Any, Any, dict[str, Any]]:
        return evaluate(
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
            on_episode=on_episode,
            tasks=tasks,
            scaffold=chosen,
            sandbox=sandbox,
            executor=executor,
            prepare_ahead=prepare_ahead,
        )

    bar = (f"{env_id} / {policy}", len(tasks) * attempts)
    summary = _run(run, out_dir, bar, overwrite, scalars, tensorboard, quiet=as_json)
    _print(summary, out_dir, as_json=as_json, verbose=verbose)


def _scaffold(
    scaffold: str,
    sandbox: str,
    step_limit: int | None,
    max_tokens: int | None,
    temperature: float | None,
) -> tuple[str | Scaffold, bool]:
    """The scaffold to run (its name, or the scaffold built with the step limit and sampling
    options) and whether any of those options was given; unknown names are one clear line."""
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
        return (make_scaffold(scaffold, **limits) if limits else scaffold), bool(limits)
    except TypeError:
        raise typer.BadParameter(
            f"the {scaffold} scaffold takes no step limit or sampling options; drop "
            "--step-limit, --max-tokens and --temperature",
            param_hint="--scaffold",
        ) from None


def _executor(
    ray: bool, address: str | None, resources: str, actors: int | None
) -> Literal["local"] | RayOptions:
    """In this process, or on a Ray cluster (``--ray`` or ``--ray-address``)."""
    if ray or address is not None:
        return _ray_options(address or "auto", resources, actors)
    return "local"


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


def _run(
    run: Callable[[Callable[[EpisodeRecord], None]], Coroutine[Any, Any, dict[str, Any]]],
    out_dir: Path,
    bar: tuple[str, int],
    overwrite: bool,
    scalars: Path | None,
    tensorboard: Path | None,
    *,
    quiet: bool,
) -> dict[str, Any]:
    """``run(on_episode)`` (the evaluation) under a progress bar (``bar``: its label and total)
    that, like the live scalars, counts every stored try; a refused run or cluster is one clear
    line, an interrupted one says how to resume."""
    progress = FittedProgress(eval_clauses, console=Console(stderr=True), disable=quiet)
    task = progress.add_task(bar[0], total=bar[1])
    # a resumed run's counts (and scalar steps) continue from the tries already stored
    prior = (
        read_episodes(out_dir, final_only=False)
        if not overwrite and (out_dir / DB_NAME).is_file()
        else []
    )
    live = Live(progress, task, open_streams(scalars, tensorboard), prior)
    progress.update(task, completed=live.done, **live.fields())
    try:
        with progress:
            return run_async(run(live))
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


def _print(summary: dict[str, Any], out_dir: Path, *, as_json: bool, verbose: bool) -> None:
    """The summary: as JSON, or the brief (the tables first with ``verbose``); then the
    errors, if any."""
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        if verbose:
            print_summary(summary)
        print_brief(summary, str(out_dir))
    report_errors(summary)
