"""Task proposals: the creator policy's structured answer, parsed and written as a Harbor task.

A proposal is one JSON object (alone, or in a fenced ```json block; the last such block counts)::

    {
      "id": "reverse-lines",                      optional slug (letters, digits, '-')
      "instruction": "Write /app/out.txt ...",    what the solver is asked to do
      "files": {"input.txt": "a\\nb\\n"},          optional: the workspace, copied to /app
      "tests": {"test.sh": "#!/bin/bash ..."},    tests/: test.sh required, writes
                                                  /logs/verifier/reward.txt or reward.json
      "solution": "#!/bin/bash ...",              solution/solve.sh (the reference)
      "outputs": ["out.txt"],                     optional: files under /app the solution writes
      "metadata": {"category": "file-operations", "difficulty": "easy", "tags": ["text"]}
    }

:func:`parse_proposal` checks the shape and the limits (:data:`LIMITS`) and gives one
:class:`ProposalError` line naming the field and the fix; :func:`forbidden` lists the static
content refusals (network use, a solution reading the tests or the verifier's logs, tests that
run agent code outside the shipped checker's jail: :mod:`palaestra.tasks.proposal_jail`);
:func:`write_proposal` writes the Harbor task directory, with three generic wrong solutions
under ``wrong_solutions/`` (empty output, the input echoed, the files deleted) that a
proposal's tests must reject. See docs/self-play.md.
"""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from palaestra.tasks.generators.base import DOCKERFILE, check_runtime_files
from palaestra.tasks.proposal_jail import outside_the_jail
from palaestra.tasks.task import Task

#: Size limits of a proposal: bytes of all its text, files per section, bytes of the instruction.
LIMITS = {"total_bytes": 256 * 1024, "files": 32, "instruction_bytes": 16 * 1024}
#: The time limits a proposed task gets (seconds): the solver's and the verifier's.
AGENT_TIMEOUT_SEC = 300.0
VERIFIER_TIMEOUT_SEC = 60.0

_PATH = re.compile(r"^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*$")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9\-]{0,62}$")
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n```", re.DOTALL)
_NETWORK = re.compile(
    r"\b(curl|wget|nc|ncat|socat|ssh|scp|rsync|telnet|ftp)\b|\bgit\s+(clone|fetch|pull)\b"
    r"|\b(pip3?|npm|gem|cargo)\s+install\b|\bapt(-get)?\s+(install|update)\b"
    r"|https?://|/dev/tcp/|\bsocket\b|\burllib\b|\brequests\b|\bhttp\.client\b"
)
_PEEKING = re.compile(r"/tests\b|/logs/verifier\b|/solution\b|\breward\.(txt|json)\b")
_WRITES_REWARD = re.compile(r"/logs/verifier/reward\.(txt|json)")


class ProposalError(ValueError):
    """A proposal that cannot become a task: one line naming the field and the fix."""


@dataclass(frozen=True)
class Proposal:
    """A parsed proposal; see the module docstring for the fields."""

    instruction: str
    tests: dict[str, str]
    solution: str
    files: dict[str, str] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str | None = None

    def text(self) -> str:
        """The instruction and the tests: what near-duplicate detection compares."""
        return "\n".join([self.instruction, *(self.tests[k] for k in sorted(self.tests))])

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "instruction": self.instruction,
            "files": self.files,
            "tests": self.tests,
            "solution": self.solution,
            "outputs": list(self.outputs),
            "metadata": self.metadata,
        }


def _extract_json(text: str) -> Any:
    blocks = _FENCE.findall(text)
    body = blocks[-1] if blocks else text[text.find("{") : text.rfind("}") + 1]
    if not body.strip():
        raise ProposalError(
            "no JSON object found: answer with one ```json block (docs/self-play.md)"
        )
    try:
        return json.loads(body)
    except json.JSONDecodeError as e:
        raise ProposalError(
            f"the proposal is not valid JSON ({e.msg} at line {e.lineno}): "
            "answer with one ```json block holding one object"
        ) from None


def _files(raw: dict[str, Any], key: str) -> dict[str, str]:
    value = raw.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ProposalError(f"{key!r} must be an object of relative path -> text content")
    if len(value) > LIMITS["files"]:
        raise ProposalError(f"{key!r} has {len(value)} files, over the limit of {LIMITS['files']}")
    for path in value:
        if not _PATH.match(path) or {".", ".."} & set(path.split("/")):
            raise ProposalError(
                f"{key!r}: path {path!r} is not a plain relative path; use "
                "letters, digits, '.', '_', '-' and '/' (no '.' or '..')"
            )
    return dict(value)


def parse_proposal(text: str) -> Proposal:
    """The proposal in a policy's answer; a :class:`ProposalError` when it is malformed."""
    raw = _extract_json(text)
    if not isinstance(raw, dict):
        raise ProposalError("the proposal must be a JSON object, not " + type(raw).__name__)
    instruction = raw.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise ProposalError("'instruction' is missing or empty: say what the solver must do")
    tests = _files(raw, "tests")
    if "test.sh" not in tests:
        raise ProposalError(
            "'tests' has no test.sh: add one that writes /logs/verifier/reward.txt (1 or 0)"
        )
    solution = raw.get("solution")
    if isinstance(solution, dict):
        solution = solution.get("solve.sh")
    if not isinstance(solution, str) or not solution.strip():
        raise ProposalError("'solution' is missing: give the reference solve.sh as a string")
    outputs = raw.get("outputs", [])
    if not isinstance(outputs, list) or not all(
        isinstance(o, str) and _PATH.match(o.removeprefix("/app/")) for o in outputs
    ):
        raise ProposalError("'outputs' must be a list of paths under /app, like [\"out.txt\"]")
    metadata = raw.get("metadata", {})
    if not isinstance(metadata, dict):
        raise ProposalError("'metadata' must be an object (category, difficulty, tags)")
    slug = raw.get("id")
    if slug is not None and (not isinstance(slug, str) or not _SLUG.match(slug)):
        raise ProposalError(f"'id' {slug!r} must be a lower-case slug like 'reverse-lines'")
    proposal = Proposal(
        instruction,
        tests,
        solution,
        _files(raw, "files"),
        tuple(o.removeprefix("/app/") for o in outputs),
        metadata,
        slug,
    )
    _check_size(proposal)
    return proposal


def _check_size(proposal: Proposal) -> None:
    if len(proposal.instruction.encode()) > LIMITS["instruction_bytes"]:
        raise ProposalError(
            f"'instruction' is over {LIMITS['instruction_bytes']} bytes: shorten it"
        )
    texts = [
        proposal.instruction,
        proposal.solution,
        *proposal.tests.values(),
        *proposal.files.values(),
    ]
    total = sum(len(t.encode()) for t in texts)
    if total > LIMITS["total_bytes"]:
        raise ProposalError(
            f"the proposal holds {total} bytes, over the limit of "
            f"{LIMITS['total_bytes']}: make the files smaller"
        )


def forbidden(proposal: Proposal) -> list[str]:
    """The static refusals: each a line saying what is refused (empty when none).

    The sandbox also runs every proposed task without a network; these checks refuse the
    attempt itself, so a task never depends on what a network would have given."""
    problems = []
    for where, text in [
        ("solution", proposal.solution),
        *((f"tests/{k}", v) for k, v in sorted(proposal.tests.items())),
    ]:
        if m := _NETWORK.search(text):
            problems.append(f"{where} uses the network ({m.group(0)!r}): tasks run offline")
    if m := _PEEKING.search(proposal.solution):
        problems.append(
            f"the solution reads the verifier's files ({m.group(0)!r}): it must "
            "solve the task from /app and the instruction alone"
        )
    if not _WRITES_REWARD.search("\n".join(proposal.tests.values())):
        problems.append("the tests never write /logs/verifier/reward.txt or reward.json")
    problems += outside_the_jail(proposal.tests)
    return problems


def _toml_string(value: Any, default: str) -> str:
    return json.dumps(value if isinstance(value, str) and value else default)


def tier(solve_rate: float) -> str:
    """The tier a measured solve rate means: easy from 2/3 up, hard below 1/3."""
    return "easy" if solve_rate >= 2 / 3 else "medium" if solve_rate >= 1 / 3 else "hard"


def render_task_toml(proposal: Proposal, solve_rate: float | None = None) -> str:
    """``task.toml``; with a measured ``solve_rate``, the difficulty is its :func:`tier` (and
    ``solve_rate`` and ``difficulty_value = 1 - solve_rate`` are in the metadata), else the
    creator's own claim."""
    meta = proposal.metadata
    tags = meta.get("tags") if isinstance(meta.get("tags"), list) else []
    tag_list = ", ".join(json.dumps(str(t)) for t in ["proposed", *tags])
    difficulty = _toml_string(meta.get("difficulty"), "unknown")
    measured = ""
    if solve_rate is not None:
        difficulty = json.dumps(tier(solve_rate))
        measured = f"solve_rate = {solve_rate:.4f}\ndifficulty_value = {1 - solve_rate:.4f}\n"
    text = textwrap.dedent(f"""\
        version = "1.0"

        [metadata]
        author_name = "palaestra creator"
        category = {_toml_string(meta.get("category"), "proposed")}
        difficulty = {difficulty}
        tags = [{tag_list}]

        [verifier]
        timeout_sec = {VERIFIER_TIMEOUT_SEC}

        [agent]
        timeout_sec = {AGENT_TIMEOUT_SEC}

        [environment]
        network_mode = "no-network"
        build_timeout_sec = 600.0
        cpus = 1
        memory_mb = 1024
        storage_mb = 1024
        """)
    return text.replace(f"tags = [{tag_list}]\n", f"tags = [{tag_list}]\n{measured}", 1)


def wrong_solutions(proposal: Proposal) -> dict[str, dict[str, str]]:
    """The generic wrong solutions a proposal's tests must reject, each its files: ``empty``
    (every workspace file and declared output emptied), ``echo`` (each declared output, or
    each workspace file, holds the input: the workspace files and the instruction,
    concatenated; the instruction is a file beside the script, never spliced into it) and
    ``delete`` (the workspace removed)."""
    targets = [f"/app/{o}" for o in proposal.outputs] or [f"/app/{f}" for f in proposal.files]
    quoted = " ".join(shlex.quote(t) for t in targets)
    each = f"for f in {quoted}; do "
    head = "#!/usr/bin/env bash\n# A generic wrong solution: the tests must reject it.\ncd /app\n"
    mkdirs = f'{each}mkdir -p "$(dirname "$f")"; done\n' if targets else ""
    echo = (
        'input=$(mktemp)\nfind /app -type f -exec cat {} + > "$input" 2>/dev/null || true\n'
        'cat "$(dirname "$0")/instruction.md" >> "$input"\n'
        + mkdirs
        + (f'{each}cp "$input" "$f"; done\n' if targets else "")
        + 'rm -f "$input"\n'
    )
    empty = mkdirs + "find /app -type f -exec truncate -s 0 {} +\n"
    return {
        "empty": {"solve.sh": head + empty + (f'{each}: > "$f"; done\n' if targets else "")},
        "echo": {"solve.sh": head + echo, "instruction.md": proposal.instruction},
        "delete": {"solve.sh": head + "find /app -mindepth 1 -delete\n"},
    }


def _write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    if path.suffix == ".sh":
        path.chmod(0o755)


def write_proposal(proposal: Proposal, dest: Path) -> Path:
    """Write ``proposal`` as a Harbor task directory at ``dest`` (which must not exist)."""
    dest.mkdir(parents=True)
    _write(dest / "task.toml", render_task_toml(proposal))
    _write(dest / "instruction.md", proposal.instruction.rstrip() + "\n")
    _write(dest / "environment" / "Dockerfile", DOCKERFILE)
    (dest / "environment" / "workspace").mkdir()
    for rel, content in proposal.files.items():
        _write(dest / "environment" / "workspace" / rel, content)
    # the jail its tests run the agent's code in (proposal_jail), for tests that use it (then
    # ``palaestra tasks check`` wants their checks to have run): the proposal's own files win
    uses = any("palaestra_" in text for text in proposal.tests.values())
    for rel, content in {**(check_runtime_files() if uses else {}), **proposal.tests}.items():
        _write(dest / "tests" / rel, content)
    _write(dest / "solution" / "solve.sh", proposal.solution)
    for name, files in wrong_solutions(proposal).items():
        for rel, content in files.items():
            _write(dest / "wrong_solutions" / name / rel, content)
    (dest / "proposal.json").write_text(json.dumps(proposal.to_json(), indent=1) + "\n")
    return dest


def _texts(root: Path) -> dict[str, str]:
    if not root.is_dir():
        return {}
    found = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        try:
            found[path.relative_to(root).as_posix()] = path.read_text()
        except UnicodeDecodeError:
            continue  # binary files cannot be shown in a text prompt
    return found


def proposal_of(task: Task) -> Proposal:
    """A loaded task as a proposal (what an example in the creator's prompt shows): the
    proposal it was written from when it has one, else its files read back. The workspace is
    ``environment/workspace/`` when present, else the environment's files but its Dockerfile."""
    saved = task.path / "proposal.json"
    if saved.is_file():
        return parse_proposal(saved.read_text())
    workspace = task.environment_dir / "workspace"
    files = (
        _texts(workspace)
        if workspace.is_dir()
        else {k: v for k, v in _texts(task.environment_dir).items() if k != "Dockerfile"}
    )
    solve = task.solve_script
    return Proposal(
        task.instruction,
        _texts(task.tests_dir),
        solve.read_text() if solve is not None else "",
        files,
        metadata={
            k: task.config.metadata[k]
            for k in ("category", "difficulty", "tags")
            if k in task.config.metadata
        },
        id=None,
    )
