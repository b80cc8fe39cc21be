import warnings

import pytest
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

import palaestra
from palaestra import CodeEnv
from palaestra.env.checker import ConformanceError, check_env
from palaestra.env.gym import GymAdapter
from palaestra.env.types import Environment, restart, termination
from palaestra.llm import LLMRequest
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action
from tests.procs import own_sandbox_processes


async def test_code_env_conforms(make_task):
    await check_env(CodeEnv(TaskSet.from_dir(make_task().parent)))


class BrokenEnv(Environment):
    """Gives MID-less episodes with a reward on FIRST and allows step after LAST."""

    async def reset(self, *, seed=None, options=None):
        ts = restart(LLMRequest(messages=[{"role": "system", "content": "s"}]), {"episode_id": "e"})
        return type(ts)(ts.step_type, 1.0, None, ts.observation, ts.info)

    async def step(self, action):
        return termination(1.0, None, {"episode_id": "e", "task_id": "t"})


async def test_checker_reports_every_breach():
    with pytest.raises(ConformanceError) as err:
        await check_env(BrokenEnv())
    text = str(err.value)
    assert "FIRST must have reward and discount None" in text
    assert "info lacks 'task_id'" in text
    assert "step after LAST must raise" in text
    assert "LAST: observation is NoneType" in text
    assert "LAST info['end'] must be an EpisodeEnd" in text


def test_gym_adapter_runs_an_episode(make_task):
    env = GymAdapter(CodeEnv(TaskSet.from_dir(make_task().parent)))
    obs, info = env.reset(seed=3)
    assert isinstance(obs, LLMRequest) and info["task_id"] == "answer-task"
    assert env.observation_space.contains(obs) and env.action_space.contains("text")
    obs, reward, terminated, truncated, info = env.step(bash_action("echo 42 > answer.txt"))
    assert (reward, terminated, truncated) == (0.0, False, False)
    obs, reward, terminated, truncated, info = env.step(SUBMIT_ACTION)
    assert (reward, terminated, truncated) == (1.0, True, False) and info["end"].status == "passed"
    assert isinstance(obs, LLMRequest) and "answer.txt" in obs.messages[-2]["content"]
    env.close()
    env.close()


def test_gymnasium_check_env_passes_on_a_real_code_env():
    """Gymnasium's own checker: spaces, reset/step signatures, and its determinism checks
    (the same seed gives the same observation; the same action the same next one)."""
    env = GymAdapter(palaestra.make("starter:0:2"))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gymnasium_check_env(env, skip_render_check=True)
        # the only warnings are about the LLM spaces not being Box/Discrete-like, none about
        # determinism or the API
        assert not [w for w in caught if "determin" in str(w.message).lower()]
    finally:
        env.close()
    assert not own_sandbox_processes()


async def test_checker_catches_an_observation_that_differs_per_episode(make_task):
    class _Tagged(CodeEnv):
        async def reset(self, *, seed=None, options=None):
            ts = await super().reset(seed=seed, options=options)
            metadata = {**ts.observation.metadata, "episode_id": ts.info["episode_id"]}
            observation = ts.observation.model_copy(update={"metadata": metadata})
            return type(ts)(ts.step_type, ts.reward, ts.discount, observation, ts.info)

    with pytest.raises(ConformanceError, match="two different first observations"):
        await check_env(_Tagged(TaskSet.from_dir(make_task().parent)))
