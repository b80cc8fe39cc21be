"""Synthesised bug-fix tasks (``palaestra tasks synth``): yield, time and disk, per project.

Prints figures; asserts nothing. Run::

    .venv/bin/python benchmarks/bench_synth.py more-itertools tabulate     # some projects
    nice -n 10 .venv/bin/python benchmarks/bench_synth.py --all            # every candidate
    .venv/bin/python benchmarks/bench_synth.py --report                    # what is done so far
    .venv/bin/python benchmarks/bench_synth.py --start more-itertools      # sandbox start

Unattended and resumable: each project is synthesised into ``--out``/<project>/ (a re-run
skips finished steps and candidates); a project that cannot be used (no tests in its sdist,
C extensions, a suite that does not run offline) is recorded with its one-line reason and the
run goes on. ``--ship`` copies each manifest into ``src/palaestra/tasks/synth/manifests/``.

Per project: tasks kept of candidates tried and why the rest were dropped; synthesis minutes
and seconds per candidate and per kept task; disk: the project's source and venv, its image's
own layer (above ``palaestra/base:bookworm``), its tasks (hard links to the source counted
once, so what a task adds) and its manifest per task. ``--start`` measures the local sandbox
start of a repository task (its workspace copied in, on the image's root filesystem) against
a generated task's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import stat
import statistics
import subprocess
import sys
import time
from pathlib import Path

from palaestra.tasks.synth import SynthError
from palaestra.tasks.synth.pipeline import Options, synthesise

PROJECTS = (
    "more-itertools",
    "toolz",
    "python-slugify",
    "humanize",
    "tabulate",
    "inflection",
    "boltons",
    "sortedcontainers",
    "cachetools",
    "jmespath",
    "semver",
    "packaging",
    "markdown",
    "docopt",
    "itsdangerous",
    "xmltodict",
    "parse",
    "tomli",
    "pathspec",
    "wcwidth",
    "text-unidecode",
    "isodate",
    "python-dateutil",
    "pyparsing",
    "attrs",
    "six",
    "idna",
    "click",
    "toml",
    "schema",
)
SHIP = Path(__file__).resolve().parents[1] / "src/palaestra/tasks/synth/manifests"
DEFAULT_OUT = Path.home() / ".cache" / "palaestra" / "bench-synth"


def du(path: Path) -> int:
    """Bytes on disk under ``path`` (hard links counted once)."""
    if not path.exists():
        return 0
    out = subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True)
    return int(out.stdout.split()[0]) if out.returncode == 0 else 0


def du_many(paths: list[Path]) -> int:
    paths = [p for p in paths if p.exists()]
    if not paths:
        return 0
    out = subprocess.run(
        ["du", "-s", "-c", "-B1", *map(str, paths)], capture_output=True, text=True
    )
    return int(out.stdout.strip().splitlines()[-1].split()[0])


def image_layer_bytes(image: str) -> int:
    sizes = []
    for tag in (image, "palaestra/base:bookworm"):
        out = subprocess.run(
            ["docker", "image", "inspect", "-f", "{{.Size}}", tag], capture_output=True, text=True
        )
        sizes.append(int(out.stdout.strip() or 0))
    return max(0, sizes[0] - sizes[1])


def rootfs_bytes(image: str) -> tuple[int, int]:
    """The local backend's export of the image (shared by the project's tasks): the bytes only
    it holds, and those it shares as hard links with other exports (the base's files)."""
    from palaestra.sandbox.images import rootfs_cache_dir

    out = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Id}}", image], capture_output=True, text=True
    )
    image_id = out.stdout.strip().removeprefix("sha256:")
    export = rootfs_cache_dir() / image_id
    return own_and_shared(export) if image_id and export.is_dir() else (0, 0)


def own_and_shared(tree: Path) -> tuple[int, int]:
    """Bytes on disk of the inodes all of whose links are inside ``tree``, and of the rest."""
    seen: dict[tuple[int, int], list[int]] = {}  # inode -> [links seen, links, blocks]
    for path in [tree, *tree.rglob("*")]:
        st = path.lstat()
        links = 1 if stat.S_ISDIR(st.st_mode) else st.st_nlink  # a directory's count its subdirs
        entry = seen.setdefault((st.st_dev, st.st_ino), [0, links, st.st_blocks])
        entry[0] += 1
    own = sum(b for n, links, b in seen.values() if n >= links)
    total = sum(b for _, _, b in seen.values())
    return own * 512, (total - own) * 512


def measure(out: Path) -> dict:
    manifest = json.loads((out / "manifest.json").read_text())
    stats = manifest["stats"]
    work = next((out / ".synth").iterdir())
    tasks = [out / b["id"] for b in manifest["tasks"]]
    source = du_many([work / "source"])
    with_tasks = du_many([work / "source", *tasks])
    n = max(1, len(tasks))
    own, shared = rootfs_bytes(stats["image"])
    tried = stats["candidates"] + stats["pairs_tried"]
    seconds = sum(stats["step_seconds"].values())
    return {
        "project": manifest["project"],
        "version": manifest["version"],
        "tasks": len(tasks),
        "candidates": tried,
        "dropped": stats["dropped"],
        "reliable_tests": stats["reliable_tests"],
        "flaky_tests": stats["flaky_tests"],
        "minutes": round(seconds / 60, 1),
        "s_per_candidate": round(stats["candidate_seconds"] / max(1, tried), 1),
        "s_per_task": round(seconds / n, 1),
        "source_mb": round(source / 1e6, 2),
        "venv_mb": round(du(work / "venv") / 1e6, 1),
        "image_layer_mb": round(image_layer_bytes(stats["image"]) / 1e6, 1),
        "rootfs_own_mb": round(own / 1e6, 1),
        "rootfs_shared_mb": round(shared / 1e6, 1),
        "task_kb": round((with_tasks - source) / n / 1e3, 1),
        "manifest_bytes_per_task": round((out / "manifest.json").stat().st_size / n),
    }


def run_project(name: str, root: Path, options: Options, ship: bool) -> dict:
    out = root / name
    started = time.monotonic()
    try:
        manifest = synthesise(
            name, out, options, say=lambda line: print(f"[{name}] {line}", flush=True)
        )
    except Exception as e:  # noqa: BLE001 - an unattended run records it and goes on
        reason = str(e) if isinstance(e, SynthError) else f"{type(e).__name__}: {e}"
        row = {"project": name, "error": reason}
        (root / f"{name}.error.json").write_text(json.dumps(row) + "\n")
        print(f"[{name}] skipped: {reason}", flush=True)
        return row
    if ship:
        SHIP.mkdir(exist_ok=True)
        manifest.save(SHIP / f"{manifest.project}.json.gz")
    row = measure(out)
    row["wall_minutes"] = round((time.monotonic() - started) / 60, 1)
    print(json.dumps(row), flush=True)
    return row


def report(root: Path) -> None:
    rows = []
    for project_dir in sorted(p for p in root.iterdir() if (p / "manifest.json").is_file()):
        rows.append(measure(project_dir))
    errors = [json.loads(p.read_text()) for p in sorted(root.glob("*.error.json"))]
    for row in rows:
        print(json.dumps(row))
    for row in errors:
        print(f"skipped {row['project']}: {row['error']}")
    if rows:
        total = sum(r["tasks"] for r in rows)
        tried = sum(r["candidates"] for r in rows)
        print(
            f"{len(rows)} projects, {total} tasks of {tried} candidates "
            f"({100 * total / max(1, tried):.0f} % kept), {len(errors)} projects skipped; "
            f"median task {statistics.median(r['task_kb'] for r in rows):.0f} KB, "
            f"median {statistics.median(r['s_per_candidate'] for r in rows):.1f} s a candidate"
        )


async def sandbox_start(task_dir: Path, reps: int) -> None:
    from palaestra.env.sandbox_spec import prepare_sandbox_spec
    from palaestra.sandbox import make_backend
    from palaestra.tasks import generators, load_task

    generated = generators.load_generated("meeting-rooms", seed=0, difficulty=0.5)
    backend = make_backend("local")
    try:
        for label, task in (
            ("repository task", load_task(task_dir)),
            ("generated task", generated),
        ):
            spec = await prepare_sandbox_spec(task, "local")
            times = []
            for _ in range(reps):
                start = time.perf_counter()
                sandbox = await backend.create(spec)
                await sandbox.exec(["true"], timeout=30)
                times.append(time.perf_counter() - start)
                await sandbox.close()
            print(
                f"{label}: create to first exec, median of {reps}: "
                f"{statistics.median(times) * 1000:.0f} ms (min {min(times) * 1000:.0f})"
            )
    finally:
        await backend.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="*")
    parser.add_argument("--all", action="store_true", help="every project of PROJECTS")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--candidates", type=int, default=80)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--ship", action="store_true", help="copy manifests into the package")
    parser.add_argument("--report", action="store_true", help="figures of what is done")
    parser.add_argument("--start", metavar="PROJECT", help="sandbox start of one of its tasks")
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report:
        report(args.out)
        return
    if args.start:
        manifest = json.loads((args.out / args.start / "manifest.json").read_text())
        asyncio.run(sandbox_start(args.out / args.start / manifest["tasks"][0]["id"], args.reps))
        return
    names = list(PROJECTS) if args.all else args.projects
    if not names:
        parser.error("name projects, or pass --all")
    options = Options(candidates=args.candidates, workers=args.workers)
    for name in names:
        run_project(name, args.out, options, args.ship)
    report(args.out)


if __name__ == "__main__":
    sys.exit(main())
