"""A hostile agent against the proxy's socket, which every sandbox of an external scaffold
shares (its directory is bind-mounted into each): it cannot remove, replace or add to it, nor
unmount it, so the episode prepared meanwhile (its CLI waiting at its first request) and every
later one still reach the real proxy, not one the agent would serve its own answers from."""

from __future__ import annotations

import pytest

from palaestra import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.scaffolds import ExternalScaffold, OraclePolicy
from palaestra.scaffolds.external import SANDBOX_PROXY_DIR
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action
from tests.procs import own_sandbox_processes
from tests.sandbox.docker_support import labelled_containers, needs_docker
from tests.scaffolds.conftest import proxy_stopped
from tests.scaffolds.test_external import AGENT_COMMAND

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

SOCKET = f"{SANDBOX_PROXY_DIR}/proxy.sock"
BASE_IMAGE = "palaestra/base:bookworm"
#: Each attempt prints its name and whether it took effect.
TAMPER = "; ".join(
    f"{{ {command}; }} 2>/dev/null && echo '{name}: DONE' || echo '{name}: refused'"
    for name, command in [
        ("rm", f"rm -f {SOCKET} && [ ! -e {SOCKET} ]"),
        ("mv", f"mv {SOCKET} {SANDBOX_PROXY_DIR}/old"),
        ("add", f"touch {SANDBOX_PROXY_DIR}/fake.sock"),
        ("chmod", f"chmod 000 {SOCKET}"),
        ("umount", f"umount -l {SANDBOX_PROXY_DIR}"),
        ("overmount", f"mount -t tmpfs none {SANDBOX_PROXY_DIR}"),
        (
            "fake",
            f"python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.bind('{SOCKET}')\"",
        ),
    ]
)


async def attack_while_the_next_episode_waits(make_task, sandbox: str) -> None:
    # the agent is a python3 script: an image that has one (debian:bookworm-slim has not)
    tasks = TaskSet.from_dir(make_task(dockerfile=f"FROM {BASE_IMAGE}\nWORKDIR /app\n").parent)
    scaffold = ExternalScaffold(command=AGENT_COMMAND)
    hostile = ScriptedPolicy([bash_action(TAMPER), SUBMIT_ACTION])
    async with CodeEnv(tasks, scaffold=scaffold, sandbox=sandbox) as env:
        attacked = await rollout(env, hostile, prepare_next={})
        report = hostile.requests[1].messages[-1]["content"]
        assert "DONE" not in report and report.count("refused") == 7, report
        assert attacked.end_reason == "submitted", attacked.end.error
        # the episode prepared while the agent attacked, then a new one: the real proxy
        for _ in range(2):
            episode = await rollout(env, OraclePolicy.from_tasks(env.tasks))
            assert episode.reward == 1.0, episode.end.error
            assert [c["kind"] for c in episode.info["executions"]] == ["llm", "llm", "command"]
    assert await proxy_stopped(scaffold)


async def test_an_agent_cannot_take_the_proxy_socket_from_the_next_episode(make_task):
    await attack_while_the_next_episode_waits(make_task, "local")
    assert not own_sandbox_processes()


@needs_docker
async def test_an_agent_cannot_take_the_proxy_socket_on_docker(make_task):
    await attack_while_the_next_episode_waits(make_task, "docker")
    assert await labelled_containers() == []
