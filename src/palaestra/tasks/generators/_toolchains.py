"""Families whose workspace is a program in another language: C, Rust, Go, JavaScript.

A :class:`Toolchain` says which Debian packages a task's image installs (beside ``python3``,
which the checker needs), how the agent's program is built and how it is run. The toolchains
are the distribution's own (``gcc``, ``rustc``, ``golang-go``, ``nodejs``): on the local backend
the host's, which ``scripts/install-system-deps.sh`` installs; on Docker the image's.

:func:`program_test` writes the usual hidden test of such a family: build a private copy of
``/app`` as ``nobody`` (a build failure sets ``compile_error`` and errors every check), run the
program on inputs made from the task's secret seed, and compare its standard output with what
the family's Python reference solver prints. The family supplies
``make_cases(rng) -> [(label, stdin, cpu_seconds or None)]`` and ``expected(stdin) -> stdout``
as Python source; the generator runs them once (:func:`precomputed_cases`) and ships inputs and
expected outputs in ``tests/precomputed.bin`` (never in the workspace), or, for inputs too large
to ship, digests, and the hidden test makes those inputs again from the secret. A program that
works on files rather than standard input brings its own ``runner``: ``run_case(ck, work,
label, case, cpu_seconds)`` (see :data:`STDIN_RUNNER`), which runs the program built in
``work`` on one case and records checks. :func:`stdin_tests` is the same test on the
declarative harness (``harness_spec``): ``range-queries-c`` is on it.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass

from palaestra.tasks import outcomes
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import (
    PRECOMPUTED,
    Files,
    GeneratedTask,
    precomputed,
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
    # -O is opt-level 2 either way; one codegen unit and no debug info linked in from std cost
    # about 40 % less CPU than rustc's defaults (16 units, std's debug info), at every verify
    ("rustc", "-O", "-C", "codegen-units=1", "-C", "strip=debuginfo", "--edition", "2021",
     "-o", "prog", "main.rs"),
    ("./prog",),
)  # fmt: skip
GO = Toolchain(
    ("golang-go",),
    "main.go",
    ("go", "build", "-o", "prog", "."),
    ("./prog",),
    # cgo off: pure Go needs no C compiler; never fetch a module or another Go release; one
    # thread (the same program, ~15 % less CPU: the go command's idle threads spin)
    (("CGO_ENABLED", "0"), ("GOPROXY", "off"), ("GOTOOLCHAIN", "local"), ("GOMAXPROCS", "1")),
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
cases = {cases}
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
#: Its cases come from ``tests/precomputed.bin`` (see :func:`precomputed_cases`): ``case`` is
#: ``(stdin, want)``, ``want`` the expected output's lines or, for inputs too large to ship,
#: the digests of the input and of the expected output; a digest that differs (a wrong output,
#: or an input this Python made otherwise) falls back to the reference, which decides.
STDIN_RUNNER = r"""
from palaestra_check import precomputed


def shipped_cases():
    rows, fresh, cases = precomputed(), None, []
    for i, (label, stdin, bar, want) in enumerate(rows):
        if stdin is None:  # too large to ship: made again from the secret
            if fresh is None:
                fresh = make_cases(random.Random(SECRET))
            stdin = fresh[i][1]
        cases.append((label, (stdin, want), bar))
    return cases


def digest(text):
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def run_case(ck, work, label, case, bar):
    stdin, want = case
    got = run_command(list(RUN), cwd=work, stdin=stdin, timeout=60, cpu_seconds=bar)
    if not got.ok:
        return ck.error(label, got.error)
    have = lines(got.stdout)
    if isinstance(want, tuple):
        if want == (digest(stdin), digest("\n".join(have))):
            return ck.check(label, True)
        want = lines(expected(stdin))
    return compare(ck, label, want, have, "output line")
"""

#: Above this many characters of inputs and expected outputs, a task's cases are made again
#: in the hidden test and only digests are shipped (``tests/precomputed.bin`` stays small).
SHIP_LIMIT = 256 * 1024


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
    ``make_cases(rng)`` and what ``runner`` needs (``expected(stdin)`` for the default, whose
    cases come from :func:`precomputed_cases`)."""
    return _TEST.format(
        build=toolchain.build,
        run=toolchain.run,
        env=dict(toolchain.env),
        secret=secret,
        code=code,
        compare=COMPARE,
        runner=runner,
        cases="shipped_cases()" if runner == STDIN_RUNNER else "make_cases(random.Random(SECRET))",
    )


def _lines(text: str) -> list[str]:
    """The hidden test's ``lines``: what its comparison sees of an output."""
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def precomputed_cases(code: str, secret: int) -> list[tuple[str, str | None, object, object]]:
    """The cases of :data:`STDIN_RUNNER`, made at generation time as the hidden test used to
    make them: ``(label, stdin, bar, expected lines)`` each; when they come to more than
    :data:`SHIP_LIMIT` characters, ``(label, None, bar, (digest of stdin, digest of the
    expected lines))`` and the hidden test makes the inputs again from the secret."""
    scope: dict = {}
    exec(code, scope)
    rows = [
        (label, stdin, bar, _lines(scope["expected"](stdin)))
        for label, stdin, bar in scope["make_cases"](random.Random(secret))
    ]
    if sum(len(stdin) + sum(map(len, want)) for _, stdin, _, want in rows) <= SHIP_LIMIT:
        return rows
    return [
        (label, None, bar, (_digest(stdin), _digest("\n".join(want))))
        for label, stdin, bar, want in rows
    ]


def stdin_tests(toolchain: Toolchain, *, code: str, secret: int) -> dict[str, str | bytes]:
    """The declarative hidden test (``harness_spec``) of a program that reads its case on
    standard input: ``code`` (shipped as ``tests/program_inputs.py``) defines
    ``make_cases(rng)``, ``expected(stdin)`` and ``case_input(rng, index)`` (case ``index``'s
    input, ``make_cases`` run once a seed). The cases drawn from ``secret`` ship with the
    reference's output lines, made now; above :data:`SHIP_LIMIT` characters, every input is
    made again in the checker and its expected output travels as a digest, the reference
    deciding should the checker's Python make other data."""
    scope: dict = {}
    exec(code, scope)
    rows = [
        (label, stdin, bar, _lines(scope["expected"](stdin)))
        for label, stdin, bar in scope["make_cases"](random.Random(secret))
    ]
    ship = sum(len(stdin) + sum(map(len, want)) for _, stdin, _, want in rows) <= SHIP_LIMIT
    cases = []
    for k, (label, stdin, bar, want) in enumerate(rows):
        if ship:
            cases.append(hs.Case(label, stdin=stdin, cpu=bar, want={"lines": want}))
            continue
        digest = {"lines_sha256": hs.digest({"": "\n".join(want)}), "count": len(want)}
        made = hs.made("program_inputs", "case_input", secret, [k], stdin)
        cases.append(hs.Case(label, make=made, cpu=bar, want=digest))
    return hs.tests(
        answer=hs.program(toolchain.run, build=toolchain.build, build_env=dict(toolchain.env)),
        cases=cases,
        compare=hs.compare("lines"),
        kind="io",
        reference={"module": "program_inputs", "fn": "expected"},
        modules={"program_inputs.py": code},
        timeout=400,
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
    tests: dict[str, str | bytes] = {
        "test.sh": python_test_sh(timeout=400),
        "test_hidden.py": program_test(toolchain, code=cases, secret=secret, runner=runner),
    }
    if runner == STDIN_RUNNER:
        tests[PRECOMPUTED] = precomputed(precomputed_cases(cases, secret))
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=tests,
        solution=solution,
        wrong_solutions=wrong_solutions,
        tags=tags,
        verifier_timeout_sec=420.0,
        reward_outcomes=REWARD_OUTCOMES,
        packages=toolchain.packages,
    )
