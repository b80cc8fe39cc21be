"""Candidate bugs: which sites to try, each tried on a copy of the project, kept or dropped.

:func:`choose` takes the sites a test reaches (the baseline's coverage map: a site in a
function no reliable test calls can break nothing observable) and deals them out round-robin
over the mutators from lists shuffled by the seed, so a sample holds every class.
:func:`run` tries each candidate: the mutated module written into a worker's copy of the
project, only the reliable tests that call the mutated function run. A candidate is **kept**
when at least one of them fails and every one of them was still collected and run; otherwise
it is dropped with the reason (``no-change``, ``no-test-fails``, ``suite-broken``, ``timeout``).
:func:`combine` pairs kept bugs in different functions into two-site bugs, kept when each half's
failing tests stay in what the task checks (restoring one site alone fails).

Results are appended to ``candidates.jsonl`` as they come: a re-run skips what is recorded.
"""

from __future__ import annotations

import json
import queue
import random
import shutil
import threading
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from palaestra.tasks.synth.environment import ProjectVenv
from palaestra.tasks.synth.mutators import Site, mutate, sites
from palaestra.tasks.synth.project import Project
from palaestra.tasks.synth.testrun import Baseline, run_pytest

#: Passing tests a task checks beside its failing ones, at most.
PASS_TO_PASS = 30
_MESSAGES = 3


@dataclass
class CandidateResult:
    """What trying one candidate bug came to (a line of ``candidates.jsonl``)."""

    key: str
    sites: list[str]
    status: str
    """``kept`` or why it was dropped."""
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    messages: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def kept(self) -> bool:
        return self.status == "kept"


Progress = Callable[[int, int, int], None]


def coverage(baseline: Baseline) -> dict[tuple[str, int], list[str]]:
    """``(path, first line of a function)`` -> the reliable tests that call it."""
    reliable = set(baseline.reliable)
    found: dict[tuple[str, int], list[str]] = defaultdict(list)
    for nodeid, calls in baseline.calls.items():
        if nodeid in reliable:
            for path, line in calls:
                found[(path, line)].append(nodeid)
    return found


def all_sites(project: Project) -> list[Site]:
    found: list[Site] = []
    for path in project.library:
        found += sites(path, (project.root / path).read_text(encoding="utf-8", errors="strict"))
    return found


def choose(project: Project, baseline: Baseline, seed: int, limit: int) -> tuple[list[Site], int]:
    """Up to ``limit`` sites a reliable test reaches, balanced over mutators; and how many
    sites no test reaches."""
    reached = coverage(baseline)
    every = all_sites(project)
    covered = [s for s in every if (s.path, s.function) in reached]
    by_mutator: dict[str, list[Site]] = defaultdict(list)
    for site in covered:
        by_mutator[site.mutator].append(site)
    rng = random.Random(f"swe-synth:{seed}")
    lists = []
    for name in sorted(by_mutator):
        chosen = by_mutator[name][:]
        rng.shuffle(chosen)
        lists.append(chosen)
    dealt: list[Site] = []
    while len(dealt) < limit and any(lists):
        for chosen in lists:
            if chosen and len(dealt) < limit:
                dealt.append(chosen.pop())
    return dealt, len(every) - len(covered)


def _load(record: Path) -> dict[str, CandidateResult]:
    done: dict[str, CandidateResult] = {}
    if record.is_file():
        for line in record.read_text().splitlines():
            if line.strip():
                outcome = CandidateResult(**json.loads(line))
                done[outcome.key] = outcome
    return done


def _try(
    project: Project,
    environment: ProjectVenv,
    baseline: Baseline,
    tree: Path,
    chosen: list[Site],
    key: str,
    tests: list[str],
) -> CandidateResult:
    keys = [s.key for s in chosen]
    originals: dict[str, str] = {}
    for site in chosen:
        originals.setdefault(site.path, (project.root / site.path).read_text())
    changed = {}
    for path, source in originals.items():
        mutated = mutate(source, [s for s in chosen if s.path == path])
        if mutated is None:
            return CandidateResult(key, keys, "no-change")
        changed[path] = mutated
    files = sorted({t.split("::")[0] for t in tests})
    share = len(tests) / max(1, len(baseline.reliable))
    timeout = min(600.0, 30.0 + 4 * baseline.seconds * share)
    try:
        for path, text in changed.items():
            (tree / path).write_text(text)
        report = run_pytest(environment, project, tree, files, select=tests, timeout=timeout)
    finally:
        for path, text in originals.items():
            (tree / path).write_text(text)
    if report.timed_out:
        return CandidateResult(key, keys, "timeout", seconds=report.seconds)
    ran = set(report.outcomes)
    if report.errors or set(report.collected) != set(tests) or not ran >= set(tests):
        return CandidateResult(key, keys, "suite-broken", seconds=report.seconds)
    failing = [t for t in tests if report.outcomes[t] in ("failed", "error")]
    if not failing:
        return CandidateResult(key, keys, "no-test-fails", seconds=report.seconds)
    passing = [t for t in tests if report.outcomes[t] == "passed"]
    messages = {t: report.messages.get(t, "") for t in failing[:_MESSAGES]}
    return CandidateResult(key, keys, "kept", failing, passing, messages, report.seconds)


def _sample_passing(outcome: CandidateResult, must: set[str], rng: random.Random) -> None:
    extra = sorted(set(outcome.pass_to_pass) - must)
    rng.shuffle(extra)
    keep = sorted(must & set(outcome.pass_to_pass)) + extra
    outcome.pass_to_pass = sorted(keep[: max(PASS_TO_PASS, len(must))])


def run(
    project: Project,
    environment: ProjectVenv,
    baseline: Baseline,
    jobs: list[tuple[str, list[Site]]],
    work: Path,
    *,
    workers: int = 1,
    progress: Progress | None = None,
) -> list[CandidateResult]:
    """Try each ``(key, sites)`` job (resumable through ``work/candidates.jsonl``)."""
    record = work / "candidates.jsonl"
    done = _load(record)
    reached = coverage(baseline)
    todo = [(key, chosen) for key, chosen in jobs if key not in done]
    lock = threading.Lock()
    trees: queue.Queue[Path] = queue.Queue()
    for i in range(max(1, min(workers, len(todo)))):
        tree = work / f"scratch-{i}"
        if tree.exists():
            shutil.rmtree(tree)
        shutil.copytree(project.root, tree, symlinks=True)
        trees.put(tree)
    counts = [len(jobs) - len(todo), sum(o.kept for o in done.values())]

    def one(key: str, chosen: list[Site]) -> None:
        tests = sorted({t for s in chosen for t in reached.get((s.path, s.function), [])})
        tree = trees.get()
        try:
            outcome = _try(project, environment, baseline, tree, chosen, key, tests)
        finally:
            trees.put(tree)
        if "+" not in key:  # a pair keeps every passing test until check_pair samples them
            _sample_passing(outcome, set(), random.Random(key))
        with lock:
            done[key] = outcome
            with record.open("a") as f:
                f.write(json.dumps(asdict(outcome)) + "\n")
            counts[0] += 1
            counts[1] += outcome.kept
            if progress:
                progress(counts[0], len(jobs), counts[1])

    if progress:
        progress(counts[0], len(jobs), counts[1])
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for future in [pool.submit(one, key, chosen) for key, chosen in todo]:
            future.result()
    while not trees.empty():
        shutil.rmtree(trees.get(), ignore_errors=True)
    return [done[key] for key, _ in jobs]


def pairs(
    kept: list[tuple[CandidateResult, Site]], seed: int, limit: int
) -> list[tuple[str, list[Site]]]:
    """Up to ``limit`` two-site jobs from kept one-site bugs in different functions."""
    rng = random.Random(f"swe-synth-pairs:{seed}")
    pool = kept[:]
    rng.shuffle(pool)
    jobs: list[tuple[str, list[Site]]] = []
    used: set[str] = set()
    for i, (a, site_a) in enumerate(pool):
        if len(jobs) >= limit:
            break
        if a.key in used:
            continue
        for b, site_b in pool[i + 1 :]:
            if b.key in used or (site_b.path, site_b.function) == (site_a.path, site_a.function):
                continue
            first, second = sorted([site_a, site_b], key=lambda s: s.key)
            jobs.append((f"{first.key}+{second.key}", [first, second]))
            used |= {a.key, b.key}
            break
    return jobs


def check_pair(outcome: CandidateResult, halves: list[CandidateResult]) -> CandidateResult:
    """A two-site bug is kept when both halves' failing tests are among what it checks (then
    restoring either site alone still fails a checked test)."""
    if not outcome.kept:
        return outcome
    every = set(outcome.fail_to_pass) | set(outcome.pass_to_pass)
    for half in halves:
        if not set(half.fail_to_pass) & every:
            outcome.status = "partial-fix-passes"
            return outcome
    must = {t for half in halves for t in half.fail_to_pass}
    _sample_passing(outcome, must, random.Random(outcome.key))
    return outcome
