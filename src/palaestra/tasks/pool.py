"""The task pool: a directory of Harbor tasks that a creator policy wrote, with provenance.

Layout::

    POOL/<task-id>/            an accepted task (a Harbor task directory, usable as is)
    POOL/<task-id>/provenance.json
        {"creator": ..., "policy_version": ..., "parent": ..., "created_at": ...,
         "validation": {...}, "solve_rates": [0.5, ...], "similarity": ...}
    POOL/.rejected/<n>.json    a rejected proposal: its text, the reason, the validation record
    POOL/.staging/             proposals being validated (never a task of the pool)

The pool is a task source like any directory (``make("pool:POOL")`` or ``make("POOL")``);
:meth:`Pool.difficulties` gives each task's measured difficulty (1 - its latest solve rate) for
the curricula. :func:`shingles` and :func:`jaccard` find near-duplicates. Nothing here runs a
task: validation and calibration are :mod:`palaestra.run.validate`'s and
:mod:`palaestra.rl.self_play`'s.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from palaestra.tasks.loader import load_task
from palaestra.tasks.proposal import Proposal, proposal_of, render_task_toml
from palaestra.tasks.source import TaskSet
from palaestra.tasks.task import Task

PROVENANCE = "provenance.json"
_TOKEN = re.compile(r"[A-Za-z0-9_]+")


def shingles(text: str, k: int = 3) -> frozenset[tuple[str, ...]]:
    """The ``k``-token shingles of ``text`` (lower-cased word tokens)."""
    tokens = [t.lower() for t in _TOKEN.findall(text)]
    if len(tokens) < k:
        return frozenset([tuple(tokens)]) if tokens else frozenset()
    return frozenset(tuple(tokens[i : i + k]) for i in range(len(tokens) - k + 1))


def jaccard(a: frozenset[Any], b: frozenset[Any]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def solve_rate_bin(rate: float, bins: int = 5) -> str:
    """The histogram bin of a solve rate: ``"0.2-0.4"``; solve rates 0 and 1 get their own."""
    if rate <= 0.0 or rate >= 1.0:
        return f"{rate:.0f}"
    i = min(int(rate * bins), bins - 1)
    return f"{i / bins:.1f}-{(i + 1) / bins:.1f}"


class Pool:
    """A pool directory (created when missing). Not safe across processes writing at once."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._shingles: dict[str, frozenset[tuple[str, ...]]] | None = None

    def task_dirs(self) -> list[Path]:
        return sorted(p.parent for p in self.root.glob(f"*/{PROVENANCE}"))

    def tasks(self) -> TaskSet:
        """The accepted tasks, as a task source."""
        return TaskSet([load_task(d) for d in self.task_dirs()], name=f"pool:{self.root}")

    def provenance(self, task_id: str) -> dict[str, Any]:
        return json.loads((self.root / task_id / PROVENANCE).read_text())

    def difficulties(self) -> dict[str, float]:
        """Each task's difficulty in [0, 1]: 1 - its latest measured solve rate."""
        found = {}
        for d in self.task_dirs():
            rates = self.provenance(d.name)["solve_rates"]
            if rates:
                found[d.name] = 1.0 - rates[-1]
        return found

    def staging_dir(self) -> Path:
        """A fresh directory under ``.staging`` to write and validate a proposal in."""
        path = self.root / ".staging" / uuid.uuid4().hex[:12]
        path.mkdir(parents=True)
        return path

    def _index(self) -> dict[str, frozenset[tuple[str, ...]]]:
        if self._shingles is None:
            self._shingles = {
                d.name: shingles(proposal_of(load_task(d)).text()) for d in self.task_dirs()
            }
        return self._shingles

    def nearest(self, proposal: Proposal) -> tuple[float, str | None]:
        """The highest Jaccard similarity of ``proposal`` to a pool task, and that task."""
        mine = shingles(proposal.text())
        best: tuple[float, str | None] = (0.0, None)
        for task_id, theirs in list(self._index().items()):  # add() may run meanwhile
            score = jaccard(mine, theirs)
            if score > best[0]:
                best = (score, task_id)
        return best

    def _free_id(self, proposal: Proposal) -> str:
        base = proposal.id or "task"
        task_id, n = base, 1
        while (self.root / task_id).exists():
            n += 1
            task_id = f"{base}-{n}"
        return task_id

    def add(self, staged: Path, proposal: Proposal, provenance: dict[str, Any]) -> Task:
        """Move the staged task directory into the pool with its provenance; the loaded task."""
        task_id = self._free_id(proposal)
        record = {"created_at": time.time(), "solve_rates": [], **provenance}
        (staged / PROVENANCE).write_text(json.dumps(record, indent=1, default=str) + "\n")
        staged.rename(self.root / task_id)
        if self._shingles is not None:
            self._shingles[task_id] = shingles(proposal.text())
        return load_task(self.root / task_id)

    def record_solve_rate(self, task_id: str, rate: float) -> None:
        """Append a measured solve rate to the task's history; ``task.toml``'s difficulty
        becomes its tier (:func:`~palaestra.tasks.proposal.tier`), so reports by tier and
        curricula see the measured difficulty, not the creator's claim."""
        record = self.provenance(task_id)
        record["solve_rates"].append(rate)
        task_dir = self.root / task_id
        (task_dir / PROVENANCE).write_text(json.dumps(record, indent=1) + "\n")
        proposal = proposal_of(load_task(task_dir))
        (task_dir / "task.toml").write_text(render_task_toml(proposal, rate))

    def reject(self, text: str, reason: str, record: dict[str, Any]) -> Path:
        """Keep a rejected proposal with its reason."""
        path = self.root / ".rejected" / f"{time.time_ns()}-{uuid.uuid4().hex[:6]}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(
            json.dumps({"reason": reason, "text": text, **record}, indent=1, default=str) + "\n"
        )
        return path

    def discard(self, staged: Path) -> None:
        shutil.rmtree(staged, ignore_errors=True)

    def stats(self) -> dict[str, Any]:
        """Counts, acceptance and rejection reasons, and the solve-rate histogram."""
        rejected = Counter(
            json.loads(p.read_text())["reason"]
            for p in sorted((self.root / ".rejected").glob("*.json"))
        )
        histogram: Counter[str] = Counter()
        for d in self.task_dirs():
            rates = self.provenance(d.name)["solve_rates"]
            histogram[solve_rate_bin(rates[-1]) if rates else "unmeasured"] += 1
        accepted = sum(histogram.values())
        total = accepted + sum(rejected.values())
        return {
            "accepted": accepted,
            "rejected": sum(rejected.values()),
            "proposals": total,
            "acceptance": accepted / total if total else None,
            "rejections": dict(rejected.most_common()),
            "difficulty": dict(histogram),
        }
