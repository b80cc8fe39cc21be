"""Built-in tasks are Harbor tasks that run anywhere: exported, on Docker, from their own images.

A sample of every source (a starter task, a generated task, a HumanEval task: the generator
families and the HumanEval export share one Dockerfile, the starter tasks one recipe) is
exported as plain Harbor task directories and run on the docker backend from the images their
Dockerfiles build on ``debian:bookworm-slim`` as Debian publishes it (no python3: the
Dockerfiles install what their tests need). The oracle must score 1, doing nothing 0. Image
builds are cached by content (the apt-get layer is shared), so only the first run on a machine
pays for them; the sample is small to keep the suite's time.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from palaestra import CodeEnv
from palaestra.run import rollout
from palaestra.sandbox.base import SandboxSpec
from palaestra.sandbox.docker import DockerBackend
from palaestra.scaffolds import NopPolicy, OraclePolicy
from palaestra.tasks import generators, load_task
from palaestra.tasks.datasets import humaneval
from palaestra.tasks.pack_cache import materialise
from tests.sandbox.docker_support import needs_docker


def sample_task_dirs() -> list[Path]:
    """One task of each source: the starter pack, the generators, HumanEval."""
    return [
        materialise("starter") / "algorithms-easy-merge-intervals",  # as it runs
        generators.materialise("bulk-rename", seed=1, difficulty=0.2),
        humaneval.load("humaneval-0").path,
    ]


@pytest.mark.slow
@needs_docker
async def test_a_sample_of_every_source_runs_on_docker_from_its_image(tmp_path: Path) -> None:
    exported = []
    for source in await asyncio.to_thread(sample_task_dirs):
        exported.append(tmp_path / source.name)
        await asyncio.to_thread(shutil.copytree, source, exported[-1])
    tasks = [load_task(path) for path in exported]
    backend = DockerBackend()
    gate = asyncio.Semaphore(4)

    async def reward(task_index: int, policy: str) -> tuple[str, str, float | None]:
        async with gate, CodeEnv(tasks, sandbox=backend) as env:
            agent = OraclePolicy.from_tasks(tasks) if policy == "oracle" else NopPolicy()
            episode = await rollout(env, agent, options={"task_index": task_index})
            image = env._specs[tasks[task_index].id].image or ""
            assert image.startswith("palaestra/task-"), image  # built from its Dockerfile
            return tasks[task_index].id, policy, episode.reward

    try:
        async with await backend.create(SandboxSpec(image="debian:bookworm-slim")) as sandbox:
            official = await sandbox.exec("test ! -e /usr/bin/python3")
        assert official.ok, "debian:bookworm-slim has python3: run scripts/provision-docker.sh"
        results = await asyncio.gather(
            *(reward(i, policy) for i in range(len(tasks)) for policy in ("oracle", "nop"))
        )
    finally:
        await backend.aclose()
    wrong = [r for r in results if r[2] != (1.0 if r[1] == "oracle" else 0.0)]
    assert not wrong, wrong
