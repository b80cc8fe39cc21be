"""``palaestra tasks synth SOURCE -o DIR``: a project in, validated bug-fix tasks out.

Steps, each reported through ``say`` and each resumable (its result is kept under
``DIR/.synth/<source>/``; a re-run skips what is done):

1. fetch: the sdist (or a git directory's tracked files), unpacked, its layout read;
2. environment: the venv of dependencies and pytest (:mod:`.environment`), and its image;
3. baseline: the suite twice, the reliable tests, the coverage map (:mod:`.testrun`);
4. candidates: sites a test reaches, tried one by one (:mod:`.validate`);
5. pairs: two-site bugs from kept ones;
6. tasks: each kept bug written as a Harbor task (:mod:`.writer`), and ``manifest.json``;
   with an image, a bug whose tests do not pass on the original source where its verifier
   runs them is dropped (``Options.vet``).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from palaestra.tasks.generators.base import write_atomically
from palaestra.tasks.synth import instruction as text
from palaestra.tasks.synth.environment import build_image, build_venv, image_tag
from palaestra.tasks.synth.manifest import Bug, Manifest, instruction_of, write_bug
from palaestra.tasks.synth.project import Project, fetch
from palaestra.tasks.synth.testrun import baseline as run_baseline
from palaestra.tasks.synth.validate import Progress, all_sites, check_pair, choose, pairs, run

Say = Callable[[str], None]


@dataclass(frozen=True)
class Options:
    seed: int = 0
    candidates: int = 200
    pairs: float = 0.25
    """Two-site bugs to try, as a share of the kept one-site bugs."""
    workers: int = 1
    image: bool = True
    max_tasks: int | None = None
    rewrite: text.Rewriter | None = None
    vet: Callable[[Project, str, list[Bug]], dict[str, str]] | None = None
    """``{bug id: why}`` of the bugs to drop, their tests run where their verifier runs
    (``palaestra.run.synth_vet.vet``: in the image, on the original source). None: not run."""


def _work_dir(out: Path, source: str) -> Path:
    return out / ".synth" / re.sub(r"[^A-Za-z0-9.=_-]+", "_", source.strip("/"))


def task_id(short: str, keys: list[str]) -> str:
    return f"{short}-{hashlib.sha256('+'.join(keys).encode()).hexdigest()[:8]}"


def synthesise(
    source: str,
    out: Path,
    options: Options = Options(),
    *,
    say: Say = print,
    progress: Progress | None = None,
) -> Manifest:
    """Turn ``source`` into tasks under ``out``; return the manifest (also ``out/manifest.json``)."""
    timings: dict[str, float] = {}
    work = _work_dir(out, source)
    work.mkdir(parents=True, exist_ok=True)
    before = out / "manifest.json"
    earlier = Manifest.load(before).stats.get("step_seconds", {}) if before.is_file() else {}

    def step(name: str, started: float) -> None:  # a resumed step keeps its first run's time
        timings[name] = max(round(time.monotonic() - started, 2), earlier.get(name, 0.0))

    start = time.monotonic()
    say(f"fetch: {source}")
    project = fetch(source, work)
    step("fetch", start)
    say(
        f"  {project.name} {project.version}: {len(project.library)} library modules, "
        f"{len(project.tests)} test files"
    )

    start = time.monotonic()
    say(
        "environment: dependencies and pytest in a venv"
        + (", then its image" if options.image else "")
    )
    environment = build_venv(project, work)
    image = (
        build_image(project, environment, work)
        if options.image
        else image_tag(project, environment)
    )
    step("environment", start)
    say(f"  {len(environment.packages)} packages; image {image}")

    start = time.monotonic()
    say("baseline: the suite, twice")
    base = run_baseline(environment, project, project.root, work)
    step("baseline", start)
    say(
        f"  {len(base.reliable)} reliable tests, {len(base.flaky)} flaky, "
        f"{len(base.failing)} failing ({base.seconds:.1f} s a run)"
    )

    start = time.monotonic()
    chosen, unreached = choose(project, base, options.seed, options.candidates)
    say(f"candidates: {len(chosen)} sites ({unreached} sites no reliable test reaches)")
    singles = run(
        project,
        environment,
        base,
        [(s.key, [s]) for s in chosen],
        work,
        workers=options.workers,
        progress=progress,
    )
    step("candidates", start)
    kept = [(o, s) for o, s in zip(singles, chosen, strict=True) if o.kept]
    say(f"  kept {len(kept)} of {len(chosen)}")

    start = time.monotonic()
    wanted = int(len(kept) * options.pairs)
    by_key = {s.key: s for s in all_sites(project)}
    jobs = pairs(kept, options.seed, wanted)
    say(f"pairs: {len(jobs)} two-site candidates")
    tried = run(project, environment, base, jobs, work, workers=options.workers, progress=progress)
    outcome_of = {o.key: o for o in singles}
    doubles = [check_pair(o, [outcome_of[k] for k in o.sites]) for o in tried]
    step("pairs", start)
    say(f"  kept {sum(o.kept for o in doubles)} of {len(jobs)}")

    start = time.monotonic()
    bugs = [
        Bug(
            task_id(project.short, outcome.sites),
            outcome.sites,
            outcome.fail_to_pass,
            outcome.pass_to_pass,
            outcome.messages,
        )
        for outcome in [o for o, _ in kept] + [o for o in doubles if o.kept]
    ]
    vetoed = _vetoed(project, image, bugs, options.vet, say) if options.vet else {}
    bugs = [b for b in bugs if b.id not in vetoed]
    bugs = bugs[: options.max_tasks] if options.max_tasks is not None else bugs
    template_kept: dict[str, str] = {}  # bug id -> why the writer's text was refused
    for bug in bugs if options.rewrite is not None else []:
        bug.instruction, why = _rewritten(project, bug, by_key, options.rewrite, say)
        if why is not None:
            template_kept[bug.id] = why
    say(f"tasks: writing {len(bugs)} to {out}")
    for bug in bugs:
        write_atomically(
            out / bug.id, lambda tmp, bug=bug: write_bug(project, image, bug, by_key, tmp)
        )
    step("tasks", start)

    every = list(singles) + list(doubles)
    manifest = Manifest(
        project=project.short,
        version=project.version,
        source="pypi" if project.sdist else str(Path(source).resolve()),
        sdist=project.sdist,
        sdist_sha256=project.sdist_sha256,
        seed=options.seed,
        packages=list(environment.packages),
        tasks=bugs,
        stats={
            "sites": len(by_key),
            "unreached_sites": unreached,
            "reliable_tests": len(base.reliable),
            "flaky_tests": len(base.flaky),
            "failing_tests": len(base.failing),
            "candidates": len(chosen),
            "pairs_tried": len(jobs),
            "kept": len(bugs),
            "dropped_in_image": dict(Counter(vetoed.values())) if options.vet else None,
            "dropped": dict(Counter(o.status for o in every if not o.kept)),
            "kept_by_mutator": dict(
                Counter(s.mutator for b in bugs for s in [by_key[k] for k in b.sites])
            ),
            "candidate_seconds": round(sum(o.seconds for o in every), 1),
            "step_seconds": timings,
            "image": image,
        },
    )
    if options.rewrite is not None:
        manifest.stats["writer"] = {
            "rewritten": len(bugs) - len(template_kept),
            "template_kept": template_kept,
        }
    manifest.save(out / "manifest.json")
    return manifest


def _vetoed(
    project: Project,
    image: str,
    bugs: list[Bug],
    vet: Callable[[Project, str, list[Bug]], dict[str, str]],
    say: Say,
) -> dict[str, str]:
    """The bugs to drop, vetted where their verifier runs (:attr:`Options.vet`)."""
    say("image: each task's tests on the original source, as its verifier runs them")
    vetoed = vet(project, image, bugs)
    for why, n in sorted(Counter(vetoed.values()).items()):
        say(f"  {n} tasks dropped: {why}")
    return vetoed


def _rewritten(
    project, bug: Bug, by_key, rewrite: text.Rewriter, say: Say
) -> tuple[str, str | None]:
    """The writer policy's text and None, unless it gives the answer away or is unusable: then
    "" (the template's text) and the reason."""
    sites = [by_key[k] for k in bug.sites]
    template = instruction_of(project, bug, sites)
    try:
        answer = rewrite(text.REWRITE_PROMPT.format(instruction=template)).strip()
    except Exception as e:  # noqa: BLE001 - a failing writer leaves the template's text
        why = f"writer failed ({type(e).__name__}: {e})"
        say(f"  {why} for {bug.id}; template kept")
        return "", why
    words = text.forbidden(sorted({s.path for s in sites}), project.import_root)
    originals = [(project.root / s.path).read_text().splitlines()[s.line - 1] for s in sites]
    leak = text.leaks(answer, words, originals)
    if leak is not None:
        why = f"gives away {leak!r}"
    else:
        why = text.unusable(answer, bug.fail_to_pass)
    if why is not None:
        say(f"  writer's text for {bug.id} {why}; template kept")
        return "", why
    return answer + "\n", None
