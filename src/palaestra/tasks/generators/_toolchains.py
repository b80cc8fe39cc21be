"""Families whose workspace is a program in another language: C, Rust, Go, JavaScript.

A :class:`Toolchain` says which Debian packages a task's image installs (beside ``python3``,
which the checker needs), how the agent's program is built and how it is run. The toolchains
are the distribution's own (``gcc``, ``rustc``, ``golang-go``, ``nodejs``): on the local backend
the host's, which ``scripts/install-system-deps.sh`` installs; on Docker the image's.

:func:`stdin_tests` writes the usual hidden test of such a family on the declarative harness
(``harness_spec``): build a private copy of ``/app`` as ``nobody`` (a build failure is a compile
error), run the program on inputs made from the task's secret seed, and compare its standard
output with what the family's Python reference prints. The family supplies
``make_cases(rng) -> [(label, stdin, cpu_seconds or None)]``, ``expected(stdin) -> stdout`` and
``case_input(rng, index)`` as Python source; the generator runs them once and ships inputs and
expected outputs in ``tests/harness.bin`` (never in the workspace), or, for inputs too large to
ship, digests, and the checker makes those inputs again from the secret. A program that works
on files rather than standard input describes its cases with ``harness_spec`` directly
(``log-rotate-js``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from palaestra.tasks import outcomes
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import Files, solve_sh_writing


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


#: Above this many characters of inputs and expected outputs, a task's cases are made again
#: in the hidden test and only digests are shipped (``tests/precomputed.bin`` stays small).
SHIP_LIMIT = 256 * 1024


def one_file_solutions(
    path: str, oracle: str, wrongs: Mapping[str, str], *, note: str
) -> tuple[Files, dict[str, Files]]:
    """The ``solution`` and ``wrong_solutions`` of a task whose answer is the file ``path``."""
    wrong = {
        name: {"solve.sh": solve_sh_writing({path: text}, note=f"wrong: {name}")}
        for name, text in wrongs.items()
    }
    return {"solve.sh": solve_sh_writing({path: oracle}, note=note)}, wrong


def _lines(text: str) -> list[str]:
    """The hidden test's ``lines``: what its comparison sees of an output."""
    return [line.rstrip() for line in text.strip("\n").splitlines()]


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
