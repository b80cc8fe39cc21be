"""A verifier of one's own, through the ``Verifier`` protocol: ``CodeEnv`` runs it after the
agent's phase, in the agent's sandbox, and its result is the episode's reward."""

from __future__ import annotations

from palaestra.env.code_env import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.sandbox.base import Sandbox
from palaestra.tasks import Task
from palaestra.tasks.source import TaskSet
from palaestra.verify import HarborVerifier, Verifier, VerifierResult, VerifierStatus
from tests.conftest import SUBMIT_ACTION, MakeTask, bash_action


class WordCount:
    """Rewards the fraction of the words "alpha beta gamma" in /app/answer.txt; no test.sh."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []

    async def verify(
        self, task: Task, sandbox: Sandbox, *, timeout: float | None = None
    ) -> VerifierResult:
        await sandbox.kill_all()
        alive = (await sandbox.exec("pgrep -x sleep")).ok
        self.calls.append((task.id, alive))
        res = await sandbox.exec(["cat", "/app/answer.txt"])
        if not res.ok:
            return VerifierResult(VerifierStatus.ERROR, error="no /app/answer.txt")
        found = sum(word in res.stdout.split() for word in ("alpha", "beta", "gamma"))
        return VerifierResult(VerifierStatus.OK, reward=found / 3, rewards={"words": found})


def test_the_shipped_verifier_and_one_of_ones_own_are_verifiers() -> None:
    assert isinstance(HarborVerifier(), Verifier)
    assert isinstance(WordCount(), Verifier)
    assert not isinstance(object(), Verifier)


async def test_codeenv_scores_episodes_with_a_verifier_of_ones_own(make_task: MakeTask) -> None:
    task_dir = make_task("words", instruction="Write alpha beta gamma to /app/answer.txt.")
    verifier = WordCount()
    async with CodeEnv(TaskSet.from_dir(task_dir.parent), verifier=verifier) as env:
        actions = [bash_action("(sleep 300 &) ; echo alpha gamma > /app/answer.txt"), SUBMIT_ACTION]
        two = await rollout(env, ScriptedPolicy(actions))
        nothing = await rollout(env, ScriptedPolicy([SUBMIT_ACTION]))
    assert two.reward == 2 / 3
    assert two.end.rewards["words"] == 2
    assert nothing.end.status == "error"
    assert "no /app/answer.txt" in (nothing.end.error_message or "")
    # It ran once per episode, after the agent's processes were killed.
    assert verifier.calls == [("words", False), ("words", False)]
