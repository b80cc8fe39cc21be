"""Families whose workspace is a program in another language: C, Rust, Go, JavaScript.

A :class:`Toolchain` says which Debian packages a task's image installs (beside ``python3``,
which the checker needs), how the agent's program is built and how it is run. The toolchains
are the distribution's own (``gcc``, ``rustc``, ``golang-go``, ``nodejs``): on the local backend
the host's, which ``scripts/install-system-deps.sh`` installs; on Docker the image's.

:func:`program_test` writes the usual hidden test of such a family: build a private copy of
``/app`` as ``nobody`` (a build failure sets ``compile_error`` and errors every check), run the
program on fresh inputs made from the task's secret seed, and compare its standard output with
what the family's Python reference solver (in the hidden test, never in the workspace) prints.
The family supplies ``make_cases(rng) -> [(label, stdin, cpu_seconds or None)]`` and
``expected(stdin) -> stdout`` as Python source. A program that works on files rather than
standard input brings its own ``runner``: ``run_case(ck, work, label, case, cpu_seconds)`` (see
:data:`STDIN_RUNNER`), which runs the program built in ``work`` on one case and records checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from palaestra.tasks import outcomes
from palaestra.tasks.generators.base import (
    Files,
    GeneratedTask,
    python_test_sh,
    solve_sh_writing,
)


@dataclass(frozen=True)
class Toolchain:
    """How a language's program is built and run; ``build`` is None for interpreted ones."""

    packages: tuple[str, ...]
    source: str
    build: tuple[str, ...] | None
    run: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    @property
    def build_line(self) -> str:
        """The build command as the instruction shows it (run in ``/app``)."""
        return " ".join(self.build or self.run)


C = Toolchain(
    ("gcc", "libc6-dev"),
    "main.c",
    ("gcc", "-O2", "-std=c11", "-Wall", "-o", "prog", "main.c", "-lm"),
    ("./prog",),
)
RUST = Toolchain(
    ("rustc",),
    "main.rs",
    ("rustc", "-O", "--edition", "2021", "-o", "prog", "main.rs"),
    ("./prog",),
)
GO = Toolchain(
    ("golang-go",),
    "main.go",
    ("go", "build", "-o", "prog", "."),
    ("./prog",),
    # cgo off: pure Go needs no C compiler; never fetch a module or another Go release
    (("CGO_ENABLED", "0"), ("GOPROXY", "off"), ("GOTOOLCHAIN", "local")),
)
NODE = Toolchain(("nodejs",), "main.js", None, ("node", "main.js"))

#: What a program family's ``task.toml`` declares it reports.
REWARD_OUTCOMES = outcomes.GRADED + outcomes.IO

_TEST = r'''
import os
import random

from palaestra_check import Checker, copy_tree_for_child, private_dir, run_command

BUILD, RUN, ENV, SECRET = {build!r}, {run!r}, {env!r}, {secret}
{code}
{compare}


def lines(text):
    return [line.rstrip() for line in text.strip("\n").splitlines()]

{runner}


def build():
    """A private copy of /app, built as nobody: (directory, None) or (None, the error)."""
    work = copy_tree_for_child("/app", prefix="build-")
    if BUILD is None:
        return work, None
    cache = private_dir("cache-")
    env = dict(ENV, GOCACHE=os.path.join(cache, "go"), GOPATH=os.path.join(cache, "gopath"))
    res = run_command(list(BUILD), cwd=work, timeout=240, env=env)
    if not res.ok:
        return None, (res.stderr or res.stdout or res.error).strip()[-800:] or res.error
    return work, None


ck = Checker(kind="io")
cases = make_cases(random.Random(SECRET))
work, failure = build()
if failure is not None:
    ck.compile_errors.append(failure)
    print("BUILD FAILED " + failure)
for label, case, bar in cases:
    if work is None:
        ck.error(label, "the program did not build")
        continue
    run_case(ck, work, label, case, bar)
ck.finish()
'''

#: Hidden-test source: the ``run_case`` of a program that reads its case on standard input.
STDIN_RUNNER = r"""
def run_case(ck, work, label, stdin, bar):
    got = run_command(list(RUN), cwd=work, stdin=stdin, timeout=60, cpu_seconds=bar)
    if not got.ok:
        return ck.error(label, got.error)
    return compare(ck, label, lines(expected(stdin)), lines(got.stdout), "output line")
"""


#: Hidden-test source: ``compare(ck, label, want, have, what)`` checks two lists of lines (or
#: rows) and names the first that differs.
COMPARE = r"""
def compare(ck, label, want, have, what):
    bad = [i for i in range(max(len(want), len(have))) if want[i:i + 1] != have[i:i + 1]]
    detail = ""
    if bad:
        i = bad[0]
        detail = "{} {}: expected {!r}, got {!r} ({} of {} differ)".format(
            what, i + 1, want[i] if i < len(want) else None, have[i] if i < len(have) else None,
            len(bad), len(want))
    return ck.check(label, not bad, detail)
"""


def one_file_solutions(
    path: str, oracle: str, wrongs: Mapping[str, str], *, note: str
) -> tuple[Files, dict[str, Files]]:
    """The ``solution`` and ``wrong_solutions`` of a task whose answer is the file ``path``."""
    wrong = {
        name: {"solve.sh": solve_sh_writing({path: text}, note=f"wrong: {name}")}
        for name, text in wrongs.items()
    }
    return {"solve.sh": solve_sh_writing({path: oracle}, note=note)}, wrong


def program_test(
    toolchain: Toolchain, *, code: str, secret: int, runner: str = STDIN_RUNNER
) -> str:
    """The hidden test of a program family (see the module's docstring). ``code`` defines
    ``make_cases(rng)`` and what ``runner`` needs (``expected(stdin)`` for the default)."""
    return _TEST.format(
        build=toolchain.build,
        run=toolchain.run,
        env=dict(toolchain.env),
        secret=secret,
        code=code,
        compare=COMPARE,
        runner=runner,
    )


def program_task(
    toolchain: Toolchain,
    *,
    instruction: str,
    workspace: Files,
    cases: str,
    secret: int,
    solution: Files,
    wrong_solutions: Mapping[str, Files],
    tags: tuple[str, ...],
    runner: str = STDIN_RUNNER,
) -> GeneratedTask:
    """A program family's task: its hidden test is :func:`program_test` of ``cases`` (and
    ``runner``), its image installs ``toolchain``'s packages."""
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests={
            "test.sh": python_test_sh(timeout=400),
            "test_hidden.py": program_test(toolchain, code=cases, secret=secret, runner=runner),
        },
        solution=solution,
        wrong_solutions=wrong_solutions,
        tags=tags,
        verifier_timeout_sec=420.0,
        reward_outcomes=REWARD_OUTCOMES,
        packages=toolchain.packages,
    )
