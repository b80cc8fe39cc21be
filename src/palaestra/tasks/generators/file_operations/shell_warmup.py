"""shell-warmup: one shell command or a one-line fix, the warm-up rung of a curriculum.

A small instruct model (SmolLM2-135M) solves almost none of the other families; RL needs tasks
it solves sometimes. Each task here asks for one thing that one command does, and says exactly
which file to touch:

* easy: write a word to a file, make a directory, copy a file;
* medium: append a line, count the lines that contain a word, fix the one wrong word a shell
  script prints;
* hard: replace every occurrence of a word, fix a one-line bug in a Python function, count the
  files of an extension in a tree.

The difficulty picks the kind (from its tier) and scales the inputs (lines, files, depth). The
hidden test is data (``harness_spec``) and cheap: it looks at the named file (never through a
symlink), or runs the fixed script or function as ``nobody`` on inputs drawn from a secret.

Held out by construction (:mod:`palaestra.tasks.generators.splits`): evaluation seeds (100000
on) draw every word, file name, directory, extension, log tag and function name from their own
vocabulary, disjoint from the training seeds', and their easy tier has a fourth kind that
training seeds never get: move (rename) a file.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.splits import kinds, split_of

_WORDS = [
    *("apple", "river", "copper", "violet", "harbor", "maple", "falcon", "quartz"),
    *("meadow", "ember", "tundra", "cobalt", "lantern", "pebble", "saffron", "willow"),
]
_NAMES = ["notes", "result", "answer", "output", "label", "token", "status", "summary"]
_NAMES += ["record", "entry"]
_DIRS = ["data", "logs", "build", "cache", "docs", "assets", "reports", "backup"]
_EXTS = ["txt", "csv", "log", "md", "json"]
_TAGS = ["ERROR", "WARN", "INFO", "DEBUG"]
_OPS = {
    "add": ("+", "the sum of `a` and `b`"),
    "sub": ("-", "`a` minus `b`"),
    "mul": ("*", "the product of `a` and `b`"),
}


@dataclass(frozen=True)
class _Vocab:
    """The words a split's tasks are made of (the two splits share none)."""

    words: list[str]
    names: list[str]
    dirs: list[str]
    exts: list[str]
    tags: list[str]
    ops: dict[str, tuple[str, str]]  # function name -> (operator, what it returns)
    module: str  # the Python module of the fix-a-function kind


_TRAIN = _Vocab(_WORDS, _NAMES, _DIRS, _EXTS, _TAGS, _OPS, "calc")
_HELD_OUT = _Vocab(
    words=[
        *("anchor", "birch", "canyon", "dune", "glacier", "hazel", "indigo", "juniper"),
        *("kelp", "lotus", "marble", "nectar", "orchid", "prairie", "quill", "raven"),
    ],
    names=["memo", "digest", "report", "draft", "ledger", "receipt", "journal", "outline"]
    + ["sketch", "verdict"],
    dirs=["media", "vendor", "scripts", "configs", "exports", "archive", "staging", "samples"],
    exts=["yaml", "ini", "tsv", "xml", "cfg"],
    tags=["FATAL", "NOTICE", "TRACE", "ALERT"],
    ops={
        "plus": ("+", "the sum of `a` and `b`"),
        "minus": ("-", "`a` minus `b`"),
        "times": ("*", "the product of `a` and `b`"),
    },
    module="arith",
)


def _vocab(spec: GenSpec) -> _Vocab:
    return _HELD_OUT if split_of(spec.seed) == "eval" else _TRAIN


@dataclass
class _Kind:
    """One task: what to say, what to ship, how to solve it and how to check it."""

    instruction: str
    check: dict  # the hidden test's parameters
    solve: str  # the reference command(s)
    wrong: dict[str, str]  # name -> a plausible wrong command
    workspace: dict[str, str] = field(default_factory=dict)


def _pick(rng, pool: list[str], k: int) -> list[str]:
    return rng.sample(pool, k)


def _lines(rng, n: int, words: list[str]) -> list[str]:
    return [" ".join(rng.choice(words) for _ in range(rng.randint(2, 5))) for _ in range(n)]


def _write(spec: GenSpec) -> _Kind:
    v = _vocab(spec)
    word, other = _pick(spec.rng, v.words, 2)
    name, other_name = _pick(spec.rng, v.names, 2)
    path = f"/app/{name}.txt"
    return _Kind(
        f"Create the file `{path}` containing the single word `{word}`.",
        {"kind": "file", "path": path, "want": word + "\n"},
        f"echo {word} > {path}",
        {
            "wrong-word": f"echo {other} > {path}",
            "wrong-file": f"echo {word} > /app/{other_name}.txt",
            "extra-words": f"echo '{word} {other}' > {path}",
        },
    )


def _mkdir(spec: GenSpec) -> _Kind:
    a, b = _pick(spec.rng, _vocab(spec).dirs, 2)
    return _Kind(
        f"Create the directory `/app/{a}/{b}` (and `/app/{a}` if needed).",
        {"kind": "dir", "path": f"/app/{a}/{b}"},
        f"mkdir -p /app/{a}/{b}",
        {
            "parent-only": f"mkdir -p /app/{a}",
            "swapped": f"mkdir -p /app/{b}/{a}",
            "a-file": f"mkdir -p /app/{a} && touch /app/{a}/{b}",
        },
    )


def _copy(spec: GenSpec) -> _Kind:
    v = _vocab(spec)
    src, dst, other = _pick(spec.rng, v.names, 3)
    body = "\n".join(_lines(spec.rng, spec.iscale(3, 8), v.words)) + "\n"
    return _Kind(
        f"Copy the file `/app/{src}.txt` to `/app/{dst}.txt`. Keep the original.",
        {"kind": "files", "want": {f"/app/{src}.txt": body, f"/app/{dst}.txt": body}},
        f"cp /app/{src}.txt /app/{dst}.txt",
        {
            "moved": f"mv /app/{src}.txt /app/{dst}.txt",
            "wrong-name": f"cp /app/{src}.txt /app/{other}.txt",
            "first-line": f"head -n 1 /app/{src}.txt > /app/{dst}.txt",
        },
        {f"{src}.txt": body},
    )


def _move(spec: GenSpec) -> _Kind:
    v = _vocab(spec)
    src, dst, other = _pick(spec.rng, v.names, 3)
    body = "\n".join(_lines(spec.rng, spec.iscale(3, 8), v.words)) + "\n"
    return _Kind(
        f"Move (rename) the file `/app/{src}.txt` to `/app/{dst}.txt`.",
        {"kind": "files", "want": {f"/app/{dst}.txt": body}, "absent": [f"/app/{src}.txt"]},
        f"mv /app/{src}.txt /app/{dst}.txt",
        {
            "copied": f"cp /app/{src}.txt /app/{dst}.txt",
            "wrong-name": f"mv /app/{src}.txt /app/{other}.txt",
            "emptied": f"touch /app/{dst}.txt && rm /app/{src}.txt",
        },
        {f"{src}.txt": body},
    )


def _append(spec: GenSpec) -> _Kind:
    v = _vocab(spec)
    name = spec.rng.choice(v.names)
    word, other = _pick(spec.rng, v.words, 2)
    lines = _lines(spec.rng, spec.iscale(3, 10), v.words)
    body = "\n".join(lines) + "\n"
    path = f"/app/{name}.txt"
    return _Kind(
        f"Append the line `{word}` to the end of `{path}`, keeping its other lines.",
        {"kind": "file", "path": path, "want": body + word + "\n"},
        f"echo {word} >> {path}",
        {
            "overwrote": f"echo {word} > {path}",
            "prepended": f"{{ echo {word}; cat {path}; }} > /tmp/x && cp /tmp/x {path}",
            "wrong-word": f"echo {other} >> {path}",
        },
        {f"{name}.txt": body},
    )


def _count_lines(spec: GenSpec) -> _Kind:
    rng, v = spec.rng, _vocab(spec)
    name = rng.choice(v.names)
    word, other = _pick(rng, v.tags, 2)
    n = spec.iscale(6, 40)
    hits = rng.randint(2, n // 2)
    others = rng.randint(1, n - hits - 1)
    if others == hits:
        others += 1 if hits + others < n else -1
    tags = [word] * hits + [other] * others + ["OK"] * (n - hits - others)
    rng.shuffle(tags)
    body = "".join(f"{i:04d} {t} {' '.join(_pick(rng, v.words, 2))}\n" for i, t in enumerate(tags))
    path = f"/app/{name}.log"
    return _Kind(
        f"Write the number of lines of `{path}` that contain `{word}` to `/app/count.txt` "
        "(just the number).",
        {"kind": "number", "path": "/app/count.txt", "want": hits},
        f"grep -c {word} {path} > /app/count.txt",
        {
            "all-lines": f"wc -l < {path} > /app/count.txt",
            "other-word": f"grep -c {other} {path} > /app/count.txt",
            "off-by-one": f"echo $(( $(grep -c {word} {path}) + 1 )) > /app/count.txt",
        },
        {f"{name}.log": body},
    )


def _fix_echo(spec: GenSpec) -> _Kind:
    rng, v = spec.rng, _vocab(spec)
    right, wrong, third = (w.capitalize() for w in _pick(rng, v.words, 3))
    words = _pick(rng, v.words, spec.iscale(1, 5))
    extra = [f"echo 'line {i}: {w}'" for i, w in enumerate(words)]
    script = "#!/bin/bash\n" + "\n".join([f'echo "Hello, {wrong}!"', *extra]) + "\n"
    want = f"Hello, {right}!\n" + "".join(f"line {i}: {w}\n" for i, w in enumerate(words))
    return _Kind(
        f"`/app/greet.sh` prints `Hello, {wrong}!` on its first line but it must print "
        f"`Hello, {right}!`. Fix that line; leave the rest of the script as it is.",
        {"kind": "script", "path": "/app/greet.sh", "want": want},
        f"sed -i 's/Hello, {wrong}/Hello, {right}/' /app/greet.sh",
        {
            "printed-only": f"echo 'Hello, {right}!'",
            "other-name": f"sed -i 's/Hello, {wrong}/Hello, {third}/' /app/greet.sh",
            "rewrote-script": f"printf '#!/bin/bash\\necho \"Hello, {right}!\"\\n' > /app/greet.sh",
        },
        {"greet.sh": script},
    )


def _replace_all(spec: GenSpec) -> _Kind:
    rng, v = spec.rng, _vocab(spec)
    name = rng.choice(v.names)
    old, new, third = _pick(rng, v.words, 3)
    lines = _lines(rng, spec.iscale(4, 16), [w for w in v.words if w not in (old, new, third)])
    lines[0] = f"{old} and {old} again"
    lines[rng.randrange(1, len(lines))] += f" {old}"
    body = "\n".join(lines) + "\n"
    path = f"/app/{name}.txt"
    return _Kind(
        f"In `{path}` replace every occurrence of the word `{old}` with `{new}`.",
        {"kind": "file", "path": path, "want": body.replace(old, new)},
        f"sed -i 's/{old}/{new}/g' {path}",
        {
            "first-per-line": f"sed -i 's/{old}/{new}/' {path}",
            "third-word": f"sed -i 's/{old}/{third}/g' {path}",
            "deleted": f"sed -i 's/{old}//g' {path}",
        },
        {f"{name}.txt": body},
    )


def _fix_python(spec: GenSpec) -> _Kind:
    rng, v = spec.rng, _vocab(spec)
    ops, module = v.ops, v.module
    names = sorted(ops)
    broken = rng.choice(names)
    bad_op = rng.choice([ops[n][0] for n in names if n != broken])
    body = ['"""Small arithmetic helpers."""', ""]
    for n in names:
        op = bad_op if n == broken else ops[n][0]
        body += [
            "",
            f"def {n}(a, b):",
            f'    """Return {ops[n][1]}."""',
            f"    return a {op} b",
            "",
        ]
    source = "\n".join(body).strip() + "\n"
    good, bad = f"return a {ops[broken][0]} b", f"return a {bad_op} b"
    pattern = bad.replace("*", "\\*")  # a sed pattern: `*` is special there
    # The same line may be right in another function: every command edits `broken`'s only.
    other = rng.choice([n for n in names if n != broken])
    third_op = next(o for o, _ in ops.values() if o not in (ops[broken][0], bad_op))
    return _Kind(
        f"In `/app/{module}.py` the function `{broken}(a, b)` should return {ops[broken][1]} but "
        "its one line of code is wrong. Fix that line.",
        {
            "kind": "python",
            "module": module,
            "ops": {n: ops[n][0] for n in names},
            "secret": rng.randrange(2**31),
            "trials": spec.iscale(3, 8),
        },
        f"sed -i '/def {broken}/,+2 s/{pattern}/{good}/' /app/{module}.py",
        {
            "other-function": f"sed -i '/def {other}/,+2 s/return a .* b/{good}/' /app/{module}.py",
            "third-operator": f"sed -i '/def {broken}/,+2 s/{pattern}/return a {third_op} b/' "
            f"/app/{module}.py",
            "commented-out": f"sed -i '/def {broken}/,+2 s/{pattern}/return 0  # {good}/' "
            f"/app/{module}.py",
        },
        {f"{module}.py": source},
    )


def _count_files(spec: GenSpec) -> _Kind:
    rng, v = spec.rng, _vocab(spec)
    top = rng.choice(v.dirs)
    ext, other = _pick(rng, v.exts, 2)
    depth = spec.iscale(2, 4)
    files: dict[str, str] = {}
    for i in range(spec.iscale(6, 20)):
        sub = "/".join(_pick(rng, v.dirs, rng.randint(0, depth - 1)))
        e = ext if i % 2 == 0 else rng.choice([other, ext, "bak"])
        files[f"{top}/{sub}/f{i}.{e}".replace("//", "/")] = rng.choice(v.words) + "\n"
    files[f"{top}/{rng.choice(v.dirs)}/deep{len(files)}.{ext}"] = "nested\n"
    files[f"{top}/top.{other}"] = "other\n"
    want = sum(1 for p in files if p.endswith(f".{ext}"))
    if want == sum(1 for p in files if p.endswith(f".{other}")):  # keep `other-ext` wrong
        files[f"{top}/more.{other}"] = "other\n"
    return _Kind(
        f"Write the number of files whose name ends in `.{ext}` anywhere under `/app/{top}` "
        "(in every subdirectory too) to `/app/count.txt` (just the number).",
        {"kind": "number", "path": "/app/count.txt", "want": want},
        f"find /app/{top} -type f -name '*.{ext}' | wc -l > /app/count.txt",
        {
            "top-level-only": f"ls /app/{top}/*.{ext} 2>/dev/null | wc -l > /app/count.txt",
            "every-file": f"find /app/{top} -type f | wc -l > /app/count.txt",
            "other-ext": f"find /app/{top} -type f -name '*.{other}' | wc -l > /app/count.txt",
        },
        files,
    )


_TIER_KINDS: dict[str, list[Callable[[GenSpec], _Kind]]] = {
    "easy": [_write, _mkdir, _copy],
    "medium": [_append, _count_lines, _fix_echo],
    "hard": [_replace_all, _fix_python, _count_files],
}
#: Kinds only evaluation seeds get: never trained on.
_HELD_OUT_KINDS: dict[str, list[Callable[[GenSpec], _Kind]]] = {"easy": [_move]}


def _solve_sh(command: str, note: str) -> str:
    return f"#!/usr/bin/env bash\n# {note}\ncd /app\n{command}\n"


@family(
    "shell-warmup",
    category="file-operations",
    summary="one shell command or a one-line fix (a warm-up curriculum rung for small models)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    choices = kinds(spec.seed, _TIER_KINDS[spec.tier], _HELD_OUT_KINDS.get(spec.tier, []))
    kind = spec.rng.choice(choices)(spec)
    instruction = (
        "# A one-command task\n\n" + kind.instruction + "\n\nOne shell command is enough.\n"
    )
    return GeneratedTask(
        instruction=instruction,
        workspace=kind.workspace or {".keep": ""},
        tests=_tests(kind.check),
        solution={"solve.sh": _solve_sh(kind.solve, "the one command")},
        wrong_solutions={
            name: {"solve.sh": _solve_sh(cmd, f"wrong: {name}")} for name, cmd in kind.wrong.items()
        },
        tags=("shell", "warm-up"),
        agent_timeout_sec=120.0,
        verifier_timeout_sec=90.0,
    )


_OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def _state(check: dict) -> list[hs.Case]:
    """The cases of a kind whose work is the files the agent left."""
    kind = check["kind"]
    path = check.get("path", "")
    if kind == "file":
        text = check["want"].rstrip("\n")
        return [
            hs.Case(path + " exists", path=path, want={"type": "file"}),
            hs.Case(
                path + " content", path=path, want={"text": text, "strip": "trailing_newlines"}
            ),
        ]
    if kind == "files":
        wants = sorted(check["want"].items())
        return [hs.Case(p + " content", path=p, want={"text": w}) for p, w in wants] + [
            hs.Case(p + " is gone", path=p, want={"type": "absent"})
            for p in check.get("absent", [])
        ]
    if kind == "dir":
        return [hs.Case(path + " is a directory", path=path, want={"type": "dir"})]
    text = str(check["want"])  # number
    return [hs.Case(path + " holds the count", path=path, want={"text": text, "strip": "blanks"})]


def _tests(check: dict) -> dict[str, str | bytes]:
    """The hidden test, as data: the files looked at, the fixed script run, or the fixed
    functions called (as nobody, on a private copy of /app) on inputs drawn from the secret."""
    kind, limits = check["kind"], hs.limits(timeout=10)
    if kind == "script":
        return hs.tests(
            answer=hs.program(["bash", "{app}/" + check["path"].removeprefix("/app/")]),
            cases=[hs.Case(check["path"] + " prints", want={"stdout": check["want"], "files": {}})],
            compare=hs.compare("output"),
            limits=limits,
            timeout=60,
        )
    if kind == "python":
        rng = random.Random(check["secret"])
        pairs = [[rng.randint(-50, 50), rng.randint(-50, 50)] for _ in range(check["trials"])]
        names = sorted(check["ops"])
        code = (
            f"import {check['module']} as m\n"
            f"emit([[getattr(m, n)(a, b) for a, b in INPUT] for n in {names!r}])"
        )
        cases = [
            hs.Case(
                f"{n} on {pairs[:2]}", want=[_OPERATORS[check["ops"][n]](a, b) for a, b in pairs]
            )
            for n in names
        ]
        return hs.tests(
            answer=hs.python_call(code, pairs),
            cases=cases,
            compare=hs.compare("equal"),
            limits=limits,
            timeout=60,
        )
    return hs.tests(answer=hs.state(), cases=_state(check), compare=hs.compare("path"), timeout=60)
