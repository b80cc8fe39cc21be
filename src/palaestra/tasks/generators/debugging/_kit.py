"""Shared machinery of the debugging families: injected bugs and differential hidden tests.

A family writes its program *correct*, then describes each bug as exact edits of that source
(:class:`Bug`). The workspace gets the buggy edits, the reference solution is the correct source,
and the wrong solutions are built from the same edits: every bug fixed but one ("leaves-<bug>"),
or one bug "fixed" the plausible wrong way ("misfix-<bug>").

The hidden test is data run by the declarative harness (``harness_spec``): secret inputs drawn
now, and the correct program's results on them computed now (``host_run_python``: they are a
pure function of the inputs on any Python 3); :func:`call_tests` makes the ``tests/`` of a
family whose cases are calls of its package, in one child as ``nobody`` on a private copy of
``/app``, each case compared item by item (:func:`call_part`: the same, as a further part).
"""

from __future__ import annotations

import ast
import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import CHECK_MODULE, Files, solve_sh_writing

Edit = tuple[str, str]


@dataclass(frozen=True)
class Bug:
    """One injectable bug: ``edits`` turn the correct source of ``path`` into the buggy one;
    ``misfix`` edits (of the correct source) are a plausible fix that is still wrong."""

    name: str
    path: str
    edits: tuple[Edit, ...]
    misfix: tuple[Edit, ...]
    symptom: str
    visible_test: str = ""
    subtle: bool = False
    extra: Mapping[str, str] = field(default_factory=dict)


def _edit(files: dict[str, str], path: str, edits: tuple[Edit, ...], bug: str) -> None:
    text = files[path]
    for good, bad in edits:
        if text.count(good) != 1:
            raise AssertionError(f"bug {bug!r}: {good!r} occurs {text.count(good)}x in {path}")
        text = text.replace(good, bad)
    files[path] = text


def inject(
    correct: Mapping[str, str], bugs: list[Bug], misfix: Bug | None = None
) -> dict[str, str]:
    """The correct files with ``bugs`` injected (and ``misfix``'s wrong fix applied)."""
    files = dict(correct)
    for bug in bugs:
        _edit(files, bug.path, bug.edits, bug.name)
    if misfix is not None:
        _edit(files, misfix.path, misfix.misfix, misfix.name + " (misfix)")
    return files


def wrong_variants(correct: Mapping[str, str], bugs: list[Bug], rng) -> dict[str, dict[str, str]]:
    """Wrong solutions: leave one bug in (two of them, at most), misfix one bug (two at most)."""
    out: dict[str, dict[str, str]] = {}
    leave = rng.sample(bugs, min(2, len(bugs)))
    for bug in leave:
        out[f"leaves-{bug.name}"] = inject(correct, [bug])
    fixable = [b for b in bugs if b.misfix]
    for bug in rng.sample(fixable, min(2, len(fixable))):
        out[f"misfix-{bug.name}"] = inject(correct, [], misfix=bug)
    return out


def changed(files: Mapping[str, str], base: Mapping[str, str]) -> dict[str, str]:
    """Only the files of ``files`` that differ from ``base`` (what a solve.sh must write)."""
    return {p: t for p, t in files.items() if base.get(p) != t}


def bug_solutions(
    correct: Mapping[str, str], workspace: Mapping[str, str], wrongs: Mapping, *, note: str
) -> dict[str, object]:
    """``solution`` and ``wrong_solutions`` (GeneratedTask's keywords): each writes the files
    it changes in the workspace."""
    return {
        "solution": {"solve.sh": solve_sh_writing(changed(correct, workspace), note=note)},
        "wrong_solutions": {
            name: {"solve.sh": solve_sh_writing(changed(files, workspace), note=f"wrong: {name}")}
            for name, files in wrongs.items()
        },
    }


def choose_bugs(rng, pool: list[Bug], n_obvious: int, n_subtle: int) -> list[Bug]:
    obvious = [b for b in pool if not b.subtle]
    subtle = [b for b in pool if b.subtle]
    picked = rng.sample(obvious, n_obvious) + rng.sample(subtle, n_subtle)
    order = {b.name: i for i, b in enumerate(pool)}
    return sorted(picked, key=lambda b: order[b.name])


#: A driver of calls: INPUT is a list of cases, each a list of [module, function, args]; one
#: list of results a case is emitted, a call's result or the name of the exception it raised.
CALLS_DRIVER = r"""
import importlib
out = []
for calls in INPUT:
    results = []
    for mod, fn, args in calls:
        try:
            results.append(["ok", getattr(importlib.import_module(mod), fn)(*args)])
        except Exception as e:
            results.append(["raised", type(e).__name__])
    out.append(results)
emit(out)
"""


def _calls(
    correct: Mapping[str, str], driver: str, cases: Sequence[tuple[str, object]], what: str
) -> dict:
    inputs = [value for _, value in cases]
    wants = host_run_python(correct, driver, inputs, {})
    return {
        "answer": hs.python_call(driver, inputs),
        "cases": [hs.Case(label, want=want) for (label, _), want in zip(cases, wants, strict=True)],
        "compare": hs.compare("items", what=what),
    }


def call_tests(
    correct: Mapping[str, str],
    driver: str,
    cases: Sequence[tuple[str, object]],
    *,
    what: str = "case",
    timeout: float = 60,
) -> Files:
    """The ``tests/`` of a hidden test that calls the package: ``cases`` are ``(label, input)``;
    ``driver`` (``INPUT``: the inputs) emits one list of results a case, run once as nobody on
    a private copy of /app. The expected results are the correct program's, computed now; a
    case is one check, its detail the first differing result (``what``)."""
    spec = _calls(correct, driver, cases, what)
    return hs.tests(**spec, limits=hs.limits(timeout=timeout), timeout=100)


def call_part(
    correct: Mapping[str, str],
    driver: str,
    cases: Sequence[tuple[str, object]],
    *,
    what: str = "case",
    timeout: float = 60,
) -> dict:
    """:func:`call_tests` as a further part of a test (``hs.tests(also=...)``)."""
    return hs.part(**_calls(correct, driver, cases, what), limits=hs.limits(timeout=timeout))


@functools.cache
def _child_prelude() -> str:
    """What ``palaestra_check.run_python`` puts before a child's code (``INPUT``, ``emit``),
    read from the runtime's source: it runs in a sandbox and cannot be imported here."""
    for node in ast.parse(CHECK_MODULE.read_text()).body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_CHILD":
            return ast.literal_eval(node.value)
    raise LookupError(f"no _CHILD in {CHECK_MODULE}")


def write_tree(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def placed(value: object, paths: Mapping[str, str]) -> object:
    """``value`` (JSON) with each string that names a file of ``paths`` replaced by its path."""
    if isinstance(value, list):
        return [placed(v, paths) for v in value]
    return paths.get(value, value) if isinstance(value, str) else value


def _scratch(tmp: str, program: Mapping[str, str], files: Mapping[str, str]):
    root = Path(tmp) / "root"
    write_tree(root, program)
    write_tree(Path(tmp) / "data", files)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": tmp,
        "TMPDIR": tmp,  # what the reference makes with tempfile goes with the directory
    }
    return root, {name: str(Path(tmp) / "data" / name) for name in files}, env


def host_run_python(
    program: Mapping[str, str], code: str, input_value: object, files: Mapping[str, str]
) -> object:
    """What ``run_python(code, placed(input_value), cwd=<program>)`` emits in the checker, run
    now on this interpreter (``sys.executable -I -B``) in a scratch copy of ``program``, the
    ``files`` beside it: the reference's outputs, computed when the task is generated."""
    with tempfile.TemporaryDirectory(prefix="palaestra-ref-") as tmp:
        root, paths, env = _scratch(tmp, program, files)
        (Path(tmp) / "input.json").write_text(json.dumps(placed(input_value, paths)))
        argv = [sys.executable, "-I", "-B", "-c", _child_prelude() + "\n" + code]
        argv += [str(Path(tmp) / "input.json"), str(Path(tmp) / "output.json"), str(root)]
        run = subprocess.run(argv, cwd=root, env=env, capture_output=True, timeout=120)
        if run.returncode != 0:
            raise RuntimeError(f"reference driver failed: {run.stderr.decode()[-2000:]}")
        return json.loads((Path(tmp) / "output.json").read_text())["value"]


def host_run_module(
    program: Mapping[str, str],
    module: str,
    argv: Sequence[str],
    files: Mapping[str, str],
    read: Sequence[str] = (),
) -> tuple[int, str, dict[str, str | None]]:
    """(exit status, stdout, {name: text, None if absent}) of ``python3 -B -m module
    placed(argv)`` run now in a scratch copy of ``program``, the ``files`` beside it; ``read``
    names the files it writes (relative to the same directory) to return."""
    with tempfile.TemporaryDirectory(prefix="palaestra-ref-") as tmp:
        root, paths, env = _scratch(tmp, program, files)
        data = Path(tmp) / "data"
        for name in read:
            paths.setdefault(name.split("/")[0], str(data / name.split("/")[0]))
        run = subprocess.run(
            [sys.executable, "-E", "-s", "-B", "-m", module, *placed(list(argv), paths)],
            cwd=root, env=env, capture_output=True, timeout=120,
        )  # fmt: skip
        written = {}
        for name in read:
            path = data / name
            written[name] = path.read_text() if path.is_file() else None  # as the checker reads
        return run.returncode, run.stdout.decode("utf-8", "replace"), written
