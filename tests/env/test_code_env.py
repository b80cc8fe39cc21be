"""CodeEnv end to end on the real local sandbox."""

from __future__ import annotations

import asyncio

import pytest

from palaestra import CodeEnv, EpisodeError
from palaestra.env.types import EpisodeStatus
from palaestra.llm import LLMRequest, ScriptedPolicy
from palaestra.run import rollout
from palaestra.sandbox.base import SandboxError
from palaestra.scaffolds import BashScaffold, NopPolicy, OraclePolicy
from palaestra.scaffolds.base import EndReason
from palaestra.tasks import TaskError
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action
from tests.procs import own_sandbox_processes, sandbox_processes


def env_for(path, **kwargs) -> CodeEnv:
    return CodeEnv(TaskSet.from_dir(path), **kwargs)


async def test_oracle_passes_through_the_llm_boundary(make_task):
    task_dir = make_task()
    async with env_for(task_dir) as env:
        episode = await rollout(env, OraclePolicy.from_tasks(env.tasks))
    assert episode.terminated and episode.reward == 1.0
    info, end = episode.info, episode.end
    assert end.status == "passed" and end.verified and end.reason == "submitted"
    assert end.rewards == {"reward": 1.0} and info["step"] == 2
    assert "status" not in info and "rewards" not in info  # the end is one value, not loose keys
    assert "solve.sh" in episode.turns[0].action.content
    assert set(info["timings"]) >= {"sandbox_start_s", "agent_s", "verifier_s", "policy_s"}


async def test_nop_fails(make_task):
    async with env_for(make_task()) as env:
        episode = await rollout(env, NopPolicy())
    assert episode.terminated and episode.reward == 0.0 and episode.status == "failed"


async def test_scripted_episode_time_steps(make_task):
    async with env_for(make_task()) as env:
        ts = await env.reset(seed=1)
        assert ts.first() and ts.reward is None and ts.discount is None
        messages = ts.observation.messages
        assert messages[0]["role"] == "system" and "42" in messages[1]["content"]
        assert "episode_id" not in ts.observation.metadata and len(ts.info["episode_id"]) == 16
        ts = await env.step(bash_action("echo 42 > answer.txt && pwd && ls"))
        assert ts.mid() and ts.reward == 0.0 and ts.discount == 1.0
        last = ts.observation.messages[-1]["content"]
        assert "<returncode>0</returncode>" in last and "/app" in last and "answer.txt" in last
        ts = await env.step(SUBMIT_ACTION)
        assert ts.last() and ts.terminated and ts.reward == 1.0
        with pytest.raises(EpisodeError):
            await env.step(SUBMIT_ACTION)


async def test_later_turns_leave_earlier_observations_as_handed_out(make_task):
    # The scaffold's conversation is append-only and shared between requests: a trainer that
    # keeps every observation must still see each one as it was handed out.
    async with env_for(make_task()) as env:
        ts = await env.reset()
        kept = [(ts.observation, ts.observation.model_copy(deep=True))]
        for action in (bash_action("echo one"), "no block: a format error", bash_action("echo 2")):
            ts = await env.step(action)
            kept.append((ts.observation, ts.observation.model_copy(deep=True)))
        kept[0][0].messages.append({"role": "user", "content": "the caller's own message"})
        ts = await env.step(SUBMIT_ACTION)
    assert ts.last() and ts.terminated
    observations = [obs for obs, _ in kept]
    assert [len(obs.messages) for obs in observations] == [3, 4, 6, 8]  # 2 + the caller's
    assert kept[0][0].messages[:-1] == kept[0][1].messages
    for obs, copy in kept[1:]:
        assert obs == copy
        assert obs.messages[:2] == kept[0][1].messages  # the caller's append reached no later one
    assert "one" in observations[1].messages[-1]["content"]
    assert "```bash" in observations[2].messages[-1]["content"]  # the format error's guidance


async def test_tests_are_hidden_from_the_agent(make_task):
    async with env_for(make_task()) as env:
        await env.reset()
        ts = await env.step(
            bash_action(
                "test -e /tests/test.sh && echo VISIBLE || echo HIDDEN; echo files: $(ls -A /tests /solution)"
            )
        )
        assert "HIDDEN" in ts.observation.messages[-1]["content"]
        assert "files: /solution: /tests:" in ts.observation.messages[-1]["content"]
        await env.step(SUBMIT_ACTION)


async def test_reward_json_read_before_txt(make_task):
    task = make_task(
        test_sh="""\
        echo '{"reward": 0.5, "tests_passed": 1}' > /logs/verifier/reward.json
        echo 1 > /logs/verifier/reward.txt
        """
    )
    async with env_for(task) as env:
        episode = await rollout(env, NopPolicy())
    assert episode.reward == 0.5
    assert episode.end.rewards == {"reward": 0.5, "tests_passed": 1.0}
    assert episode.status == "failed"


async def test_stale_and_late_reward_files_do_not_count(make_task):
    """The agent plants a reward and leaves a process that writes one after it ends."""
    task = make_task(test_sh="sleep 1.5; echo verifier-ran\n")
    plant = (
        "echo 1 > /logs/verifier/reward.txt && echo '{\"reward\": 1}' > /logs/verifier/reward.json"
        " && (nohup sh -c 'sleep 0.7; echo 1 > /logs/verifier/reward.txt' >/dev/null 2>&1 &)"
    )
    policy = ScriptedPolicy([bash_action(plant), SUBMIT_ACTION])
    async with env_for(task) as env:
        episode = await rollout(env, policy)
    assert episode.reward == 0.0
    assert episode.status == "error"
    assert "wrote no reward" in episode.end.error
    assert episode.end.error_class == "VerifierError"
    assert "wrote no reward" in episode.end.error_message
    assert "verifier-ran" in episode.end.verifier.output


@pytest.mark.parametrize(
    "content,match",
    [
        ("abc", "reward.txt must hold one number"),
        ("", "reward.txt is empty"),
    ],
)
async def test_malformed_reward_is_an_error_with_output_kept(make_task, content, match):
    task = make_task(
        test_sh=f"echo TEST-OUTPUT-MARKER; printf '{content}' > /logs/verifier/reward.txt\n"
    )
    async with env_for(task) as env:
        episode = await rollout(env, NopPolicy())
    assert episode.status == "error" and episode.reward == 0.0
    assert match in episode.end.error
    assert "TEST-OUTPUT-MARKER" in episode.end.verifier.output


async def test_verifier_timeout_is_an_error(make_task):
    task = make_task(
        test_sh="echo started; sleep 30; echo 1 > /logs/verifier/reward.txt\n", verifier_timeout=1.0
    )
    async with env_for(task) as env:
        episode = await rollout(env, NopPolicy())
    assert episode.status == "error" and episode.end.error_class == "VerifierTimeout"
    assert episode.end.verifier.status == "timeout"
    assert "started" in episode.end.verifier.output


async def test_step_limit_truncates_and_still_verifies(make_task):
    policy = ScriptedPolicy(lambda req: bash_action("echo 42 > answer.txt"))
    async with env_for(make_task(), scaffold=BashScaffold(step_limit=3)) as env:
        episode = await rollout(env, policy)
    assert episode.truncated and not episode.terminated
    assert episode.end_reason == "step_limit" and episode.end.verified
    assert episode.reward == 1.0 and len(episode.turns) == 3
    assert (episode.status, episode.end_reason) == (EpisodeStatus.PASSED, EndReason.STEP_LIMIT)


async def test_truncation_without_verification(make_task):
    policy = ScriptedPolicy(lambda req: bash_action("echo 42 > answer.txt"))
    env = env_for(make_task(), scaffold=BashScaffold(step_limit=1), verify_on_truncation=False)
    async with env:
        episode = await rollout(env, policy)
    assert episode.truncated and not episode.end.verified and episode.reward == 0.0


async def test_agent_timeout_truncates_and_kills_the_command(make_task):
    policy = ScriptedPolicy([bash_action("echo agent-sleeper-marker; sleep 30")])
    async with env_for(make_task(), agent_timeout_sec=1.0) as env:
        episode = await rollout(env, policy)
    assert episode.truncated and episode.end_reason == "agent_timeout"
    assert episode.status == "failed" and episode.end.error_class is None
    assert 1.0 <= episode.info["timings"]["agent_s"] < 10
    assert not [p for p in sandbox_processes() if "agent-sleeper-marker" in p]


async def test_format_errors_get_guidance_then_end_the_episode(make_task):
    async with env_for(make_task()) as env:
        await env.reset()
        ts = await env.step("no code here")
        assert "EXACTLY ONE" in ts.observation.messages[-1]["content"]
        ts = await env.step("```bash\na\n```\n```bash\nb\n```")
        assert "contained 2 bash code blocks" in ts.observation.messages[-1]["content"]
        ts = await env.step("still nothing")
    assert ts.terminated and ts.end.reason == "format_error_limit" and ts.reward == 0.0


class _DyingScaffold:
    """Asks the policy once, then its sandbox 'dies' (the exception ends the scaffold)."""

    name = "dying"

    async def run(self, task, sandbox, llm):
        await llm.complete(LLMRequest(messages=[{"role": "user", "content": task.instruction}]))
        raise SandboxError("the sandbox died")


async def test_a_failing_scaffold_ends_an_error_episode_with_the_error_as_data(make_task):
    async with env_for(make_task(), scaffold=_DyingScaffold()) as env:
        episode = await rollout(env, NopPolicy())
    end = episode.end
    assert episode.terminated and episode.reward == 0.0 and not end.verified
    assert end.status is EpisodeStatus.ERROR and end.reason is EndReason.ERROR
    assert (end.error_class, end.error_message) == ("SandboxError", "the sandbox died")
    assert end.error == "SandboxError: the sandbox died" and end.infra_error


async def test_env_protocol_misuse(make_task):
    env = env_for(make_task())
    with pytest.raises(EpisodeError, match="reset"):
        await env.step(SUBMIT_ACTION)
    await env.reset()
    with pytest.raises(TypeError):
        await env.step(42)  # type: ignore[arg-type]
    await env.close()
    await env.close()
    with pytest.raises(EpisodeError, match="closed"):
        await env.reset()


async def test_reset_mid_episode_frees_the_previous_sandbox(make_task):
    async with env_for(make_task()) as env:
        await env.reset()
        await env.step(bash_action("(sleep 60; echo reset-leftover-marker) >/dev/null 2>&1 &"))
        await env.reset()
        assert not [p for p in sandbox_processes() if "reset-leftover-marker" in p]


async def test_seeds_reproduce_task_choice(make_task, tmp_path):
    root = tmp_path / "many"
    for i in range(6):
        make_task(f"t{i}", root=root)
    tasks = TaskSet.from_dir(root)

    async def choices(seed: int) -> list[str]:
        async with CodeEnv(tasks) as env:
            picked = [(await env.reset(seed=seed)).info["task_id"]]
            for _ in range(5):
                picked.append((await env.reset()).info["task_id"])
            return picked

    a, b, c = await choices(7), await choices(7), await choices(8)
    assert a == b
    assert a != c
    async with CodeEnv(tasks, pick="cycle") as env:
        assert [(await env.reset()).info["task_id"] for _ in range(7)] == [*tasks.ids, "t0"]
        assert (await env.reset(options={"task_id": "t3"})).info["task_id"] == "t3"


async def test_dockerfile_copy_and_env_reach_the_sandbox(make_task):
    task = make_task(
        dockerfile="FROM debian:bookworm-slim\nWORKDIR /work\nENV GREETING=hello\nCOPY data/ ./data/\n",
        files={"data/input.txt": "from-the-task\n"},
    )
    async with env_for(task) as env:
        ts = await env.reset()
        ts = await env.step(bash_action("pwd; cat data/input.txt; echo $GREETING"))
        out = ts.observation.messages[-1]["content"]
        assert "/work" in out and "from-the-task" in out and "hello" in out
        await env.step(SUBMIT_ACTION)


async def test_unsupported_dockerfile_names_the_docker_backend(make_task):
    # (RUN steps are built by Docker when present: tests/sandbox/test_images.py)
    task = make_task(dockerfile='FROM debian:bookworm-slim\nENTRYPOINT ["/start.sh"]\n')
    async with env_for(task) as env:
        with pytest.raises(TaskError, match="docker"):
            await env.reset()


@pytest.mark.slow
async def test_hundred_concurrent_episodes_leave_nothing_behind(make_task):
    tasks = TaskSet.from_dir(make_task().parent)

    async def one(i: int) -> float:
        async with CodeEnv(tasks) as env:
            policy = ScriptedPolicy(
                [bash_action(f"echo {42 if i % 2 else 41} > answer.txt"), SUBMIT_ACTION]
            )
            return (await rollout(env, policy)).reward

    rewards = await asyncio.gather(*(one(i) for i in range(100)))
    assert sorted(rewards) == [0.0] * 50 + [1.0] * 50
    # this process's sandboxes only: other processes on a shared host come and go meanwhile
    assert not own_sandbox_processes()


async def test_task_network_policy_reaches_the_sandbox(make_task):
    probe = bash_action(
        "python3 -c 'import socket; print(sorted(n for _, n in socket.if_nameindex()))'"
    )
    for mode, expect_only_lo in (("no-network", True), ("public", False)):
        task = make_task(f"net-{mode}", extra_toml=f'\n[environment]\nnetwork_mode = "{mode}"\n')
        async with env_for(task) as env:
            await env.reset()
            out = (await env.step(probe)).observation.messages[-1]["content"]
            assert ("['lo']" in out) is expect_only_lo, out


async def test_split_agent_and_verifier_network_is_refused(make_task):
    task = make_task(extra_toml='\n[environment]\nnetwork_mode = "no-network"\n')
    text = (
        (task / "task.toml")
        .read_text()
        .replace("[verifier]\n", '[verifier]\nnetwork_mode = "public"\n')
    )
    (task / "task.toml").write_text(text)
    async with env_for(task) as env:
        with pytest.raises(TaskError, match="verifier.*network_mode"):
            await env.reset()
