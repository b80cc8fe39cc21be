"""Static checks of the starter pack: every task.toml, the layout, the coverage, the size."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from palaestra.env.sandbox_spec import local_plan
from palaestra.sandbox.dockerfile import parse_dockerfile
from palaestra.sandbox.dockerfile_replay import apt_packages
from tests.tasks.starter.pack import (
    ALLOWED_DOCKERFILE_INSTRUCTIONS,
    CATEGORIES,
    DIFFICULTIES,
    PACK_DIR,
    PARTIAL_CREDIT,
    TASK_DIRS,
    TASK_IDS,
    TASKS,
    WRONG_SOLUTIONS,
)


def load_toml(task_dir: Path) -> dict:
    with open(task_dir / "task.toml", "rb") as f:
        return tomllib.load(f)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_task_layout_and_metadata(task_id: str) -> None:
    task_dir = PACK_DIR / task_id
    cfg = load_toml(task_dir)
    meta = cfg["metadata"]
    assert cfg["version"] == "1.0"
    assert meta["category"] in CATEGORIES
    assert meta["difficulty"] in DIFFICULTIES
    assert meta["author_name"] == "palaestra"
    assert isinstance(meta["tags"], list) and meta["tags"]
    assert all(isinstance(t, str) and t for t in meta["tags"])
    assert task_id.startswith(f"{meta['category']}-{meta['difficulty']}-"), task_id
    # the optimization tasks' checkers run the original programs up to their CPU bars on one
    # CPU: on a busy machine that takes minutes of wall time
    limit = 300 if meta["category"] == "optimization" else 120
    assert 0 < cfg["verifier"]["timeout_sec"] <= limit
    assert cfg["agent"]["timeout_sec"] > 0
    env = cfg["environment"]
    assert env["cpus"] >= 1 and env["memory_mb"] >= 512 and env["storage_mb"] > 0
    for rel in ("instruction.md", "environment/Dockerfile", "tests/test.sh", "solution/solve.sh"):
        assert (task_dir / rel).is_file(), f"{task_id}: {rel} is missing"
    assert len((task_dir / "instruction.md").read_text().strip()) > 200
    for ins in parse_dockerfile((task_dir / "environment" / "Dockerfile").read_text()):
        assert ins.keyword in ALLOWED_DOCKERFILE_INSTRUCTIONS, ins
        assert ins.keyword != "RUN" or apt_packages(ins.value) == ("python3",), ins
    task = TASKS.get(task_id)  # what the Harbor loader makes of it
    assert (task.category, task.difficulty) == (meta["category"], meta["difficulty"])
    assert task.network == task.verifier_network == "none", "starter tasks run offline"
    assert local_plan(task).workdir == "/app" and local_plan(task).files


def test_pack_covers_every_category_and_tier_once() -> None:
    pairs = [
        (load_toml(d)["metadata"]["category"], load_toml(d)["metadata"]["difficulty"])
        for d in TASK_DIRS
    ]
    assert sorted(pairs) == sorted((c, t) for c in CATEGORIES for t in DIFFICULTIES)
    for task_id in TASK_IDS:
        assert WRONG_SOLUTIONS[task_id], f"{task_id} needs at least one wrong solution"
        for folder in (PACK_DIR / task_id / "wrong_solutions").iterdir():
            assert (folder / "solve.sh").is_file(), f"{folder} has no solve.sh: never run"


def test_partial_credit_is_declared_where_the_verifier_gives_it() -> None:
    """``partial_credit = true`` in ``[metadata]`` (what ``tasks check`` reads to accept a wrong
    solution below 1) exactly on the tasks whose harness spec rewards a fraction of checks."""
    import marshal
    import zlib

    partial = set()
    for task_dir in TASK_DIRS:
        spec = task_dir / "tests" / "harness.bin"
        if spec.is_file() and marshal.loads(zlib.decompress(spec.read_bytes())).get("reward"):
            partial.add(task_dir.name)
    assert PARTIAL_CREDIT == partial and len(partial) == 3, (PARTIAL_CREDIT, partial)


def test_pack_is_small() -> None:
    total = sum(p.stat().st_size for p in PACK_DIR.rglob("*") if p.is_file())
    assert total < 1_000_000, f"the starter pack is {total} bytes"
