"""The starter pack under test: its tasks, and the wrong solutions each must reject."""

from __future__ import annotations

from palaestra.env.registry import load_tasks
from palaestra.tasks.pack_cache import PACKS_DIR, materialise
from tests.tasks.starter.wrong_solutions_a_to_d import WRONG_SOLUTIONS_A_TO_D
from tests.tasks.starter.wrong_solutions_f_to_s import WRONG_SOLUTIONS_F_TO_S

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
# Wrong solutions: each is a bash script run as the agent (cwd /app, no /tests; /solution is
# mounted so that a near-miss can be written as "the reference plus one bug"). Each must apply
# cleanly (exit 0). Tasks whose verifier gives partial credit (reward.json with a fraction)
# only have to score below 1 for a wrong solution; every other task must score exactly 0.
# --------------------------------------------------------------------------------------------

PARTIAL_CREDIT = {
    "data-querying-easy-library-loans",
    "data-querying-medium-sales-queries",
    "file-operations-medium-dedupe-tree",
}

WRONG_SOLUTIONS: dict[str, dict[str, str]] = {**WRONG_SOLUTIONS_A_TO_D, **WRONG_SOLUTIONS_F_TO_S}
#: Hostile wrong solutions (issue 29: what the agent leaves is read without following links,
#: regular files only): each scores exactly 0, partial credit or not, and its checker ends on
#: its own (no timeout, no missing reward) however the agent's files block a plain reader.
HOSTILE: set[tuple[str, str]] = {
    ("data-querying-easy-library-loans", "answers-link-to-root-file"),
    ("file-operations-easy-archive-logs", "fifo-in-archive"),
    ("file-operations-easy-archive-logs", "links-in-archive"),
    ("file-operations-easy-archive-logs", "archive-is-a-link"),
}
