"""``palaestra tasks ...``: list, show, export, check and fetch tasks; list generator families;
synthesise bug-fix tasks from a real project (``tasks synth``: :mod:`palaestra.cli_synth`)."""

from __future__ import annotations

import shutil
import time
import warnings
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from palaestra.cli_errors import SIGTERM_EXIT, Terminated, fail, run_async
from palaestra.cli_output import CheckProgress, check_json, id_table, print_check, print_json
from palaestra.cli_pool import app as pool_app
from palaestra.cli_synth import synth
from palaestra.env.registry import list_envs, load_tasks, spec
from palaestra.run.check import check_tasks, planned
from palaestra.tasks import Task, TaskError, generators
from palaestra.tasks import load_tasks as load_task_dirs
from palaestra.tasks.datasets import registry as reg
from palaestra.tasks.source import SkippedTasksWarning, TaskSet

app = typer.Typer(
    help="Tasks: list, show, export, check, fetch, synth; generator families.", no_args_is_help=True
)
app.add_typer(pool_app, name="pool")
app.command("synth")(synth)
console = Console()

JsonOpt = Annotated[bool, typer.Option("--json", help="Print it as JSON (for scripts).")]
EnvArg = Annotated[
    str,
    typer.Argument(
        help="Env id (starter, gen/debugging:0:50, humaneval, a generated task id such as "
        "meeting-rooms-d035-s12) or a directory of Harbor tasks."
    ),
]


def select_tasks(
    env_id: str, param_hint: str = "ENV_ID", *, strict: bool = False, harbor: bool = True
) -> TaskSet:
    """The tasks ``env_id`` selects, or the usage error every subcommand gives for an unknown
    preset, family or task id, a selector out of range, or a difficulty outside [0, 1].
    ``harbor``: refuse a preset of tool-use or game tasks (not Harbor tasks: ``palaestra
    eval`` runs them, the ``tasks`` subcommands do not).

    Task directories that do not load are skipped with one warning line each (on stderr), or
    are an error (exit 2) with ``strict``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SkippedTasksWarning)  # said below, one line a task
            tasks = load_tasks(env_id)
    except (KeyError, ValueError, ModuleNotFoundError) as e:  # TaskError, SelectorError: ValueError
        raise typer.BadParameter(str(e.args[0] if e.args else e), param_hint=param_hint) from None
    if harbor and spec(env_id).factory is not None:
        raise typer.BadParameter(
            f"{env_id} holds tool-use or game tasks, not Harbor tasks: run them with "
            f"`palaestra eval {env_id}` (docs/tool-envs.md)",
            param_hint=param_hint,
        )
    if tasks.invalid:
        err = Console(stderr=True, soft_wrap=True)
        for directory, error in tasks.invalid:
            first = str(error).splitlines()[0]
            err.print(
                f"[yellow]invalid task[/yellow] {escape(directory.name)}: {escape(first)}",
                highlight=False,
            )
        count = len(tasks.invalid)
        if strict:
            err.print(f"[red]error:[/red] {count} task(s) do not load; refused (--strict-tasks)")
            raise typer.Exit(2)
        err.print(
            f"[yellow]warning:[/yellow] skipped {count} task(s) that do not load "
            "(--strict-tasks refuses them instead)"
        )
    return tasks


def _describe(tasks: TaskSet, i: int) -> tuple[str, str, str, str]:
    """(id, family, category, tier) without generating a lazy task when its id says enough."""
    tid = tasks.id_at(i)
    try:
        family, _, difficulty = generators.parse_task_id(tid)
        return tid, family, generators.get_family(family).category, generators.tier_of(difficulty)
    except (ValueError, KeyError):
        task = tasks[i]
        return (
            tid,
            str(task.config.metadata.get("family", "")),
            task.category or "",
            (task.difficulty or ""),
        )


@app.command("list")
def list_cmd(
    env_id: EnvArg = "starter",
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show at most N tasks.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """The tasks an env id selects."""
    tasks = select_tasks(env_id)
    rows = [(str(i), *_describe(tasks, i)) for i in range(min(limit, len(tasks)))]
    if as_json:
        keys = ("index", "id", "family", "category", "tier")
        listed = [dict(zip(keys, (int(r[0]), *r[1:]), strict=True)) for r in rows]
        print_json({"env_id": env_id, "total": len(tasks), "tasks": listed})
        return
    table = id_table("#", "id", "family", "category", "tier", title=f"{env_id}: {len(tasks)} tasks")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if len(tasks) > limit:
        console.print(f"... {len(tasks) - limit} more (--limit)")


@app.command("families")
def families_cmd(
    category: Annotated[str | None, typer.Option(help="Only this category.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Generator families, by category, and the packs built from them."""
    try:
        chosen = generators.families(category)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--category") from None
    if as_json:
        print_json(
            {
                "families": [
                    {"name": f.name, "category": f.category, "summary": f.summary} for f in chosen
                ],
                "packs": [s.id for s in list_envs()],
            }
        )
        return
    table = id_table("family", "category", "what it asks", ids=("family",))
    for fam in chosen:
        table.add_row(fam.name, fam.category, fam.summary)
    console.print(table)
    packs = [s for s in list_envs()]
    console.print(
        "packs: " + ", ".join(s.id for s in packs) + "; also gen/<category>, gen/<family>, "
        "and any generated task id <family>-d<000..100>-s<seed>"
    )


def _one(what: str) -> Task:
    path = Path(what)
    if path.is_dir():
        try:
            found = load_task_dirs(path)
        except TaskError as e:
            raise typer.BadParameter(str(e), param_hint="TASK") from None
        if len(found) != 1:
            raise typer.BadParameter(f"{what} holds {len(found)} tasks; name one task directory")
        return found[0]
    tasks = select_tasks(what, param_hint="TASK")
    if len(tasks) != 1:
        raise typer.BadParameter(
            f"{what!r} selects {len(tasks)} tasks; name one (e.g. {what}:0 or a task id)"
        )
    return tasks[0]


@app.command("show")
def show_cmd(
    task: Annotated[
        str, typer.Argument(help="A task id, an env id selecting one task, or a task dir.")
    ],
) -> None:
    """A task's metadata, instruction and files (hidden tests and solutions listed, not shown)."""
    t = _one(task)
    meta = t.config.metadata
    console.print(f"[bold]{t.id}[/bold]  ({t.path})")
    for key in ("family", "category", "difficulty", "difficulty_value", "seed", "tags"):
        if key in meta:
            console.print(f"  {key}: {meta[key]}")
    console.print(
        f"  agent timeout: {t.agent_timeout_sec:g}s, verifier timeout: "
        f"{t.verifier_timeout_sec:g}s, network: {t.network}"
    )
    console.rule("instruction.md")
    console.print(t.instruction, markup=False, highlight=False, soft_wrap=True)
    console.rule("files")
    for path in sorted(p for p in t.path.rglob("*") if p.is_file()):
        console.print(f"  {path.relative_to(t.path)}  ({path.stat().st_size} B)")


@app.command("export")
def export_cmd(
    env_id: EnvArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write task dirs into.")],
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="At most N tasks.")] = None,
    force: Annotated[bool, typer.Option(help="Replace task dirs that already exist.")] = False,
) -> None:
    """Write the selected tasks as Harbor task directories (generated ones are generated now)."""
    tasks = select_tasks(env_id)
    count = len(tasks) if limit is None else min(limit, len(tasks))
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for i in range(count):
        task = tasks[i]
        dest = out / task.id
        if dest.exists():
            if not force:
                raise typer.BadParameter(f"{dest} exists; pass --force to replace it")
            shutil.rmtree(dest)
        shutil.copytree(task.path, dest, symlinks=True)
    console.print(f"wrote {count} tasks to {out} in {time.perf_counter() - started:.1f}s")


@app.command("check")
def check_cmd(
    target: Annotated[str, typer.Argument(help="A task dir, a dir of tasks, or an env id.")],
    concurrency: Annotated[int, typer.Option("--concurrency", "-j", min=1)] = 4,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="At most N tasks.")] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="List every scenario, not only failures.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check verifiers: the oracle must score 1, doing nothing 0, each wrong solution 0
    (below 1 where the task gives partial credit).

    A live line counts the scenarios as they finish; at the end, the failures are listed
    (with their verifier's output) and counted."""
    path = Path(target)
    if path.is_dir():
        try:
            tasks = load_task_dirs(path)
        except TaskError as e:
            fail(str(e))
    else:
        tasks = list(select_tasks(target, param_hint="TARGET"))
    tasks = tasks[:limit] if limit is not None else tasks
    live = CheckProgress(target, len(planned(tasks)), disable=as_json)
    started = time.perf_counter()
    try:
        with live.progress:
            results = run_async(check_tasks(tasks, concurrency=concurrency, on_result=live))
    except (KeyboardInterrupt, Terminated) as e:
        how = "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted"
        Console(stderr=True).print(f"[yellow]{how}[/yellow]: the check stopped; nothing is kept")
        raise typer.Exit(SIGTERM_EXIT if isinstance(e, Terminated) else 130) from None
    if as_json:
        print_json(check_json(results))
    else:
        print_check(results, time.perf_counter() - started, verbose=verbose)
    if not all(r.ok for r in results):
        raise typer.Exit(1)


@app.command("fetch")
def fetch_cmd(
    dataset: Annotated[str, typer.Argument(help="name@version (or name) in the registry.")],
    registry: Annotated[str, typer.Option(help="registry.json: a path or an http(s) URL.")] = "",
) -> None:
    """Download a Harbor registry dataset (sparse git checkout) into the cache."""
    source = registry or reg.DEFAULT_REGISTRY
    try:
        datasets, base = reg.read_registry(source)
        ds = reg.find_dataset(datasets, dataset)
        started = time.perf_counter()
        dest = run_async(reg.fetch(ds, base))
    except reg.RegistryError as e:
        fail(str(e))
    console.print(
        f"{ds.ref}: {len(ds.tasks)} tasks in {dest} "
        f"({time.perf_counter() - started:.1f}s); use env id harbor/{ds.ref}"
    )
