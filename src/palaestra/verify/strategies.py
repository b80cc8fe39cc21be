"""Reward strategies: how an episode's reward is read from what the task's tests reported.

The task's own ``test.sh`` runs on the verifier's path (agent processes killed, tests uploaded
only then, agent code run unprivileged) and writes ``reward.json``: ``reward`` plus, for tasks
that declare them, per-test outcome counts (:mod:`palaestra.tasks.outcomes`). A strategy is a
pure function of those numbers: it never runs anything, so it cannot open a new way to fake a
reward; it only decides how the counts become one float.

=============  ==========================================================  ================
name           reward                                                      needs
=============  ==========================================================  ================
``harbor``     ``reward.json``'s ``reward`` (or ``reward.txt``), unchanged  nothing
``exec_only``  1 when the code compiles and no test case crashed, else 0    tests, compile
``io``         fraction of stdin/argv -> stdout cases matched                io
``assertions`` fraction of assert-style checks passed                       assertions
``coderl``     -1 compile error, -0.6 runtime error, -0.3 a failed test,    tests, compile
               +1 all passed (Le et al., 2022)
``partial``    tests passed / tests run                                     tests
``cure``       CURE's code reward; its test reward in the breakdown         cure
=============  ==========================================================  ================

A task that does not declare what a strategy needs is an error episode
(``RewardStrategyError``), never a reward of 0.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from palaestra.tasks import outcomes
from palaestra.verify.harbor import VerifierResult, VerifierStatus

if TYPE_CHECKING:
    from palaestra.sandbox.base import Sandbox
    from palaestra.tasks import Task
    from palaestra.verify.protocol import Verifier


class RewardStrategyError(ValueError):
    """A strategy cannot score a task: it does not report what the strategy needs."""


@dataclass(frozen=True)
class Scored:
    """A strategy's reward and the numbers it came from (beside the task's own keys)."""

    reward: float
    breakdown: dict[str, float] = dataclasses.field(default_factory=dict)


class RewardStrategy(abc.ABC):
    """Turns a verifier's ``rewards`` dict into the episode's reward. Subclass for your own:
    set ``name`` and ``requires`` (outcome keys the task must declare) and write ``score``."""

    name: ClassVar[str]
    requires: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def score(self, rewards: Mapping[str, float]) -> Scored:
        """The reward from ``rewards`` (holding every key in ``requires``)."""

    def instruction_note(self) -> str | None:
        """Text appended to each task's instruction (what the policy must also produce)."""
        return None

    def supports(self, declared: frozenset[str]) -> bool:
        return set(self.requires) <= declared

    def unsupported_message(self, task_id: str, declared: frozenset[str]) -> str:
        missing = [k for k in self.requires if k not in declared]
        return (
            f"reward={self.name!r} needs a task that reports {', '.join(missing)}; task "
            f"{task_id!r} declares {', '.join(sorted(declared)) or 'no per-test outcomes'} "
            "([metadata] reward_outcomes in task.toml). Use reward='harbor', or a source that "
            "reports them (HumanEval, the graded generator families: see docs/rewards.md)"
        )


def _fraction(passed: float, total: float) -> float:
    return passed / total if total > 0 else 0.0


class Harbor(RewardStrategy):
    """The task's own reward, as Harbor reads it."""

    name = "harbor"

    def score(self, rewards: Mapping[str, float]) -> Scored:
        if "reward" in rewards:
            return Scored(rewards["reward"])
        return Scored(next(iter(rewards.values())))


class ExecutionOnly(RewardStrategy):
    """1 when the agent's code compiles and runs on every test input without crashing or
    timing out, whatever it answers; else 0."""

    name = "exec_only"
    requires = outcomes.GRADED

    def score(self, rewards: Mapping[str, float]) -> Scored:
        ran = (
            rewards["compile_error"] == 0
            and rewards["tests_errored"] == 0
            and rewards["tests_total"] > 0
        )
        return Scored(1.0 if ran else 0.0)


@dataclass(frozen=True)
class IOMatch(RewardStrategy):
    """The fraction of stdin/argv -> stdout cases whose output matched; ``all_or_nothing``:
    1 only when every case matched."""

    all_or_nothing: bool = False
    name = "io"
    requires = outcomes.IO

    def score(self, rewards: Mapping[str, float]) -> Scored:
        total, passed = rewards["io_total"], rewards["io_passed"]
        if self.all_or_nothing:
            return Scored(1.0 if total > 0 and passed == total else 0.0)
        return Scored(_fraction(passed, total))


class Assertions(RewardStrategy):
    """The fraction of assert-style checks (a function's value for given arguments) passed."""

    name = "assertions"
    requires = outcomes.ASSERTIONS

    def score(self, rewards: Mapping[str, float]) -> Scored:
        return Scored(_fraction(rewards["assert_passed"], rewards["assert_total"]))


@dataclass(frozen=True)
class CodeRL(RewardStrategy):
    """CodeRL's graded return (Le et al., 2022): a compile error, else a runtime error in any
    test, else a failed test, else all passed; the worst outcome decides."""

    compile_error: float = -1.0
    runtime_error: float = -0.6
    failed: float = -0.3
    passed: float = 1.0
    name = "coderl"
    requires = outcomes.GRADED

    def score(self, rewards: Mapping[str, float]) -> Scored:
        if rewards["compile_error"] > 0:
            return Scored(self.compile_error)
        if rewards["tests_errored"] > 0:
            return Scored(self.runtime_error)
        total, passed = rewards["tests_total"], rewards["tests_passed"]
        if total > 0 and passed == total:
            return Scored(self.passed)
        return Scored(self.failed)


class PartialCredit(RewardStrategy):
    """Tests passed / tests run (0 when none ran)."""

    name = "partial"
    requires = outcomes.TESTS

    def score(self, rewards: Mapping[str, float]) -> Scored:
        return Scored(_fraction(rewards["tests_passed"], rewards["tests_total"]))


class Cure(RewardStrategy):
    """CURE (Wang et al., 2025): the policy writes the code and unit tests for it. The task's
    tests build the code x test pass matrix (the policy's tests against the reference, known
    wrong variants and the policy's code; the ground-truth tests against the policy's code) and
    report both rewards: the reward is the code reward, ``cure_test_reward`` is beside it."""

    name = "cure"
    requires = outcomes.CURE

    def score(self, rewards: Mapping[str, float]) -> Scored:
        return Scored(
            rewards["cure_code_reward"],
            {
                "code_reward": rewards["cure_code_reward"],
                "test_reward": rewards["cure_test_reward"],
            },
        )

    def instruction_note(self) -> str:
        return (
            "\n\n## Unit tests\n\nAlso write unit tests for your code in "
            "`/app/test_solution.py`: plain `def test_...():` functions (no arguments) that "
            "import what they test from `solution` and `assert` what it must do. They are "
            "scored by how well they tell correct implementations from wrong ones: each test "
            "must pass on a correct implementation and should fail on wrong ones.\n"
        )


STRATEGIES: dict[str, type[RewardStrategy]] = {
    s.name: s for s in (Harbor, ExecutionOnly, IOMatch, Assertions, CodeRL, PartialCredit, Cure)
}


def get_strategy(reward: str | RewardStrategy) -> RewardStrategy:
    """A strategy by name (``harbor``, ``exec_only``, ``io``, ``assertions``, ``coderl``,
    ``partial``, ``cure``) or the strategy object itself."""
    if isinstance(reward, RewardStrategy):
        return reward
    if isinstance(reward, str) and reward in STRATEGIES:
        return STRATEGIES[reward]()
    raise ValueError(
        f"unknown reward strategy {reward!r}; choose one of {', '.join(STRATEGIES)} or pass a "
        "RewardStrategy object"
    )


def apply_strategy(strategy: RewardStrategy, task: Task, result: VerifierResult) -> VerifierResult:
    """The verifier's result scored by ``strategy``: the same result for ``harbor`` or when the
    verifier gave no reward; an error result when the task cannot be scored this way."""
    if isinstance(strategy, Harbor) or not result.ok:
        return result

    def refuse(message: str) -> VerifierResult:
        return dataclasses.replace(
            result,
            status=VerifierStatus.ERROR,
            reward=None,
            error=message,
            strategy=strategy.name,
            error_kind=RewardStrategyError.__name__,
        )

    declared = task.reward_outcomes
    if not strategy.supports(declared):
        return refuse(strategy.unsupported_message(task.id, declared))
    absent = [k for k in strategy.requires if k not in result.rewards]
    if absent:
        return refuse(
            f"task {task.id!r} declares {', '.join(absent)} but its tests/test.sh did not "
            f"write them (reward.json holds {', '.join(sorted(result.rewards))}); see its "
            "verifier output"
        )
    scored = strategy.score(result.rewards)
    rewards = {
        **result.rewards,
        "harbor_reward": result.reward or 0.0,
        **scored.breakdown,
        "reward": scored.reward,
    }
    return dataclasses.replace(
        result, reward=scored.reward, rewards=rewards, strategy=strategy.name
    )


class StrategyVerifier:
    """A verifier scored by a strategy: ``inner`` runs (the Harbor verifier, with all its
    defences), then :func:`apply_strategy`. A task that cannot be scored is refused before its
    tests run."""

    def __init__(self, inner: Verifier, strategy: RewardStrategy) -> None:
        self.inner = inner
        self.strategy = strategy

    async def verify(
        self, task: Task, sandbox: Sandbox, *, timeout: float | None = None
    ) -> VerifierResult:
        if not self.strategy.supports(task.reward_outcomes):
            return VerifierResult(
                VerifierStatus.ERROR,
                error=self.strategy.unsupported_message(task.id, task.reward_outcomes),
                strategy=self.strategy.name,
                error_kind=RewardStrategyError.__name__,
            )
        result = await self.inner.verify(task, sandbox, timeout=timeout)
        return apply_strategy(self.strategy, task, result)
