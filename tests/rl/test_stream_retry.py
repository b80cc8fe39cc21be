"""evaluate and RolloutStream follow one retry rule, on the real local sandbox: an infrastructure
error runs again after the backoff (seen through an injected sleep), a deterministic error runs
once, and both runners (and the TRL adapter) decide alike on the same ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from palaestra.llm import LLMRequest, LLMResponse
from palaestra.rl.stream import RolloutStream
from palaestra.rl.stream_store import stream_identity
from palaestra.rl.trl_rollout import PalaestraRollout
from palaestra.run import evaluate
from palaestra.run.retry import RetryPolicy
from palaestra.run.store import read_episodes
from palaestra.sandbox.base import SandboxSpecError
from palaestra.scaffolds import BashScaffold
from tests.conftest import SUBMIT_ACTION
from tests.procs import own_sandbox_processes
from tests.rl.test_trainer import EvenFirstToken


class RateLimitError(Exception):
    """Named like the OpenAI SDK's transient error: an infrastructure error by its name."""


class Failing:
    """Raises ``error`` on the first ``failures`` requests it gets, then submits."""

    name = "failing"

    def __init__(self, error: type[BaseException], failures: int = 1_000) -> None:
        self.error, self.failures, self.calls = error, failures, 0

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"failure {self.calls}")
        return LLMResponse(content=SUBMIT_ACTION)


class Waits:
    """An injected sleep: records each backoff instead of waiting it out."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


@pytest.fixture
def task_dir(make_task) -> Path:
    return make_task().parent


async def stream_tries(task_dir: Path, policy: Failing, retry: RetryPolicy, out: Path):
    """Run one draw of one episode; the stream's stats and whether an episode came out."""
    stream = RolloutStream(str(task_dir), policy, concurrency=1, retries=retry, out_dir=out)
    async with stream:
        episodes = [e async for e in stream.episodes(draws=1)]
    return stream.stats, episodes


async def test_an_infra_error_is_retried_after_a_backoff_in_the_stream(task_dir, tmp_path):
    waits = Waits()
    policy = Failing(ConnectionResetError, failures=2)
    retry = RetryPolicy(retries=2, backoff_s=0.5, sleep=waits)
    stats, episodes = await stream_tries(task_dir, policy, retry, tmp_path)
    assert len(episodes) == 1 and episodes[0].status != "error"
    assert (stats.started, stats.errors, stats.retried, stats.dropped_error) == (3, 2, 2, 0)
    assert waits.seconds == [0.5, 1.0]
    rows = read_episodes(tmp_path, final_only=False)
    assert [(r["try"], r["final"], r["infra_error"]) for r in rows] == [
        (0, 0, 1),
        (1, 0, 1),
        (2, 1, 0),
    ]
    assert not own_sandbox_processes()


async def test_a_deterministic_error_runs_once_and_drops_its_group(task_dir, tmp_path):
    waits = Waits()
    policy = Failing(ValueError)  # a policy bug: it would fail the same way every time
    retry = RetryPolicy(retries=2, backoff_s=0.5, sleep=waits)
    stats, episodes = await stream_tries(task_dir, policy, retry, tmp_path)
    assert episodes == [] and policy.calls == 1 and waits.seconds == []
    assert (stats.started, stats.errors, stats.retried, stats.dropped_error) == (1, 1, 0, 1)
    (row,) = read_episodes(tmp_path, final_only=False)
    assert (row["error_class"], row["final"], row["infra_error"]) == ("ValueError", 1, 0)


@pytest.mark.parametrize(
    ("error", "infra"),
    [
        (ConnectionResetError, True),
        (RateLimitError, True),
        (SandboxSpecError, False),  # a SandboxError, but the spec would fail again
        (RuntimeError, False),
    ],
)
async def test_evaluate_and_the_stream_decide_alike_on_the_same_errors(
    task_dir, tmp_path, error, infra
):
    runs = {}
    for runner in ("evaluate", "stream"):
        waits, policy = Waits(), Failing(error)
        retry = RetryPolicy(retries=1, backoff_s=0.25, sleep=waits)
        out = tmp_path / runner
        if runner == "evaluate":
            summary = await evaluate(str(task_dir), policy, retries=retry, out_dir=out)
            assert summary["errors"] == 1
        else:
            stats, episodes = await stream_tries(task_dir, policy, retry, out)
            assert episodes == [] and stats.dropped_error == 1
        rows = read_episodes(out, final_only=False)
        decided = [(r["error_class"], r["infra_error"], r["try"], r["final"]) for r in rows]
        runs[runner] = (policy.calls, waits.seconds, decided)
    assert runs["evaluate"] == runs["stream"]
    calls, waited, decided = runs["stream"]
    name = error.__name__
    if infra:
        assert calls == 2 and waited == [0.25]
        assert decided == [(name, 1, 0, 0), (name, 1, 1, 1)]
    else:
        assert calls == 1 and waited == [] and decided == [(name, 0, 0, 1)]


class Tokens(Failing):
    """:class:`Failing`, answering with token ids (what the one-turn env reads)."""

    async def complete(self, request: LLMRequest) -> LLMResponse:
        response = await super().complete(request)
        return response.model_copy(update={"completion_token_ids": [2]})

    async def aclose(self) -> None:  # the adapter closes its policy
        pass


@pytest.mark.parametrize(("error", "calls"), [(ConnectionResetError, 3), (ValueError, 1)])
def test_the_trl_rollout_follows_the_same_rule(error, calls):
    waits = Waits()
    policy = Tokens(error, failures=2)
    retry = RetryPolicy(retries=2, backoff_s=0.5, sleep=waits)
    rollout = PalaestraRollout(EvenFirstToken, policy, retries=retry)  # type: ignore[arg-type]
    try:
        if calls == 1:  # a deterministic error fails the batch at once, naming it
            with pytest.raises(RuntimeError, match="deterministic error.*ValueError: failure 1"):
                rollout._run(rollout._episodes(["even"], step=0))
        else:  # an infrastructure error runs again after the backoff
            (episode,) = rollout._run(rollout._episodes(["even"], step=0))
            assert episode.reward == 1.0 and waits.seconds == [0.5, 1.0]
    finally:
        rollout.close()
    assert policy.calls == calls


async def test_an_environment_that_cannot_be_made_ends_the_stream_with_its_error():
    """Not an episode's failure, so not a try to retry or drop: a configuration error."""

    def broken():
        raise ValueError("no such scaffold option")

    stream = RolloutStream(broken, Failing(RuntimeError), concurrency=1)
    with pytest.raises(ValueError, match="no such scaffold option"):
        async with stream:
            [e async for e in stream.episodes(draws=3)]
    assert stream.stats.started == 0


def test_a_ray_stream_names_its_parts_from_the_overrides():
    """On Ray the environments are the actors': the run's identity reads the names passed."""
    identity = stream_identity("starter", "oracle", None, 8, 3, {"sandbox": "docker"})
    assert (identity["scaffold"], identity["sandbox"], identity["attempts"]) == (
        "bash",
        "docker",
        8,
    )
    overrides = {"scaffold": BashScaffold(step_limit=3)}
    assert stream_identity("starter", "oracle", None, 1, 0, overrides)["scaffold"] == "bash"
    assert stream_identity("starter", "oracle", None, 1, 0)["sandbox"] == "local"
