"""The host side of the declarative hidden test: a family describes its test as data, and
``palaestra_harness.py`` (shipped in the task's ``tests/``) runs it. Nothing of the test is
assembled from source text.

    from palaestra.tasks.generators import harness_spec as hs
    tests = hs.tests(
        answer=hs.program(["python3", "{app}/report.py", "{in}/logs"], require="/app/report.py"),
        cases=[hs.Case("log set 1", files={"logs/a.jsonl": text}, want=report)],
        compare=hs.compare("json_keys", tol=1e-4, ...),
        limits=hs.limits(timeout=60, cpu=10),
    )

:class:`Case` values are computed now, when the task is generated (run the reference here);
an input too large to ship is :func:`made` again in the checker from a seed, by a module the
task ships in ``tests/``, and checked against its digest. :func:`tests` returns the task's
``tests/`` files: ``test.sh``, the harness and ``harness.bin`` (the spec). :func:`task` builds
the whole :class:`GeneratedTask` of a family whose answer is one file: the reference and the
wrong solutions are plain texts of that file.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palaestra.tasks.generators.base import (
    Files,
    GeneratedTask,
    precomputed,
    python_test_sh,
    solve_sh_writing,
)

#: What a harness task ships in ``tests/`` beside ``palaestra_check.py`` and its fork server.
HARNESS_RUNTIME = tuple(
    Path(__file__).with_name(name)
    for name in (
        "palaestra_harness.py",
        "palaestra_cases.py",
        "palaestra_compare.py",
        "palaestra_pg.py",
        "palaestra_calls.py",
    )
)
#: Shipped only to the tasks whose answer kind needs them.
_RUNTIME_OF = {"palaestra_pg.py": "postgres", "palaestra_calls.py": "check"}
SPEC = "harness.bin"
ANSWERS = ("program", "python", "sqlite", "postgres", "state", "check")
COMPARISONS = (
    *("output", "lines", "json_keys", "csv", "rows", "equal", "items", "files", "function"),
    *("path", "tree", "each", "kept", "status", "paths"),
)


def digest(files: Mapping[str, str | bytes]) -> str:
    """SHA-256 of named texts, as the harness computes it."""
    h = hashlib.sha256()
    for name in sorted(files):
        data = files[name]
        if not isinstance(data, (str, bytes)):
            data = repr(data)  # a made Python call's input: lists, ints, strs
        data = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
        h.update(f"{name}\0{len(data)}\0".encode() + data)
    return h.hexdigest()


def lines(text: str) -> list[str]:
    """What the ``lines`` comparison sees of an output: its lines, right-stripped."""
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def tree_of(root: str | Path) -> dict[str, list[str]]:
    """What the checker's ``read_tree`` reads of a folder (a ``tree`` comparison's expected
    value, made now from the reference's output): ``{path: ["file", text] | ["dir"] |
    ["link", its text] | ["other"]}``, never through a link."""
    import os

    out: dict[str, list[str]] = {}
    for here, dirs, names in os.walk(root):
        for name in sorted(dirs + names):
            path = os.path.join(here, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                out[rel] = ["link", os.readlink(path)]
            elif name in dirs:
                out[rel] = ["dir"]
            elif os.path.isfile(path):
                out[rel] = ["file", Path(path).read_bytes().decode("utf-8", "replace")]
            else:
                out[rel] = ["other"]
    return out


@dataclass(frozen=True)
class Case:
    """One check of the answer: its input and its expected value.

    ``files`` (path in the case directory -> text or bytes) and ``stdin`` feed a program;
    ``db`` is an SQLite database's bytes, ``load`` the SQL that loads a PostgreSQL case;
    ``make`` (see :func:`made`) stands for ``files`` or ``stdin`` too large to ship; ``cpu``
    is a CPU bar over the run's process tree (seconds); ``want`` the expected value, in the
    comparison's terms. ``by_reference`` (a Python answer's case): the expected value is what
    the answer's code emits for it run on the ``reference``'s files in the checker, first,
    for a value only the checker's Python can make (argparse's words). ``path`` (a
    :func:`state` answer's case): the absolute path it looks at. ``tree`` (a program's case):
    what ``files`` cannot say of its input tree, ``{"dirs": [empty folders], "hardlinks":
    {path: an input file's path}, "symlinks": {path: the link's text}, "modes": {path:
    permission bits}}``, made root's too; ``args`` (a program's case): arguments after its
    ``argv`` (``{in}`` the case directory), such as a case's limits.
    """

    label: str
    want: object = None
    files: Mapping[str, str | bytes] | None = None
    stdin: str | None = None
    cpu: int | None = None
    make: Mapping[str, object] | None = None
    db: bytes | None = None
    load: str | None = None
    by_reference: bool | None = None
    path: str | None = None
    tree: Mapping[str, object] | None = None
    args: Sequence[str] | None = None

    def data(self) -> dict:
        out = {"label": self.label, "want": self.want}
        for key in (
            "files",
            "stdin",
            "cpu",
            "make",
            "db",
            "load",
            "by_reference",
            "path",
            "tree",
            "args",
        ):
            value = getattr(self, key)
            if value is not None:
                out[key] = dict(value) if isinstance(value, Mapping) else value
        if self.args is not None:
            out["args"] = list(self.args)
        return out


def made(module: str, fn: str, seed: int, args: Sequence[object], value: object) -> dict:
    """A case's input made again in the checker: ``module.fn(random.Random(seed), *args)``
    (``module`` shipped in ``tests/``) must give ``value`` (files or stdin), else the reference
    runs on what it gave."""
    shape = value if isinstance(value, Mapping) else {"": value}  # a call's input: any value
    return {"module": module, "fn": fn, "seed": seed, "args": list(args), "sha256": digest(shape)}


#: What :func:`emitted` puts before a call's code: ``INPUT`` and ``emit`` as the checker's
#: Python child has them, the directory of the reference's files first on ``sys.path``.
_EMIT_PRELUDE = """import json, sys
sys.path.insert(0, sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as _f:
    INPUT = json.load(_f)
def emit(value):
    with open(sys.argv[3], "w", encoding="utf-8") as f:
        json.dump({"value": value}, f)
"""


def scratch_env(tmp: str) -> dict[str, str]:
    """The environment of a child run at generation time in the temporary directory ``tmp``:
    this process's, with ``TMPDIR`` inside ``tmp``, so that what the reference's code makes
    with ``tempfile`` goes with the directory (the checker gives each run a directory of its
    own the same way)."""
    scratch = Path(tmp, ".tmp")
    scratch.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(scratch)}


def emitted(files: Files, code: str, input_value: object, *, timeout: float = 120) -> object:
    """What a :func:`python_call`'s ``code`` emits run now, at generation time, on the
    reference's ``files`` (a package, say) in a child interpreter of its own, in a temporary
    directory: the expected values of the call's cases, fixed before any agent code runs.
    A reference that fails raises (the family's bug, not the agent's)."""
    with tempfile.TemporaryDirectory(prefix="palaestra-reference-") as tmp:
        root = Path(tmp, "ref")
        root.mkdir()
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode() if isinstance(text, str) else text)
        Path(tmp, "input.json").write_text(json.dumps(input_value), encoding="utf-8")
        argv = [sys.executable, "-I", "-B", "-c", _EMIT_PRELUDE + code, str(root)]
        argv += [str(Path(tmp, "input.json")), str(Path(tmp, "output.json"))]
        res = subprocess.run(
            argv, cwd=root, env=scratch_env(tmp), capture_output=True, text=True, timeout=timeout
        )
        if res.returncode != 0:
            raise RuntimeError(f"the reference failed: {res.stderr.strip()[-800:]}")
        return json.loads(Path(tmp, "output.json").read_text(encoding="utf-8"))["value"]


def program(
    argv: Sequence[str],
    *,
    build: Sequence[str] | None = None,
    build_env: Mapping[str, str] | None = None,
    compile: Sequence[str] = (),
    out_dir: str | None = None,
    require: str | None = None,
    status: bool = False,
    writable: bool = False,
    trees: Sequence[str] = (),
    kept: Sequence[str] = (),
    look: Sequence[str] = (),
    tree_modes: bool = False,
    gunzip: bool = False,
    stderr: int | None = None,
) -> dict:
    """The answer is a program: ``argv`` run once a case as nobody, ``{app}`` the private copy
    of /app (built first with ``build``), ``{in}`` the case's directory (its ``files``,
    read-only; ``out_dir`` under it holds the output files compared). ``compile``: Python files
    whose syntax errors count as a compile error; ``require``: a file that must exist;
    ``status``: the exit status is part of the output (``Case.want["status"]``, compared by
    ``output``): a run that exits non-zero is compared, one killed, timed out or ending in a
    Python traceback is an error. ``writable``: the case's inputs are the run's (nobody's), to
    change, rename or remove (a program that edits a folder in place); ``trees``: folders
    under ``{in}`` read back whole after the run, never through a link (``got["trees"]``,
    compared by ``tree``); ``kept``: folders under ``{in}`` whose files' inode and mtime
    (set to 2001 first) are read before and after the run (``got["rewritten"]``, compared
    by ``kept``: a file the run should leave alone was not rewritten); ``look``: absolute
    paths outside the case looked at after the run (``got["looked"]``, compared by
    ``paths``: an archive's absolute member must not land there); ``tree_modes``: the trees'
    files with their permission bits (``["file", text, mode]``); ``gunzip``: their ``.gz``
    files' text decompressed. A case's ``args`` follow ``argv``;
    ``stderr``: the last ``stderr`` characters of its standard error, stripped, are part of
    the output too (``Case.want["stderr"]``: an error message)."""
    return {
        "kind": "program",
        "argv": list(argv),
        "build": list(build) if build else None,
        "build_env": dict(build_env or {}),
        "compile": list(compile),
        "out_dir": out_dir,
        "require": require,
        "status": status,
        "writable": writable,
        "trees": list(trees),
        "kept": list(kept),
        "look": list(look),
        "tree_modes": tree_modes,
        "gunzip": gunzip,
        "stderr": stderr,
    }


def python_call(
    code: str,
    input_value: object,
    *,
    cases: int | None = None,
    cpu: int | None = None,
    compare: Mapping[str, object] | None = None,
    make: Mapping[str, object] | None = None,
    reference: str | None = None,
) -> dict:
    """The answer is Python called in one child: ``code`` (``INPUT`` bound to
    ``input_value``) must ``emit`` a list of one value per case. In :func:`python_calls`:
    ``cases``, how many of the cases (in order) it answers; ``cpu``, its own CPU bar over its
    process tree; ``compare``, its cases' comparison instead of the task's. ``make`` (see
    :func:`made`; ``input_value`` is then None): an input too large to ship, made again in
    the checker; should it differ, ``reference``, a function of the same module called with
    the input and the maker's ``args``, gives the expected values of the call's cases on it,
    before any agent code runs."""
    if (make is None) != (reference is None):
        raise ValueError("a python_call's make= needs reference= (and only it)")
    call: dict = {"kind": "python", "code": code, "input": input_value}
    options = (("cases", cases), ("cpu", cpu), ("compare", compare), ("make", make))
    for key, value in options + (("reference", reference),):
        if value is not None:
            call[key] = dict(value) if isinstance(value, Mapping) else value
    return call


def python_calls(*calls: Mapping[str, object], compile: Sequence[str] = ()) -> dict:
    """The answer is Python called in several children, one a :func:`python_call`, each in
    a fresh copy of /app: the first answers its ``cases`` cases, the next the following ones
    (the last, without ``cases``, the rest). ``compile``: Python files whose syntax errors
    count as a compile error."""
    if any("cases" not in call for call in calls[:-1]):
        raise ValueError("every python_call but the last needs cases=")
    return {"kind": "python", "calls": [dict(c) for c in calls], "compile": list(compile)}


def function_check(
    path: str, entry: str, *, setup: str, check: str, reference: str, seed: int = 0
) -> dict:
    """The answer is the Python function ``entry`` of the file ``path``, judged by ``check``
    (the source of ``check(candidate)``, run by the harness in a scope of ``setup``'s names,
    ``random`` seeded with ``seed``): the calls it makes of the ``reference`` source's function
    are recorded now, in a child interpreter; the checker runs the agent's function on them in
    the jail and ``check`` on its typed values (``palaestra_calls``). The cases are ``[]``."""
    answer = {"kind": "check", "file": path, "entry": entry, "setup": setup, "check": check}
    answer.update(seed=seed, rounds=3)
    code = "import sys; sys.path.insert(0, sys.argv[1]); import palaestra_calls; "
    with tempfile.TemporaryDirectory(prefix="palaestra-reference-") as tmp:
        res = subprocess.run(
            [sys.executable, "-I", "-B", "-c", code + "palaestra_calls.record_main()"]
            + [str(Path(__file__).parent)],
            input=json.dumps({"answer": answer, "reference": reference}),
            env=scratch_env(tmp),
            capture_output=True,
            text=True,
            timeout=120,
        )
    if res.returncode != 0:
        raise RuntimeError(f"recording the reference's calls failed: {res.stderr.strip()[-800:]}")
    return dict(answer, calls=json.loads(res.stdout))


def sqlite_query(path: str) -> dict:
    """The answer is one SQLite statement in ``path``, run read-only on each case's ``db``."""
    return {"kind": "sqlite", "file": path}


def postgres_query(path: str) -> dict:
    """The answer is one PostgreSQL query in ``path``, run on each case's ``load`` as a role
    that may only read it (see ``palaestra_pg``)."""
    return {"kind": "postgres", "file": path}


def state() -> dict:
    """The answer is what the agent left in the sandbox (a shell task's files): nothing of it
    runs; each case's ``path`` is looked at, without following links, and compared (``path``:
    ``{"type": "file"|"dir"|"absent"|"link"|"other", "text": a regular file's text}``)."""
    return {"kind": "state"}


def compare(how: str, **options: object) -> dict:
    """How a case's output meets its ``want``: ``output`` (stdout and output files byte for
    byte), ``lines`` (right-stripped lines), ``json_keys`` (a JSON object, one check a key:
    ``tol``, labels), ``csv`` (header and rows, ``columns``: None, "strip" or a tolerance a
    column), ``rows`` (a query's rows and column names, ``tol``), ``equal``, ``items`` (a
    list, equal item by item; the first differing item, ``what``, in the detail), ``files``
    (a program's output files, one check a file, ``newlines="universal"`` as text mode reads
    them; stdout not compared) ``function`` (``module``'s ``fn(ck, label, want, got,
    options)``, ``module`` shipped in ``tests/`` through :func:`tests`' ``modules``: a check
    the others cannot say, such as pricing an answer) or ``path`` (a :func:`state` case: want
    ``{"type": ...}``, one check of what the path is, or ``{"text": ..., "strip": None,
    "blanks" or "trailing_newlines"}``, one check of a regular file's text), ``tree`` (a
    program's ``trees``: want ``{"trees": {name: {path: ["file", text] | ["dir"] | ["link",
    text]}}}``, one check a folder) or ``each`` (``of=[compare(...), ...]``, several
    comparisons of one output, want a list of their expected values; a comparison's
    ``label``, "{label}: ..." names its checks) or ``kept`` (a program's
    ``kept`` folders: want ``{"kept": {name: [paths the run must not rewrite]}}``),
    ``status`` (want ``{"status": n}``, a program run with ``status``) or ``paths`` (a
    program's ``look``: want ``{"paths": {path: "absent"|"file"|...}}``, one check)."""
    if how not in COMPARISONS:
        raise ValueError(f"comparison {how!r}: use one of {', '.join(COMPARISONS)}")
    return {"how": how, **options}


def limits(
    *,
    timeout: float = 60,
    cpu: int | None = None,
    memory_mb: int | None = None,
    build_timeout: float = 240,
) -> dict:
    """Wall time of a run, CPU seconds over its process tree (a case's ``cpu`` overrides), MB
    of memory its tree may hold (``palaestra_jail``)."""
    return {"timeout": timeout, "cpu": cpu, "memory_mb": memory_mb, "build_timeout": build_timeout}


def part(
    *,
    answer: Mapping[str, object],
    cases: Sequence[Case],
    compare: Mapping[str, object],
    limits: Mapping[str, object] | None = None,
    reference: Mapping[str, object] | None = None,
) -> dict:
    """A further part of a test (:func:`tests`' ``also``): another way the agent's work runs,
    its own cases (none made in the checker), comparison, limits and ``reference`` (for its
    ``by_reference`` cases)."""
    if any(c.make for c in cases):
        raise ValueError("a further part's cases need their expected values (no make=)")
    _refuse(answer, cases, reference)
    return {
        "answer": dict(answer),
        "cases": [c.data() for c in cases],
        "compare": dict(compare),
        "limits": dict(limits or {}),
        "reference": dict(reference or {}),
    }


def _refuse(
    answer: Mapping[str, object], cases: Sequence[Case], reference: Mapping[str, object] | None
) -> None:
    """What the harness could not run: an unknown answer, cases without their reference."""
    if answer["kind"] not in ANSWERS:
        raise ValueError(f"answer kind {answer['kind']!r}: use one of {', '.join(ANSWERS)}")
    if any(c.make for c in cases) and reference is None:
        raise ValueError("cases made in the checker need a reference")
    if answer["kind"] == "state" and not all(c.path for c in cases):
        raise ValueError("a state answer's cases each need the path they look at")
    if any(c.by_reference for c in cases) and (
        answer["kind"] != "python" or not (reference or {}).get("files")
    ):
        raise ValueError("cases by_reference need a Python answer and the reference's files")


def tests(
    *,
    answer: Mapping[str, object],
    cases: Sequence[Case],
    compare: Mapping[str, object],
    limits: Mapping[str, object] | None = None,
    kind: str | None = None,
    reference: Mapping[str, object] | None = None,
    modules: Mapping[str, str] | None = None,
    timeout: int = 120,
    also: Sequence[Mapping[str, Any]] = (),
    finish: tuple[str, str] | None = None,
    reward: str = "all",
) -> dict[str, str | bytes]:
    """The task's ``tests/``: ``test.sh``, the harness, the spec and ``modules`` (input makers
    for :func:`made`, ``name.py`` -> source). ``reference``: ``{"files": ..., "argv": ...}``,
    what runs on a made-again input whose digest differs. ``also``: further :func:`part` s,
    run in order after this one (a package's functions called, then its command line run).
    ``finish``: ``(module, fn)``, a function of a module in ``modules`` called with the checker
    and the spec after every check; the numbers it returns are written beside the reward
    (CURE's test reward on HumanEval). ``reward``: ``"all"``, 1 only when every check passed, or ``"partial"``, the fraction of
    checks passed (a partial-credit task; ``partial`` in ``reward.json`` is that fraction
    either way)."""
    _refuse(answer, cases, reference)
    if reward not in ("all", "partial"):
        raise ValueError(f"reward {reward!r}: use all or partial")
    spec = {
        "answer": dict(answer),
        "cases": [c.data() for c in cases],
        "compare": dict(compare),
        "limits": dict(limits or {}),
        "kind": kind,
        "reference": dict(reference or {}),
    }
    if also:
        spec["also"] = [dict(p) for p in also]
    if finish is not None:
        module, fn = finish
        if f"{module}.py" not in (modules or {}):
            raise ValueError(f"finish names {module!r}: ship it in modules=")
        spec["finish"] = {"module": module, "fn": fn}
    if reward == "partial":
        spec["reward"] = "partial"
    kinds = {answer["kind"], *(p["answer"]["kind"] for p in also)}
    files: dict[str, str | bytes] = {
        "test.sh": python_test_sh("palaestra_harness.py", timeout=timeout),
        SPEC: precomputed(spec),
        **{
            path.name: path.read_text()
            for path in HARNESS_RUNTIME
            if _RUNTIME_OF.get(path.name, answer["kind"]) in kinds
        },
    }
    files.update(modules or {})
    return files


def solutions(
    path: str, reference: str, wrongs: Mapping[str, str], *, note: str
) -> tuple[Files, dict[str, Files]]:
    """The ``solution`` and ``wrong_solutions`` of a task whose answer is the file ``path``
    (relative to /app): each writes its text there."""
    wrong = {
        name: {"solve.sh": solve_sh_writing({path: text}, note=f"wrong: {name}")}
        for name, text in wrongs.items()
    }
    return {"solve.sh": solve_sh_writing({path: reference}, note=note)}, wrong


def task(
    *,
    instruction: str,
    workspace: Files,
    tests: Mapping[str, str | bytes],
    answer_path: str,
    reference: str,
    wrongs: Mapping[str, str],
    note: str,
    **options: object,
) -> GeneratedTask:
    """A whole task whose answer is one file: ``options`` are :class:`GeneratedTask`'s
    (tags, timeouts, packages, reward outcomes...)."""
    solution, wrong = solutions(answer_path, reference, wrongs, note=note)
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=dict(tests),
        solution=solution,
        wrong_solutions=wrong,
        **options,  # type: ignore[arg-type]
    )
