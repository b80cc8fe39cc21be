"""The rest of Harbor, with tasks written as third-party authors write them: a separate verifier
(``environment_mode = "separate"``, the tests' own image from ``tests/Dockerfile``),
``[environment.healthcheck]``, ``[agent] user`` and multi-step tasks (``steps/``)."""

from __future__ import annotations

import textwrap

import pytest

from palaestra import CodeEnv
from palaestra.env.agent_user import agent_sandbox
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.run.check import check_tasks
from palaestra.sandbox import SandboxSpec, make_backend
from palaestra.sandbox.docker import DockerBackend
from palaestra.scaffolds import NopPolicy, OraclePolicy
from palaestra.tasks import Task, TaskConfig, load_task
from palaestra.tasks.verifier_env import artifact_sources
from tests.conftest import SUBMIT_ACTION, bash_action
from tests.env.test_third_party_tasks import SERVICE_DOCKERFILE
from tests.sandbox.docker_support import needs_docker

#: The tests' image: test.sh and the expected answer live only here, never in the agent's.
TESTS_DOCKERFILE = """\
FROM debian:bookworm-slim
COPY test.sh expected.txt /tests/
WORKDIR /app
"""
SEPARATE_TEST_SH = """\
if [ "$(cat /app/answer.txt 2>/dev/null)" = "$(cat /tests/expected.txt)" ] \\
   && [ "$(cat /logs/artifacts/note.txt 2>/dev/null)" = "done" ]; then
  echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


def separate_task(make_task) -> Task:
    path = make_task(
        "separate-verifier",
        solve_sh="echo 42 > /app/answer.txt && echo done > /logs/artifacts/note.txt\n",
        test_sh=SEPARATE_TEST_SH,
    )
    toml = (path / "task.toml").read_text()
    # artifacts is a top-level key, so it comes before the first table
    toml = toml.replace("[verifier]\n", '[verifier]\nenvironment_mode = "separate"\n')
    (path / "task.toml").write_text('artifacts = ["/app"]\n' + toml)
    (path / "tests" / "Dockerfile").write_text(TESTS_DOCKERFILE)
    (path / "tests" / "expected.txt").write_text("42\n")
    return load_task(path)


async def rewards(task: Task, backend: str | DockerBackend) -> tuple[float | None, ...]:
    """The oracle's reward, then doing nothing's."""
    found = []
    for policy in (OraclePolicy.from_tasks([task]), NopPolicy()):
        async with CodeEnv([task], sandbox=backend) as env:
            episode = await rollout(env, policy)
        assert episode.end.verified and episode.end.status != "error", episode.end
        found.append(episode.reward)
    return tuple(found)


async def test_separate_verifier_runs_the_tests_image_on_the_agents_artifacts(make_task):
    task = separate_task(make_task)
    assert task.verifier_environment is not None and task.verifier_environment.bundled_tests
    assert await rewards(task, "local") == (1.0, 0.0)


@pytest.mark.slow
@needs_docker
async def test_separate_verifier_on_docker(make_task):
    task = separate_task(make_task)
    backend = DockerBackend()
    try:
        assert await rewards(task, backend) == (1.0, 0.0)
    finally:
        await backend.aclose()


async def test_tampering_agent_cannot_reach_the_separate_verifier(make_task):
    """What the agent plants outside its artifacts, and links inside them, do not arrive."""
    task = separate_task(make_task)
    tamper = bash_action(
        "mkdir -p /tests /logs/verifier && echo 1 > /logs/verifier/reward.txt"
        " && printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh"
        " && echo 43 > /tests/expected.txt && echo done > /logs/artifacts/note.txt"
        " && ln -s /tests/expected.txt /app/answer.txt"  # an absolute link: dropped in transit
        " && (sleep 3; echo 1 > /logs/verifier/reward.txt) > /dev/null 2>&1 &"
    )
    async with CodeEnv([task]) as env:
        episode = await rollout(env, ScriptedPolicy([tamper, SUBMIT_ACTION]))
    assert episode.end.verified and episode.end.status == "failed", episode.end
    assert episode.reward == 0.0


HEALTHCHECK = """
[environment.healthcheck]
command = "n=$(cat /tmp/tries 2>/dev/null || echo 0); echo $((n + 1)) > /tmp/tries; [ $n -ge 2 ]"
interval_sec = 0.05
retries = {retries}
"""


async def test_healthcheck_retries_then_hands_the_sandbox_over(make_task):
    task = load_task(make_task("healthy", extra_toml=HEALTHCHECK.format(retries=3)))
    policy = ScriptedPolicy([bash_action("cat /tmp/tries"), SUBMIT_ACTION])
    async with CodeEnv([task]) as env:
        episode = await rollout(env, policy)
    assert episode.end.verified, episode.end
    # it failed twice, passed on the third try, and only then did the agent's first command run
    assert "<output>\n3\n</output>" in policy.requests[1].messages[-1]["content"]


async def test_healthcheck_that_never_passes_is_an_infrastructure_error(make_task):
    task = load_task(make_task("unhealthy", extra_toml=HEALTHCHECK.format(retries=2)))
    async with CodeEnv([task]) as env:
        episode = await rollout(env, NopPolicy())
    end = episode.end
    assert end.status == "error" and end.infra_error and not end.verified
    assert end.error_class == "HealthcheckError"
    assert "[environment.healthcheck] failed 2 consecutive time(s)" in end.error_message
    assert not episode.turns  # the agent never started


#: The image's entrypoint (SERVICE_DOCKERFILE's): a "service" that is ready a second after the container starts.
SERVICE_SH = """\
#!/bin/sh
( sleep 1; mkdir -p /srv; echo up > /srv/ready ) &
exec "$@"
"""


@needs_docker
async def test_healthcheck_waits_for_the_service_on_docker(make_task):
    task = load_task(
        make_task(
            "service-healthcheck",
            dockerfile=SERVICE_DOCKERFILE,
            files={"service.sh": SERVICE_SH},
            extra_toml='\n[environment.healthcheck]\ncommand = "test -s /srv/ready"\n'
            "start_period_sec = 20\nstart_interval_sec = 0.1\nretries = 1\n",
        )
    )
    policy = ScriptedPolicy([bash_action("cat /srv/ready"), SUBMIT_ACTION])
    backend = DockerBackend()
    try:
        async with CodeEnv([task], sandbox=backend) as env:
            episode = await rollout(env, policy)
    finally:
        await backend.aclose()
    assert episode.end.verified, episode.end
    assert "up" in policy.requests[1].messages[-1]["content"]


@pytest.mark.parametrize("user", ["nobody", 65534])
async def test_agent_user_runs_the_agents_commands(make_task, user: str | int):
    value = f'"{user}"' if isinstance(user, str) else str(user)
    task = load_task(
        make_task(
            "as-nobody",
            extra_toml=f"user = {value}\n",  # appended to [agent]
            test_sh="""\
                [ "$(cat /tmp/who)" = nobody ] && [ "$(id -un)" = root ] \\
                  && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
                """,
        )
    )
    assert task.agent_user == user
    policy = ScriptedPolicy([bash_action("id -un | tee /tmp/who"), SUBMIT_ACTION])
    async with CodeEnv([task]) as env:
        episode = await rollout(env, policy)
    assert episode.reward == 1.0, episode.end  # the agent was nobody; the verifier root
    assert "nobody" in policy.requests[1].messages[-1]["content"]


async def test_agent_user_runs_the_agents_shell_sessions() -> None:
    backend = make_backend("local")
    try:
        async with await backend.create(SandboxSpec()) as sandbox:
            agent = agent_sandbox(sandbox, "nobody")
            async with agent.shell() as sh, agent.shell(user="root") as root:
                assert (await sh.run("id -un")).stdout == "nobody\n"
                assert (await root.run("id -un")).stdout == "root\n"
    finally:
        await backend.aclose()


def test_artifact_sources_start_with_the_convention_directory() -> None:
    config = TaskConfig.model_validate(
        {"artifacts": ["out.txt", {"source": "/data", "exclude": ["*.tmp"]}]}
    )
    assert [a.source for a in artifact_sources(config, "/app")] == [
        "/logs/artifacts",
        "/app/out.txt",
        "/data",
    ]


MULTI_STEP_TOML = """\
multi_step_reward_strategy = "mean"

[agent]
timeout_sec = 600.0

[[steps]]
name = "write"
min_reward = 1.0

[[steps]]
name = "extend"
"""


def multi_step_task(root) -> Task:
    """Step "write" has its own tests; step "extend" brings files and a set-up script, and is
    verified by the task's shared tests/test.sh."""
    files = {
        "task.toml": MULTI_STEP_TOML,
        "environment/Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\n",
        "steps/write/instruction.md": "Write 42 to /app/answer.txt.\n",
        "steps/write/solution/solve.sh": "echo 42 > /app/answer.txt\n",
        "steps/write/tests/test.sh": """\
            #!/bin/bash
            [ "$(cat /app/answer.txt)" = 42 ] && r=1 || r=0
            echo "{\\"reward\\": $r, \\"wrote\\": $r}" > /logs/verifier/reward.json
            """,
        "steps/extend/instruction.md": "Append the number in /app/seed.txt to /app/answer.txt.\n",
        "steps/extend/workdir/seed.txt": "7\n",
        "steps/extend/workdir/setup.sh": "echo setup-ran > /app/setup.log\n",
        "steps/extend/solution/solve.sh": "cat /app/seed.txt >> /app/answer.txt\n",
        "tests/test.sh": """\
            #!/bin/bash
            [ "$(cat /app/answer.txt)" = "$(printf '42\\n7')" ] && [ -s /app/setup.log ] \\
              && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
            """,
    }
    for rel, text in files.items():
        path = root / "multi" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return load_task(root / "multi")


async def test_multi_step_task_oracle_and_nop(tmp_path):
    task = multi_step_task(tmp_path)
    assert [s.step for s in task.steps] == ["write", "extend"]
    async with CodeEnv([task]) as env:
        oracle = await rollout(env, OraclePolicy.from_tasks([task]))
        nop = await rollout(env, NopPolicy())
    assert oracle.reward == 1.0 and [s["reward"] for s in oracle.info["steps"]] == [1.0, 1.0]
    assert oracle.end.rewards == {"reward": 1.0, "wrote": 0.5}  # a missing key counts 0
    # doing nothing misses step one's min_reward: the second step never runs
    assert nop.reward == 0.0 and [s["step"] for s in nop.info["steps"]] == ["write"]


async def test_multi_step_steps_share_the_sandbox_not_the_tests(tmp_path):
    task = multi_step_task(tmp_path)
    policy = ScriptedPolicy(
        [
            bash_action("echo 42 > /app/answer.txt"),
            SUBMIT_ACTION,
            bash_action("ls -A /tests /logs/verifier; cat /app/setup.log /app/answer.txt"),
            SUBMIT_ACTION,
        ]
    )
    async with CodeEnv([task]) as env:
        episode = await rollout(env, policy)
    seen = policy.requests[3].messages[-1]["content"]
    assert "setup-ran" in seen and "42" in seen and "test.sh" not in seen
    assert "Append the number" in policy.requests[2].messages[1]["content"]  # a new conversation
    assert episode.reward == 0.5 and episode.end.status == "failed"  # (1 + 0) / 2


async def test_tasks_check_runs_them_as_episodes(tmp_path, make_task):
    """``palaestra tasks check``: the oracle of each step, a wrong solution, nothing at all."""
    multi = multi_step_task(tmp_path)
    wrong = multi.path / "wrong_solutions" / "off-by-one"
    wrong.mkdir(parents=True)
    (wrong / "solve.sh").write_text("echo 41 > /app/answer.txt\n")
    results = await check_tasks([multi, separate_task(make_task)])
    assert [(r.task_id, r.scenario, r.reward, r.ok) for r in results] == [
        ("multi", "oracle", 1.0, True),
        ("multi", "nop", 0.0, True),
        ("multi", "wrong:off-by-one", 0.0, True),
        ("separate-verifier", "oracle", 1.0, True),
        ("separate-verifier", "nop", 0.0, True),
    ]
