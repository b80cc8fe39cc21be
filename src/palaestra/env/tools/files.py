"""The ``files`` family: a file store (paths to text) behind list, read, write, move and delete.

Tiers: easy renames one file; medium deletes or moves a set of files picked by a pattern; hard
writes an index of the files holding a word, then cleans up backups. The goal is the exact final
set of files and contents.
"""

from __future__ import annotations

import random
from typing import Any

from palaestra.env.tools.tool import (
    Call,
    Scenario,
    State,
    Tool,
    ToolError,
    dumps,
    params,
    state_scenario,
    string,
)

#: The largest file ``write_file`` accepts (the policy's input is untrusted).
MAX_FILE_CHARS = 20_000
DIRS = ("docs", "inbox", "data", "reports", "tmp", "archive")
STEMS = (
    "notes",
    "budget",
    "plan",
    "minutes",
    "summary",
    "draft",
    "roadmap",
    "invoice",
    "contacts",
    "review",
    "backlog",
    "metrics",
)
EXTS = (".txt", ".md", ".csv", ".tmp", ".bak")
WORDS = ("alpha", "beta", "ship", "review", "budget", "owner", "deadline", "risk", "scope")
FILES = {"easy": 8, "medium": 16, "hard": 24}


def _existing(state: State, path: str) -> str:
    if path not in state["files"]:
        raise ToolError(f"no file {path!r}; see list_files")
    return path


def _list(state: State, args: dict[str, Any]) -> str:
    prefix = args.get("prefix", "")
    return dumps([p for p in sorted(state["files"]) if p.startswith(prefix)])


def _read(state: State, args: dict[str, Any]) -> str:
    return state["files"][_existing(state, args["path"])]


def _write(state: State, args: dict[str, Any]) -> str:
    path, content = args["path"], args["content"]
    if not path or path.startswith("/") or path.endswith("/") or ".." in path.split("/"):
        raise ToolError(f"invalid path {path!r}: use a relative path such as docs/a.txt")
    if len(content) > MAX_FILE_CHARS:
        raise ToolError(f"content of {len(content)} characters; the limit is {MAX_FILE_CHARS}")
    state["files"][path] = content
    return "Written."


def _delete(state: State, args: dict[str, Any]) -> str:
    del state["files"][_existing(state, args["path"])]
    return "Deleted."


def _move(state: State, args: dict[str, Any]) -> str:
    source, target = _existing(state, args["source"]), args["target"]
    if target in state["files"]:
        raise ToolError(f"{target!r} exists already; delete it first")
    _write(state, {"path": target, "content": state["files"][source]})
    del state["files"][source]
    return "Moved."


TOOLS = [
    Tool(
        "list_files",
        "List the paths of the files, optionally only those under a prefix.",
        params([], prefix=string("Path prefix, e.g. docs/.")),
        _list,
    ),
    Tool("read_file", "The content of a file.", params(["path"], path=string("File path.")), _read),
    Tool(
        "write_file",
        "Create a file or replace its content.",
        params(["path", "content"], path=string("File path."), content=string("Text.")),
        _write,
    ),
    Tool("delete_file", "Delete a file.", params(["path"], path=string("File path.")), _delete),
    Tool(
        "move_file",
        "Move (rename) a file; the target must not exist.",
        params(["source", "target"], source=string("Current path."), target=string("New path.")),
        _move,
    ),
]


def _world(rng: random.Random, tier: str) -> State:
    files: dict[str, str] = {}
    while len(files) < FILES[tier]:
        path = f"{rng.choice(DIRS)}/{rng.choice(STEMS)}{rng.choice(EXTS)}"
        lines = [" ".join(rng.sample(WORDS, 4)) for _ in range(rng.randrange(1, 4))]
        if rng.random() < 0.3:
            lines.insert(rng.randrange(len(lines) + 1), f"TODO: {rng.choice(WORDS)}")
        files[path] = "\n".join(lines) + "\n"
    return {"files": files}


def _task(rng: random.Random, tier: str, files: dict[str, str]) -> tuple[str, list[Call]]:
    paths = sorted(files)
    if tier == "easy":
        source = rng.choice(paths)
        folder, name = source.split("/")
        target = f"{folder}/{rng.randrange(2020, 2026)}-{name}"
        return f"Rename {source} to {target}.", [
            ("move_file", {"source": source, "target": target})
        ]
    if tier == "medium":
        ext = rng.choice([e for e in EXTS if any(p.endswith(e) for p in paths)])
        picked = [p for p in paths if p.endswith(ext)]
        if rng.random() < 0.5:
            return (
                f"Delete every file whose name ends in {ext}, in any folder.",
                [("delete_file", {"path": p}) for p in picked],
            )
        return (
            f"Move every file whose name ends in {ext} into archive/, named "
            "<folder>-<name> (docs/a.txt becomes archive/docs-a.txt).",
            [
                ("move_file", {"source": p, "target": f"archive/{p.replace('/', '-')}"})
                for p in picked
            ],
        )
    folder = rng.choice(sorted({p.split("/")[0] for p in paths}))
    todo = [p for p in paths if p.startswith(f"{folder}/") and "TODO" in files[p]]
    index = "".join(f"{p}\n" for p in todo)
    backups = [p for p in paths if p.endswith(".bak")]
    return (
        f"Write {folder}/INDEX.txt listing the path of every file under {folder}/ that "
        "contains the word TODO: sorted, one path per line (like docs/a.txt), each line "
        "ending with a newline, nothing else (an empty file if there is none). Then delete "
        "every file whose name ends in .bak, in any folder.",
        [
            ("write_file", {"path": f"{folder}/INDEX.txt", "content": index}),
            *[("delete_file", {"path": p}) for p in backups],
        ],
    )


def build(rng: random.Random, tier: str) -> Scenario:
    state = _world(rng, tier)
    instruction, solution = _task(rng, tier, state["files"])
    return state_scenario(instruction, state, TOOLS, solution)
