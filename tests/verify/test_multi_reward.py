"""A multi-reward ``reward.json`` as Harbor's reward kit writes it, through the real verifier:
every dimension in the breakdown, the reward their mean or the task's named primary."""

from __future__ import annotations

from palaestra.env import CodeEnv
from palaestra.run import rollout
from palaestra.scaffolds import OraclePolicy
from palaestra.tasks import load_task

#: rewardkit's output for tests/correctness/ and tests/structure/ without a root reward.toml:
#: one key per dimension, no "reward" key, and reward-details.json beside it.
REWARDKIT_TEST_SH = """\
correct=0; [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ] && correct=1
printf '{\\n  "correctness": %s,\\n  "structure": 0.5\\n}' "$correct" > /logs/verifier/reward.json
echo '{"correctness": {"kind": "group"}}' > /logs/verifier/reward-details.json
"""


async def test_reward_kit_dimensions_become_the_breakdown_and_their_mean(make_task):
    mean_task = load_task(make_task("dimensions", test_sh=REWARDKIT_TEST_SH))
    path = make_task("named", test_sh=REWARDKIT_TEST_SH)
    toml = (path / "task.toml").read_text()
    (path / "task.toml").write_text(
        toml.replace("[metadata]\n", '[metadata]\nprimary_reward = "correctness"\n')
    )
    named_task = load_task(path)
    async with CodeEnv([mean_task, named_task], pick="cycle") as env:
        policy = OraclePolicy.from_tasks([mean_task, named_task])
        mean = await rollout(env, policy)
        named = await rollout(env, policy)
    assert mean.end.rewards == named.end.rewards == {"correctness": 1.0, "structure": 0.5}
    assert (mean.reward, mean.end.status) == (0.75, "failed")  # the mean misses 1.0
    assert (named.reward, named.end.status) == (1.0, "passed")  # the named primary
