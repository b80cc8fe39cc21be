"""shell-lookup: what to do is written in the sandbox, not in the prompt; read it, then act.

Each task names a file to read; what to do, or the value to act on, is drawn per task and lies
only in the workspace, so copying the prompt cannot pass: the agent must look (``cat``) and use
what it saw, over two responses (run it with a step limit of 2 or more). The kinds, by tier:

* easy: the prompt only says where the task is written and shows the command that reads it
  (``cat /app/todo.txt``); the file holds a one-line task: create a directory, write a word to
  a file, (evaluation split only) delete a file and nothing else;
* medium: copy the one file of a directory that contains a given word to a given path;
* hard: write a setting's value, read from an ini-style file, plus a given number.

Each task carries its kind as a ``kind:<name>`` tag (``task.toml``), for per-kind rates.

Every name and value comes from the vocabulary of the task's split
(:mod:`palaestra.tasks.generators.splits`): training and evaluation tasks share no word, and the
delete kind is never trained on. The hidden test is data (``harness_spec``): it looks at the named paths (never through a
symlink).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
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


def _note(
    spec: GenSpec,
    note: str,
    check: dict,
    solve: str,
    wrong: dict[str, str],
    workspace: dict[str, str] | None = None,
) -> _Kind:
    """An easy task: the prompt only says where the task is written; ``note`` (the task) is
    in that file, which must stay as it is. A small model (SmolLM2-135M) follows a command it
    can copy and a one-line task it reads, so the prompt shows the first command as a code
    block and the note reads like a ``shell-warmup`` instruction."""
    pointer = spec.rng.choice(_vocab(spec, _POINTERS))
    path = f"/app/{pointer}.txt"
    check = {**check, "unchanged": {**check.get("unchanged", {}), path: note + "\n"}}
    return _Kind(
        f"Your task is written in `{path}`. Read it, then do what it says. To read it:\n\n"
        f"```bash\ncat {path}\n```",
        check,
        solve,
        wrong,
        {f"{pointer}.txt": note + "\n", **(workspace or {})},
    )


def _mkdir_named(spec: GenSpec) -> _Kind:
    name, other = spec.rng.sample(_vocab(spec, _VALUES), 2)
    return _note(
        spec,
        f"Create the directory `/app/{name}`.",
        check={"kind": "dir", "path": f"/app/{name}"},
        solve=f"mkdir -p /app/{name}",
        wrong={
            "other-name": f"mkdir -p /app/{other}",
            "a-file": f"touch /app/{name}",
            "nothing-read": "mkdir -p /app/task",
        },
    )


def _write_named(spec: GenSpec) -> _Kind:
    name, other = spec.rng.sample(_vocab(spec, _VALUES), 2)
    word, wrong_word = spec.rng.sample(_vocab(spec, _WORDS), 2)
    target = f"/app/{name}.txt"
    return _note(
        spec,
        f"Create the file `{target}` containing the single word `{word}`.",
        check={"kind": "file", "path": target, "want": word},
        solve=f"echo {word} > {target}",
        wrong={
            "other-file": f"echo {word} > /app/{other}.txt",
            "wrong-word": f"echo {wrong_word} > {target}",
            "the-note": f"cat /app/*.txt > {target}",
        },
    )


def _remove_named(spec: GenSpec) -> _Kind:
    name, keep = spec.rng.sample(_vocab(spec, _VALUES), 2)
    target, kept = f"/app/{name}.txt", f"/app/{keep}.txt"
    return _note(
        spec,
        f"Delete the file `{target}`, and nothing else.",
        check={"kind": "gone", "path": target, "unchanged": {kept: keep + "\n"}},
        solve=f"rm {target}",
        wrong={
            "the-other": f"rm {kept}",
            "emptied": f": > {target}",
            "everything": "rm -f /app/*.txt",
        },
        workspace={f"{name}.txt": name + "\n", f"{keep}.txt": keep + "\n"},
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


_KIND_NAMES = {
    "_mkdir_named": "mkdir",
    "_write_named": "write",
    "_remove_named": "delete",
    "_copy_matching": "copy-matching",
    "_setting_plus": "setting-plus",
}
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
    make = spec.rng.choice(kinds(spec.seed, *_TIER_KINDS[spec.tier]))
    kind = make(spec)
    instruction = kind.instruction + "\n"
    return GeneratedTask(
        instruction=instruction,
        workspace=kind.workspace,
        tests=hs.tests(
            answer=hs.state(), cases=_cases(kind.check), compare=hs.compare("path"), timeout=60
        ),
        solution={"solve.sh": _solve_sh(kind.solve, "the value read from the workspace")},
        wrong_solutions={
            name: {"solve.sh": _solve_sh(cmd, f"wrong: {name}")} for name, cmd in kind.wrong.items()
        },
        tags=("shell", "observation", f"kind:{_KIND_NAMES[make.__name__]}"),
        agent_timeout_sec=120.0,
        verifier_timeout_sec=90.0,
    )


def _cases(check: dict) -> list[hs.Case]:
    """The hidden test's cases: the path the task names, then each file that must not change."""
    path, kind = check["path"], check["kind"]
    first = {
        "dir": hs.Case(path + " is a directory", path=path, want={"type": "dir"}),
        "file": hs.Case(
            path + " content", path=path, want={"text": check.get("want"), "strip": "blanks"}
        ),
        "gone": hs.Case(path + " is gone", path=path, want={"type": "absent"}),
    }[kind]
    unchanged = sorted(check.get("unchanged", {}).items())
    return [first] + [hs.Case(p + " unchanged", path=p, want={"text": w}) for p, w in unchanged]
