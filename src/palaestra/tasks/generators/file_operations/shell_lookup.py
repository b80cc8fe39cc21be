"""shell-lookup: what to do is written in the sandbox, not in the prompt; read it, then act.

Each task names a file to read and says what to do with what it holds; the value itself (a
directory's name, a file's path, a word, a number) is drawn per task and lies only in the
workspace, so copying the prompt cannot pass: the agent must look (``cat``) and use what it saw,
over two responses (run it with a step limit of 2 or more), or in one command that reads it
(``mkdir "$(cat /app/todo.txt)"``). The kinds, by tier:

* easy: create the directory a file names; write a given word into the file a file names;
  (evaluation split only) delete the file a file names, and nothing else;
* medium: copy the one file of a directory that contains a given word to a given path;
* hard: write a setting's value, read from an ini-style file, plus a given number.

Every name and value comes from the vocabulary of the task's split
(:mod:`palaestra.tasks.generators.splits`): training and evaluation tasks share no word, and the
delete kind is never trained on. The checker reads the named paths (never through a symlink).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

from palaestra.tasks.generators import family, python_test_sh
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.splits import kinds, vocabulary

# Pointer files (what to read), the values they hold, and the words of the tasks; one list per
# split, no word in both.
_POINTERS = (
    ["todo", "target", "plan", "next", "task", "order", "goal", "job"],
    ["memo", "wanted", "ticket", "request", "brief", "agenda", "errand", "mission"],
)
_VALUES = (
    ["alpha", "bravo", "delta", "foxtrot", "kilo", "lima", "oscar", "tango", "zulu", "sierra"],
    ["amber", "basil", "cedar", "fig", "ginger", "lemon", "mango", "olive", "pepper", "thyme"],
)
_WORDS = (
    ["ready", "done", "pass", "green", "yes", "ok"],
    ["finished", "approved", "shipped", "valid", "clear", "true"],
)
_SETTINGS = (["port", "retries", "workers", "limit"], ["timeout", "threads", "depth", "quota"])


@dataclass
class _Kind:
    """One task: what to say, what to ship, how to solve it and how to check it."""

    instruction: str
    check: dict  # the hidden test's parameters
    solve: str  # the reference command(s)
    wrong: dict[str, str]  # name -> a plausible wrong command
    workspace: dict[str, str] = field(default_factory=dict)


def _vocab(spec: GenSpec, lists: tuple[list[str], list[str]]) -> list[str]:
    return list(vocabulary(spec.seed, *lists))


def _steps(path: str, then: str) -> str:
    """The easy tier's two steps: a small model (SmolLM2-135M) needs the first command spelled
    out and the second one's form named; the value it needs is only in the output of the
    first."""
    return f"1. Run `cat {path}` to read it.\n2. Then {then}."


def _mkdir_named(spec: GenSpec) -> _Kind:
    rng = spec.rng
    pointer = rng.choice(_vocab(spec, _POINTERS))
    name, other = rng.sample(_vocab(spec, _VALUES), 2)
    path = f"/app/{pointer}.txt"
    return _Kind(
        f"The file `{path}` holds the path of a directory to create.\n\n"
        + _steps(path, "run `mkdir -p` with that path"),
        {"kind": "dir", "path": f"/app/{name}", "absent": [f"/app/{pointer}"]},
        f"mkdir -p /app/{name}",
        {
            "pointer-name": f"mkdir -p /app/{pointer}",
            "other-name": f"mkdir -p /app/{other}",
            "a-file": f"touch /app/{name}",
        },
        {f"{pointer}.txt": f"/app/{name}\n"},
    )


def _write_named(spec: GenSpec) -> _Kind:
    rng = spec.rng
    pointer = rng.choice(_vocab(spec, _POINTERS))
    name, other = rng.sample(_vocab(spec, _VALUES), 2)
    word, wrong_word = rng.sample(_vocab(spec, _WORDS), 2)
    path = f"/app/{pointer}.txt"
    target = f"/app/{name}.txt"
    return _Kind(
        f"The file `{path}` holds the path of a file. Write the word `{word}` into that file.\n\n"
        + _steps(path, f"run `echo {word} >` followed by that path"),
        {"kind": "file", "path": target, "want": word, "unchanged": {path: target + "\n"}},
        f"echo {word} > {target}",
        {
            "into-pointer": f"echo {word} > {path}",
            "other-file": f"echo {word} > /app/{other}.txt",
            "wrong-word": f"echo {wrong_word} > {target}",
        },
        {f"{pointer}.txt": target + "\n"},
    )


def _remove_named(spec: GenSpec) -> _Kind:
    rng = spec.rng
    pointer = rng.choice(_vocab(spec, _POINTERS))
    name, keep = rng.sample(_vocab(spec, _VALUES), 2)
    path = f"/app/{pointer}.txt"
    target, kept = f"/app/{name}.txt", f"/app/{keep}.txt"
    return _Kind(
        f"The file `{path}` holds the path of a file that must go. Delete that file and nothing "
        "else.\n\n" + _steps(path, "run `rm` followed by that path"),
        {"kind": "gone", "path": target, "unchanged": {path: target + "\n", kept: keep + "\n"}},
        f"rm {target}",
        {
            "the-pointer": f"rm {path}",
            "the-other": f"rm {kept}",
            "emptied": f": > {target}",
        },
        {f"{pointer}.txt": target + "\n", f"{name}.txt": name + "\n", f"{keep}.txt": keep + "\n"},
    )


def _copy_matching(spec: GenSpec) -> _Kind:
    rng = spec.rng
    folder = rng.choice(_vocab(spec, _POINTERS))
    names = rng.sample(_vocab(spec, _VALUES), spec.iscale(3, 6))
    word, *others = rng.sample(_vocab(spec, _WORDS), 3)
    bodies = {n: f"status: {rng.choice(others)}\n" for n in names}
    hit = rng.choice(names)
    bodies[hit] = f"status: {word}\n"
    return _Kind(
        f"Exactly one file in `/app/{folder}` contains the word `{word}`. Copy that file to "
        "`/app/found.txt`.",
        {"kind": "file", "path": "/app/found.txt", "want": bodies[hit].strip()},
        f"cp /app/{folder}/{hit}.txt /app/found.txt",
        {
            "another-file": f"cp /app/{folder}/{next(n for n in names if n != hit)}.txt "
            "/app/found.txt",
            "the-word": f"echo {word} > /app/found.txt",
            "every-file": f"cat /app/{folder}/*.txt > /app/found.txt",
        },
        {f"{folder}/{n}.txt": body for n, body in bodies.items()},
    )


def _setting_plus(spec: GenSpec) -> _Kind:
    rng = spec.rng
    settings = rng.sample(_vocab(spec, _SETTINGS), 3)
    wanted = settings[0]
    values = {s: rng.randint(2, 90) for s in settings}
    add = rng.randint(1, 9)
    rng.shuffle(settings)
    body = "[main]\n" + "".join(f"{s} = {values[s]}\n" for s in settings)
    want = values[wanted] + add
    other = next(s for s in settings if s != wanted)
    return _Kind(
        f"`/app/settings.ini` sets `{wanted}`. Write its value plus {add} to `/app/answer.txt` "
        "(just the number).",
        {"kind": "file", "path": "/app/answer.txt", "want": str(want)},
        f"echo {want} > /app/answer.txt",
        {
            "value-only": f"echo {values[wanted]} > /app/answer.txt",
            "other-setting": f"echo {values[other] + add} > /app/answer.txt",
            "the-addend": f"echo {add} > /app/answer.txt",
        },
        {"settings.ini": body},
    )


_TIER_KINDS: dict[str, tuple[list[Callable[[GenSpec], _Kind]], list]] = {
    "easy": ([_mkdir_named, _write_named], [_remove_named]),
    "medium": ([_copy_matching], []),
    "hard": ([_setting_plus], []),
}


def _solve_sh(command: str, note: str) -> str:
    return f"#!/usr/bin/env bash\n# {note}\ncd /app\n{command}\n"


@family(
    "shell-lookup",
    category="file-operations",
    summary="read what to do in the sandbox, then do it (the value is never in the prompt)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    kind = spec.rng.choice(kinds(spec.seed, *_TIER_KINDS[spec.tier]))(spec)
    instruction = kind.instruction + "\n"
    return GeneratedTask(
        instruction=instruction,
        workspace=kind.workspace,
        tests={"test.sh": python_test_sh(timeout=60), "test_hidden.py": _hidden_test(kind.check)},
        solution={"solve.sh": _solve_sh(kind.solve, "the value read from the workspace")},
        wrong_solutions={
            name: {"solve.sh": _solve_sh(cmd, f"wrong: {name}")} for name, cmd in kind.wrong.items()
        },
        tags=("shell", "observation"),
        agent_timeout_sec=120.0,
        verifier_timeout_sec=90.0,
    )


_CHECKER = r'''
import os

from palaestra_check import Checker

LIMIT = 1 << 20


def linked(path):
    """Whether the path, or a directory on it, is a symlink."""
    parts = path.strip("/").split("/")
    return any(os.path.islink("/" + "/".join(parts[:i])) for i in range(1, len(parts) + 1))


def read(path):
    """The file's text, or None: missing, not a regular file, or reached through a symlink."""
    if linked(path) or not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        return f.read(LIMIT).decode("utf-8", "replace")


ck = Checker()
kind, path = CHECK["kind"], CHECK["path"]
if kind == "dir":
    ck.check(path + " is a directory", os.path.isdir(path) and not linked(path))
elif kind == "file":
    ck.equal(path + " content", (read(path) or "").strip(), CHECK["want"])
elif kind == "gone":
    ck.check(path + " is gone", not os.path.lexists(path))
for gone in CHECK.get("absent", []):
    ck.check(gone + " was not made", not os.path.lexists(gone))
for other, want in sorted(CHECK.get("unchanged", {}).items()):
    ck.equal(other + " unchanged", read(other), want)
ck.finish()
'''


def _hidden_test(check: dict) -> str:
    return (
        '"""Hidden test of a shell-lookup task: reads the paths the task named."""\n'
        + f"CHECK = {check!r}\n"
        + textwrap.dedent(_CHECKER)
    )
