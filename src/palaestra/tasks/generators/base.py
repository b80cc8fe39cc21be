"""The generator contract: ``(seed, difficulty) -> GeneratedTask``, a complete Harbor task.

A *family* is one kind of problem (merge intervals, a SQLite report, a buggy package...). Its
generator is a plain function decorated with :func:`family`; it gets a :class:`GenSpec` (the seed,
the difficulty in [0, 1], its tier and a seeded ``random.Random``) and returns a
:class:`GeneratedTask`: instruction, workspace files, hidden tests, the reference solution and
at least three plausible wrong solutions. :func:`write_task` lays it out as a Harbor directory::

    task.toml, instruction.md
    environment/Dockerfile, environment/workspace/...   (copied to /app)
    tests/test.sh, tests/palaestra_check.py, tests/...  (uploaded only at verification)
    solution/solve.sh, solution/...                     (what the oracle runs)
    wrong_solutions/<name>/solve.sh, ...                (what `palaestra tasks check` runs)

Rules every family follows (``tests/tasks/test_generators.py`` enforces the measurable ones):

* Same ``(family, seed, difficulty)``, byte-identical task: draw every random choice from
  ``spec.rng`` and never iterate a ``set`` of strings (its order changes between processes).
* Difficulty changes the problem (size, number and subtlety of bugs, constraints, performance
  bars), not only its wording.
* Hidden tests are randomised per task from ``spec.rng`` (not derivable from the workspace),
  check behaviour rather than strings, run the agent's code in a child process and compare in
  the verifier, and trust no file the agent could have planted.
* The verifier writes ``reward.json`` through ``palaestra_check.py``: ``reward`` is 1.0 only
  when every check passes; ``partial`` (the fraction of checks passed) is there for shaping.
* Every wrong solution must score 0: the verifier's strength is measured, not assumed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import marshal
import math
import os
import py_compile
import random
import shlex
import shutil
import sys
import tempfile
import textwrap
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from palaestra.tasks import outcomes
from palaestra.tasks.generators._armed import RUNTIME as ATTACK_RUNTIME
from palaestra.tasks.generators._armed import armed

Tier = Literal["easy", "medium", "hard"]
TIERS: tuple[Tier, ...] = ("easy", "medium", "hard")
CATEGORIES = (
    "algorithms",
    "data-querying",
    "debugging",
    "file-operations",
    "optimization",
    "software-engineering",
)
#: Tier ranges of the difficulty float: easy [0, 1/3), medium [1/3, 2/3), hard [2/3, 1].
TIER_RANGES: dict[Tier, tuple[float, float]] = {
    "easy": (0.0, 1 / 3),
    "medium": (1 / 3, 2 / 3),
    "hard": (2 / 3, 1.0),
}

Files = Mapping[str, str | bytes]
"""Relative path -> content. A ``str`` is written as UTF-8; a path ending in ``.sh`` is made
executable."""

CHECK_MODULE = Path(__file__).with_name("palaestra_check.py")
#: The hidden tests' runtime, shipped in every generated task's ``tests/``: the checker, the
#: fork server of its Python children (its checker's end, its own code), the jail of every run
#: of agent code, and the launcher test.sh runs the checker with.
CHECK_RUNTIME = (
    CHECK_MODULE,
    *(
        CHECK_MODULE.with_name(n)
        for n in (
            "palaestra_fork.py",
            "palaestra_jail.py",
            "palaestra_zygote.py",
            "palaestra_launch.py",
            "palaestra_budget.py",
        )
    ),
)


#: The declarative hidden test (``harness_spec`` builds its spec, the two others run it in
#: ``tests/``): part of every generator's version, shipped by the tasks that use it.
HARNESS_FILES = tuple(
    CHECK_MODULE.with_name(n)
    for n in (
        "harness_spec.py",
        "palaestra_harness.py",
        "palaestra_cases.py",
        "palaestra_compare.py",
        "palaestra_pg.py",
    )
)


def check_runtime_files() -> dict[str, str]:
    """``tests/`` file name -> content of :data:`CHECK_RUNTIME`."""
    return {path.name: path.read_text() for path in CHECK_RUNTIME}


#: The ``tests/`` file that :func:`precomputed` values travel in.
PRECOMPUTED = "precomputed.bin"


def precomputed(value: object) -> bytes:
    """``value`` as the hidden test's ``palaestra_check.precomputed()`` returns it: put the
    bytes in ``tests/`` as :data:`PRECOMPUTED`.

    For what the checker would otherwise compute at every verification from the task's
    secret (inputs, the reference's outputs): computed once when the task is generated, it
    costs nothing per episode, and ``tests/`` is never in the sandbox before verification.
    ``value`` is made of ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, lists,
    tuples and dicts; marshal format 2 (no back-references: equal values give equal bytes,
    and any Python 3 reads it), zlib-compressed.
    """
    return zlib.compress(marshal.dumps(value, 2), 6)


def tier_of(difficulty: float) -> Tier:
    """The tier a difficulty falls in."""
    check_difficulty(difficulty)
    if difficulty < TIER_RANGES["medium"][0]:
        return "easy"
    if difficulty < TIER_RANGES["hard"][0]:
        return "medium"
    return "hard"


def check_difficulty(difficulty: float) -> float:
    if not isinstance(difficulty, int | float) or not 0.0 <= difficulty <= 1.0:
        raise ValueError(
            f"difficulty must be a number in [0, 1], got {difficulty!r}; tiers are "
            "easy [0, 0.33), medium [0.33, 0.67), hard [0.67, 1]"
        )
    return float(difficulty)


def quantise(difficulty: float) -> float:
    """Difficulties are kept to two decimals, so task ids stay short and round-trip exactly."""
    return round(check_difficulty(difficulty), 2)


@dataclass(frozen=True)
class GenSpec:
    """What a generator is asked for. ``rng`` is seeded from family, seed and difficulty."""

    family: str
    seed: int
    difficulty: float
    rng: random.Random = field(repr=False, compare=False)

    @property
    def tier(self) -> Tier:
        return tier_of(self.difficulty)

    def scale(self, low: float, high: float) -> float:
        """Interpolate a knob from ``low`` (difficulty 0) to ``high`` (difficulty 1)."""
        return low + (high - low) * self.difficulty

    def iscale(self, low: int, high: int) -> int:
        """An integer knob from ``low`` (difficulty 0) to ``high`` (difficulty 1), inclusive."""
        return int(math.floor(low + (high - low) * self.difficulty + 0.5))


@dataclass(frozen=True)
class GeneratedTask:
    """A complete task, before it is written to disk.

    ``tests`` must hold ``test.sh`` (use :func:`python_test_sh` for the usual case) and
    ``solution`` must hold ``solve.sh``; each wrong solution too. ``workspace`` becomes ``/app``.
    """

    instruction: str
    workspace: Files
    tests: Files
    solution: Files
    wrong_solutions: Mapping[str, Files]
    tags: tuple[str, ...] = ()
    agent_timeout_sec: float = 600.0
    verifier_timeout_sec: float = 120.0
    cpus: int = 1
    memory_mb: int = 2048
    storage_mb: int = 10240
    reward_outcomes: tuple[str, ...] = ()
    """The per-test outcome keys its tests report (:mod:`palaestra.tasks.outcomes`), written
    to ``task.toml``; only keys its checks really classify."""
    packages: tuple[str, ...] = ()
    """Debian packages its image installs beside ``python3`` (a compiler, a database server):
    the Dockerfile's ``apt-get install``, which the local backend finds on the host."""


@dataclass(frozen=True)
class Family:
    """A registered generator family."""

    name: str
    category: str
    summary: str
    generate_fn: Callable[[GenSpec], GeneratedTask] = field(repr=False)
    version: str = ""

    def spec(self, seed: int, difficulty: float) -> GenSpec:
        difficulty = quantise(difficulty)
        if not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        rng = random.Random(f"palaestra/{self.name}/{seed}/{difficulty:.2f}")
        return GenSpec(family=self.name, seed=seed, difficulty=difficulty, rng=rng)

    def generate(self, seed: int, difficulty: float) -> GeneratedTask:
        spec = self.spec(seed, difficulty)
        task = armed(self.generate_fn(spec), self.category)  # issue 29's attacks, where they apply
        _validate(self, spec, task)
        return task

    def task_id(self, seed: int, difficulty: float) -> str:
        return task_id(self.name, seed, difficulty)


def task_id(family: str, seed: int, difficulty: float) -> str:
    """``<family>-d<difficulty x 100>-s<seed>``: ``merge-intervals-d035-s12``."""
    return f"{family}-d{round(quantise(difficulty) * 100):03d}-s{seed}"


def _validate(fam: Family, spec: GenSpec, task: GeneratedTask) -> None:
    where = f"generator {fam.name!r} (seed={spec.seed}, difficulty={spec.difficulty})"
    if "test.sh" not in task.tests:
        raise ValueError(f"{where}: tests have no test.sh")
    if "solve.sh" not in task.solution:
        raise ValueError(f"{where}: the solution has no solve.sh")
    if len(task.wrong_solutions) < 3:
        raise ValueError(
            f"{where}: needs at least 3 wrong solutions, has {len(task.wrong_solutions)}"
        )
    for name, files in task.wrong_solutions.items():
        if "solve.sh" not in files:
            raise ValueError(f"{where}: wrong solution {name!r} has no solve.sh")
    if not task.instruction.strip():
        raise ValueError(f"{where}: empty instruction")
    unknown = sorted(set(task.reward_outcomes) - set(outcomes.ALL))
    if unknown:
        raise ValueError(
            f"{where}: unknown reward outcomes {unknown}; see palaestra.tasks.outcomes"
        )


def module_version(fn: Callable[..., object]) -> str:
    """A short hash of a generator's module source, the private helpers of its category package
    (``_kit.py`` and the like) and this contract: the cache key part that changes whenever the
    generator could produce different bytes."""
    module = inspect.getmodule(fn)
    source = inspect.getsource(module) if module else inspect.getsource(fn)
    digest = hashlib.sha256(source.encode())
    if module is not None and module.__file__:
        for helper in sorted(Path(module.__file__).parent.glob("_*.py")):
            digest.update(helper.read_bytes())
    for helper in sorted(Path(__file__).parent.glob("_[a-z]*.py")):  # shared: _toolchains.py
        digest.update(helper.read_bytes())
    digest.update(Path(__file__).read_bytes())
    for runtime in (*CHECK_RUNTIME, *HARNESS_FILES, ATTACK_RUNTIME):
        digest.update(runtime.read_bytes())
    return digest.hexdigest()[:12]


_DOCKERFILE = """\
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends {packages} \\
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY workspace/ /app/
"""


def render_dockerfile(packages: tuple[str, ...] = ()) -> str:
    """The task image: ``debian:bookworm-slim`` with python3 (the checker's) and ``packages``."""
    return _DOCKERFILE.format(packages=" ".join(("python3", *packages)))


DOCKERFILE = render_dockerfile()
"""The image of a task that needs nothing but Python."""


def render_task_toml(fam: Family, spec: GenSpec, task: GeneratedTask) -> str:
    tags = ", ".join(f'"{t}"' for t in ("generated", fam.name, *task.tags))
    outcomes = ", ".join(f'"{k}"' for k in task.reward_outcomes)
    return textwrap.dedent(
        f"""\
        version = "1.0"

        [metadata]
        author_name = "palaestra generator {fam.name}"
        category = "{fam.category}"
        difficulty = "{spec.tier}"
        tags = [{tags}]
        family = "{fam.name}"
        seed = {spec.seed}
        difficulty_value = {spec.difficulty:.2f}
        generator_version = "{fam.version}"
        reward_outcomes = [{outcomes}]
        sealed_system = true

        [verifier]
        timeout_sec = {task.verifier_timeout_sec:.1f}

        [agent]
        timeout_sec = {task.agent_timeout_sec:.1f}

        [environment]
        network_mode = "no-network"
        build_timeout_sec = 600.0
        cpus = {task.cpus}
        memory_mb = {task.memory_mb}
        storage_mb = {task.storage_mb}
        """
    )


def write_task(fam: Family, spec: GenSpec, task: GeneratedTask, dest: Path) -> Path:
    """Write ``task`` as a Harbor task directory at ``dest`` (which must not exist yet)."""
    dest.mkdir(parents=True)
    _write(dest / "task.toml", render_task_toml(fam, spec, task))
    _write(dest / "instruction.md", task.instruction.rstrip() + "\n")
    _write(dest / "environment" / "Dockerfile", render_dockerfile(task.packages))
    (dest / "environment" / "workspace").mkdir(parents=True)
    _write_files(dest / "environment" / "workspace", task.workspace)
    _write_files(dest / "tests", {**check_runtime_files(), **task.tests})
    write_bytecode(dest / "tests")
    _write_files(dest / "solution", task.solution)
    for name in sorted(task.wrong_solutions):
        _write_files(dest / "wrong_solutions" / name, task.wrong_solutions[name])
    return dest


def write_atomically(dest: Path, write: Callable[[Path], object]) -> Path:
    """Create directory ``dest`` by ``write(tmp)`` then a rename, unless it exists: concurrent
    processes asking for the same cached task never see a half-written directory."""
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        write(tmp / dest.name)
        try:
            (tmp / dest.name).rename(dest)
        except OSError:  # another process won the race: its copy is identical
            if not dest.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _write_files(root: Path, files: Files) -> None:
    for rel in sorted(files):
        path = root / rel
        if path.resolve().is_relative_to(root.resolve()) is False or os.path.isabs(rel):
            raise ValueError(f"file path {rel!r} leaves {root}")
        _write(path, files[rel])


def write_bytecode(tests: Path) -> None:
    """Compile the Python files at the top of ``tests`` to ``tests/__pycache__``, for this
    interpreter's version: a checker of the same version (the task image's python3 is
    bookworm's 3.11) imports them instead of compiling ~40 KB of source at every verification
    (~10 ms of CPU). The bytecode is hash-checked: it is used only while its source is
    byte-identical, else the source is compiled as before. Never optimised: ``-O`` would drop
    the checker's ``assert`` statements."""
    if sys.implementation.cache_tag is None:  # an interpreter that caches no bytecode
        return
    for path in sorted(tests.glob("*.py")):
        py_compile.compile(
            str(path),
            cfile=importlib.util.cache_from_source(str(path), optimization=""),
            dfile=f"/tests/{path.name}",  # the path it runs at (no cache path in the bytes)
            doraise=True,
            optimize=0,
            invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
        )


def _write(path: Path, content: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    if path.suffix == ".sh":
        path.chmod(0o755)


def python_test_sh(script: str = "test_hidden.py", timeout: int = 100) -> str:
    """The usual ``test.sh``: run a hidden Python checker that writes ``reward.json``. POSIX
    ``sh`` (no ``env`` and ``bash`` to start at every verification).

    If the checker crashes or times out before writing a reward, the task gets reward 0 with the
    reason in the output (an agent that breaks the workspace fails; it is not a verifier error).
    """
    return textwrap.dedent(
        f"""\
        #!/bin/sh
        # Hidden verifier: {script} runs the agent's code in child processes and writes
        # /logs/verifier/reward.json ({{"reward": 0|1, "partial": fraction of checks passed}}).
        # The agent's code runs as nobody: it can neither read /tests (the reference) nor
        # write /logs/verifier (palaestra_check makes both root's, and removes an old reward,
        # when imported). The checker's interpreter is named by its path, not found on PATH;
        # it needs nothing but the standard library (-S: no site-packages, no .pth files).
        # palaestra_launch runs it after forking the server of its children (palaestra_fork),
        # and ends it after {timeout} s (an alarm: no timeout process to start).
        cd /tests
        for python in /usr/local/bin/python3 /usr/bin/python3; do [ -x "$python" ] && break; done
        "$python" -E -s -S -B /tests/palaestra_launch.py --alarm {timeout} /tests/{shlex.quote(script)}
        status=$?
        if [ "$status" -eq 142 ]; then echo "the checker ran out of its {timeout} s (SIGALRM)"; fi
        if [ "$status" -ne 0 ] || [ ! -s /logs/verifier/reward.json ]; then
          echo "checker exited with status $status before writing a reward: reward 0"
          mkdir -p /logs/verifier
          echo '{{"reward": 0.0, "partial": 0.0}}' > /logs/verifier/reward.json
        fi
        exit 0
        """
    )


def solve_sh_writing(files: Files, *, note: str) -> str:
    """A ``solve.sh`` that writes ``files`` (paths relative to /app) verbatim: the usual shape of
    a reference or wrong solution. ``note`` is a comment saying what the solution does."""
    lines = ["#!/usr/bin/env bash", f"# {note}", "set -euo pipefail", "cd /app"]
    for i, rel in enumerate(sorted(files)):
        content = files[rel]
        text = content.decode() if isinstance(content, bytes) else content
        marker = f"PALAESTRA_EOF_{i}"
        while marker in text:
            marker += "_"
        lines.append(f'mkdir -p "$(dirname {shlex.quote(rel)})"')
        lines.append(f"cat > {shlex.quote(rel)} <<'{marker}'")
        lines.append(text.rstrip("\n"))
        lines.append(marker)
    return "\n".join(lines) + "\n"
