"""Generated families beyond Python: C, Go, Rust and Node.js programs, and SQL on PostgreSQL.

Their toolchains are Debian packages the task's Dockerfile installs (the local backend finds
them on the host, where scripts/install-system-deps.sh put them). For every such family, one task
of each tier: the oracle scores 1, doing nothing 0, and every wrong solution 0, having built
(it fails on what it does, not because it does not compile). One family also runs on Docker from
the image its Dockerfile builds on ``debian:bookworm-slim``.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from palaestra import CodeEnv
from palaestra.run import rollout
from palaestra.run.check import check_tasks
from palaestra.sandbox.docker import DockerBackend
from palaestra.sandbox.dockerfile_replay import host_packages_missing, needs_image_build
from palaestra.scaffolds import NopPolicy, OraclePolicy
from palaestra.tasks import generators as g
from palaestra.tasks import load_task
from tests.sandbox.docker_support import needs_docker
from tests.tasks.family_facts import language_families, packages
from tests.tasks.test_generators import _cache  # noqa: F401  (a private generator cache)

LANGUAGE_FAMILIES = language_families()
ONE_PER_TIER = {"easy": 1, "medium": 8, "hard": 15}
PACKAGES = sorted({p for n in LANGUAGE_FAMILIES for p in packages(n)})
needs_toolchains = pytest.mark.skipif(
    bool(host_packages_missing(tuple(PACKAGES))),
    reason=f"needs {', '.join(host_packages_missing(tuple(PACKAGES)))} on this host: run "
    "scripts/install-system-deps.sh as root (CI does)",
)


def test_every_language_and_postgresql_has_a_family():
    tags = {tag for name in LANGUAGE_FAMILIES for tag in g.generate(name, 0, 0.0).tags}
    assert {"c", "go", "rust", "javascript", "postgresql"} <= tags
    categories = {g.get_family(name).category for name in LANGUAGE_FAMILIES}
    assert len(categories) >= 5, categories
    pg = [n for n in LANGUAGE_FAMILIES if "postgresql" in packages(n)]
    assert [g.get_family(n).category for n in pg] == ["data-querying"]


@pytest.mark.slow
@needs_toolchains
@pytest.mark.parametrize("family", LANGUAGE_FAMILIES)
def test_dockerfile_installs_the_toolchain_and_the_local_backend_replays_it(family: str):
    task = g.generate(family, 0, 0.5)
    path = g.materialise(family, 0, 0.5)
    dockerfile = (path / "environment" / "Dockerfile").read_text()
    assert f"--no-install-recommends python3 {' '.join(task.packages)} " in dockerfile
    # the host has the packages (install-system-deps.sh): no image build for the local backend
    assert not needs_image_build(path / "environment"), dockerfile


@pytest.mark.slow
@needs_toolchains
@pytest.mark.parametrize("family", LANGUAGE_FAMILIES)
async def test_oracle_passes_nop_and_wrong_solutions_fail_in_every_tier(family: str):
    tasks = [
        g.load_generated(family, seed, g.tier_difficulty(tier, seed))
        for tier, seed in ONE_PER_TIER.items()
    ]
    results = await check_tasks(tasks, concurrency=4)
    bad = [
        f"{r.task_id} {r.scenario}: expected {r.expected}, got {r.reward} ({r.status})\n"
        f"{r.detail[-800:]}"
        for r in results
        if not r.ok
    ]
    assert not bad, "\n\n".join(bad)
    unbuilt = [f"{r.task_id} {r.scenario}" for r in results if r.rewards.get("compile_error")]
    assert not unbuilt, f"these did not build: {unbuilt}"
    for task in tasks:
        wrong = {r.scenario for r in results if r.task_id == task.id and "wrong:" in r.scenario}
        assert len(wrong) >= 3, (task.id, wrong)


@pytest.mark.slow
@needs_docker
async def test_a_c_task_runs_on_docker_from_its_image(tmp_path: Path) -> None:
    source = g.materialise("range-queries-c", seed=2, difficulty=0.1)
    exported = tmp_path / source.name
    await asyncio.to_thread(shutil.copytree, source, exported)
    task = load_task(exported)
    backend = DockerBackend()
    try:
        rewards = {}
        for name, agent in (("oracle", OraclePolicy.from_tasks([task])), ("nop", NopPolicy())):
            async with CodeEnv([task], sandbox=backend) as env:
                episode = await rollout(env, agent)
                assert (env._specs[task.id].image or "").startswith("palaestra/task-")
                rewards[name] = episode.reward
    finally:
        await backend.aclose()
    assert rewards == {"oracle": 1.0, "nop": 0.0}
