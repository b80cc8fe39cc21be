"""The starter pack under test: its tasks, and the wrong solutions each must reject."""

from __future__ import annotations

from palaestra.env.registry import load_tasks
from palaestra.tasks.pack_cache import PACKS_DIR, materialise

PACK_DIR = PACKS_DIR / "starter"
#: The pack as it runs: its copy in the cache, with the harness runtime its spec tasks need.
LOADED_DIR = materialise("starter")
CATEGORIES = [
    "algorithms",
    "data-querying",
    "debugging",
    "file-operations",
    "optimization",
    "software-engineering",
]
DIFFICULTIES = ["easy", "medium", "hard"]
#: What a starter Dockerfile may do: place files, set variables, and install python3 from Debian
#: (the official debian:bookworm-slim has none), which the local backend replays from the host.
ALLOWED_DOCKERFILE_INSTRUCTIONS = {"FROM", "WORKDIR", "COPY", "ENV", "RUN"}

TASK_DIRS = sorted(p.parent for p in PACK_DIR.glob("*/task.toml"))
TASK_IDS = [p.name for p in TASK_DIRS]
TASKS = load_tasks("starter")

# --------------------------------------------------------------------------------------------
# Wrong solutions: each is the pack's wrong_solutions/<name>/solve.sh, a bash script run as the
# agent (cwd /app, no /tests; /solution/reference.sh is the task's reference, so that a
# near-miss can be written as "the reference plus one bug"). Each must apply cleanly (exit 0).
# Tasks whose verifier gives partial credit (partial_credit = true in [metadata]) only have to
# score below 1 for a wrong solution; every other task must score exactly 0.
# --------------------------------------------------------------------------------------------

PARTIAL_CREDIT = {t.id for t in TASKS if t.config.metadata.get("partial_credit") is True}

WRONG_SOLUTIONS: dict[str, dict[str, str]] = {
    task: {
        path.parent.name: path.read_text()
        for path in sorted((PACK_DIR / task / "wrong_solutions").glob("*/solve.sh"))
    }
    for task in TASK_IDS
}
#: Hostile wrong solutions (issue 29: what the agent leaves is read without following links,
#: regular files only): each scores exactly 0, partial credit or not, and its checker ends on
#: its own (no timeout, no missing reward) however the agent's files block a plain reader.
HOSTILE: set[tuple[str, str]] = {
    ("data-querying-easy-library-loans", "answers-link-to-root-file"),
    ("file-operations-easy-archive-logs", "fifo-in-archive"),
    ("file-operations-easy-archive-logs", "links-in-archive"),
    ("file-operations-easy-archive-logs", "archive-is-a-link"),
}
