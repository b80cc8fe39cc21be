"""The one classification of errors (``is_infra_error``) and the one retry rule (``RetryPolicy``),
as plain values; evaluate and the stream applying them are in tests/rl/test_stream_retry.py."""

from __future__ import annotations

import pytest

from palaestra.env.end import EpisodeEnd, is_infra_error
from palaestra.env.types import EpisodeStatus
from palaestra.run.retry import RetryPolicy
from palaestra.run.rollout import Episode
from palaestra.sandbox.base import SandboxClosedError, SandboxError, SandboxSpecError
from palaestra.scaffolds.base import EndReason, Outcome
from palaestra.scaffolds.mcp_stdio import MCPServerError


class RateLimitError(Exception):
    """Named like the OpenAI SDK's: known by its name alone."""


class FlakyDisk(SandboxError):
    """A SandboxError subclass no list names: infrastructure by its base."""


class BrokenImage(SandboxSpecError):
    """Deterministic by its base, although a SandboxError too."""


INFRA = [
    SandboxError("died"),
    SandboxClosedError("closed"),
    MCPServerError("mcp"),
    FlakyDisk("disk"),
    ConnectionResetError("reset"),
    ConnectionAbortedError("aborted"),
    TimeoutError("slow"),
    BrokenPipeError("pipe"),
    RateLimitError("429"),
]
DETERMINISTIC = [
    SandboxSpecError("no python"),
    BrokenImage("pull"),
    RuntimeError("bug"),
    ValueError("bad"),
    KeyError("k"),
    ZeroDivisionError("z"),
]


@pytest.mark.parametrize("error", INFRA + DETERMINISTIC, ids=lambda e: type(e).__name__)
def test_an_exception_and_its_name_are_classified_alike_where_the_name_is_known(error):
    expected = error in INFRA
    assert is_infra_error(error) is expected
    assert EpisodeEnd.from_exception(error).infra_error is expected
    name = type(error).__name__
    if name not in ("MCPServerError", "FlakyDisk", "BrokenImage"):  # only the class knows these
        assert is_infra_error(name) is expected
    # CodeEnv's path: a scaffold outcome carrying the caught exception names and classifies it
    outcome = Outcome(EndReason.ERROR, 0, str(error), exception=error)
    assert outcome.error_class == name and is_infra_error(outcome.exception) is expected


def test_names_without_an_exception_and_no_error_at_all():
    assert is_infra_error("SandboxError") and is_infra_error("APIConnectionError")
    assert not is_infra_error("SandboxSpecError") and not is_infra_error("BuildError")
    assert not is_infra_error("VerifierError") and not is_infra_error("ScaffoldError")
    assert not is_infra_error(None) and not is_infra_error("")


def end(status: str, infra: bool = False) -> EpisodeEnd:
    reason = EndReason.EXCEPTION if status == "error" else EndReason.SUBMITTED
    return EpisodeEnd(EpisodeStatus(status), reason, infra_error=infra)


def test_only_infrastructure_errors_are_retried_and_only_while_tries_are_left():
    policy = RetryPolicy(retries=2, backoff_s=0.5)
    assert [policy.should_retry(end("error", True), i) for i in range(4)] == [
        True,
        True,
        False,
        False,
    ]
    for final in (end("error"), end("passed"), end("failed"), end("passed", infra=True)):
        assert not policy.should_retry(final, 0)
    assert [policy.delay(i) for i in range(3)] == [0.5, 1.0, 2.0]
    assert not RetryPolicy(0).should_retry(end("error", True), 0)


def test_of_builds_from_a_count_or_takes_a_policy():
    assert RetryPolicy.of(3) == RetryPolicy(3, 1.0)
    assert RetryPolicy.of(1, 0.25) == RetryPolicy(1, 0.25)
    given = RetryPolicy(4, 2.0)
    assert RetryPolicy.of(given) is given
    with pytest.raises(ValueError, match="retry_backoff_s"):
        RetryPolicy.of(given, 0.5)
    with pytest.raises(ValueError, match="retries=-1"):
        RetryPolicy(-1)


async def test_run_plays_until_a_final_try_and_waits_the_backoff_between():
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    policy = RetryPolicy(retries=3, backoff_s=0.5, sleep=sleep)
    ends = iter([end("error", True), end("error", True), end("passed")])
    tries: list[tuple[str, int, bool]] = []

    async def play() -> Episode:
        return Episode(turns=[], end=next(ends))

    async def record(episode: Episode, try_index: int, final: bool) -> None:
        tries.append((str(episode.status), try_index, final))

    last = await policy.run(play, record)
    assert last.status == "passed" and waits == [0.5, 1.0]
    assert tries == [("error", 0, False), ("error", 1, False), ("passed", 2, True)]

    waits.clear()
    ends = iter([end("error")])  # deterministic: one try, no wait
    assert (await policy.run(play, record)).status == "error" and waits == []
