"""Third-party Harbor tasks run as Harbor runs them, on both backends.

* A Java-like task on ``debian:bookworm-slim`` with no python3 at all, whose tests are pure
  shell: palaestra's in-sandbox helper brings its own runtime, so the task runs on Docker and,
  from its built image, on the local backend.
* A task whose image ``ENTRYPOINT`` starts the service its tests need: Docker keeps the
  entrypoint (Harbor overrides only the command); the local backend refuses the task with the
  advice to use Docker, which the same test shows to be true.
* A task asking for more CPUs than the host has: Docker lowers the quota to the host's count
  and the episode's LAST info records it.
"""

from __future__ import annotations

import os

import pytest

from palaestra import CodeEnv
from palaestra.env.sandbox_spec import prepare_sandbox_spec
from palaestra.run import rollout
from palaestra.sandbox.docker import DockerBackend
from palaestra.scaffolds import NopPolicy, OraclePolicy
from palaestra.tasks import Task, TaskError, load_task
from tests.sandbox.docker_support import needs_docker

JAVA_LIKE_DOCKERFILE = """\
FROM debian:bookworm-slim
RUN rm -rf /usr/bin/python3* /usr/lib/python3* && mkdir -p /opt/jdk/bin \\
    && printf '#!/bin/sh\\necho "javac 17.0.2" >&2\\n' > /opt/jdk/bin/javac \\
    && chmod +x /opt/jdk/bin/javac
ENV PATH=/opt/jdk/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /app
"""

SERVICE_DOCKERFILE = """\
FROM debian:bookworm-slim
COPY service.sh /usr/local/bin/service.sh
ENTRYPOINT ["/bin/sh", "/usr/local/bin/service.sh"]
WORKDIR /app
"""
#: The image's entrypoint: starts a "service" (a status file it keeps fresh), runs its command.
SERVICE_SH = """\
#!/bin/sh
mkdir -p /srv
( while :; do echo up > /srv/status; sleep 0.1; done ) &
exec "$@"
"""


async def rewards(task: Task, backend: str | DockerBackend) -> tuple[float | None, ...]:
    """The oracle's reward, then doing nothing's."""
    found = []
    for policy in (OraclePolicy.from_tasks([task]), NopPolicy()):
        async with CodeEnv([task], sandbox=backend) as env:
            episode = await rollout(env, policy)
        found.append(episode.reward)
    return tuple(found)


@pytest.mark.slow
@needs_docker
async def test_task_without_python3_runs_on_both_backends(make_task) -> None:
    task = load_task(
        make_task(
            "java-like",
            instruction="Write what `javac -version` prints to /app/answer.txt.",
            dockerfile=JAVA_LIKE_DOCKERFILE,
            solve_sh="javac -version 2> /app/answer.txt\n",
            test_sh="""\
                if ! command -v python3 && [ -e /opt/jdk/bin/javac ] && \\
                   [ "$(cat /app/answer.txt)" = "javac 17.0.2" ]; then
                  echo 1 > /logs/verifier/reward.txt
                else echo 0 > /logs/verifier/reward.txt; fi
                """,
        )
    )
    backend = DockerBackend()
    try:
        assert await rewards(task, backend) == (1.0, 0.0)
    finally:
        await backend.aclose()
    assert (await prepare_sandbox_spec(task, "local")).rootfs is not None  # its own image's
    assert await rewards(task, "local") == (1.0, 0.0)


@needs_docker
async def test_entrypoint_service_runs_on_docker_and_local_says_so(make_task) -> None:
    task = load_task(
        make_task(
            "entrypoint-service",
            dockerfile=SERVICE_DOCKERFILE,
            files={"service.sh": SERVICE_SH},
            test_sh="""\
                rm -f /srv/status
                for i in $(seq 50); do [ -s /srv/status ] && break; sleep 0.1; done
                if [ -s /srv/status ] && [ "$(cat /app/answer.txt)" = "42" ]; then
                  echo 1 > /logs/verifier/reward.txt
                else echo 0 > /logs/verifier/reward.txt; fi
                """,
        )
    )
    with pytest.raises(TaskError, match=r'ENTRYPOINT.*sandbox="docker"'):
        await prepare_sandbox_spec(task, "local")
    backend = DockerBackend()
    try:
        assert await rewards(task, backend) == (1.0, 0.0)
    finally:
        await backend.aclose()


@needs_docker
async def test_cpus_beyond_the_host_run_lowered_and_recorded(make_task) -> None:
    asked = (os.cpu_count() or 1) + 6
    task = load_task(make_task("many-cpus", extra_toml=f"\n[environment]\ncpus = {asked}\n"))
    assert task.config.environment.cpus == asked
    backend = DockerBackend()
    try:
        async with CodeEnv([task], sandbox=backend) as env:
            episode = await rollout(env, OraclePolicy.from_tasks([task]))
    finally:
        await backend.aclose()
    assert episode.reward == 1.0, episode.end
    [note] = episode.info["sandbox_adjustments"]
    assert f"asked for {asked}" in note and f"the host has {os.cpu_count()}" in note
