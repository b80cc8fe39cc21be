"""Issue 29's attacks on the jail of agent code at verify time, on every backend of the
``backend`` fixture (local with each helper, Docker): none may score 1.

Each is an episode of a real task played by an agent that does not solve it, or solves it and
cheats on a bar: CPU spent in forks that each stay under RLIMIT_CPU (a relay) or in orphans,
a later case's input rewritten by an earlier run, the reference's package swapped for the
agent's own, a FIFO or a link planted where the checker reads the program's output, a
HumanEval answer that is not data or fakes a verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from palaestra.run.check import check_tasks
from palaestra.sandbox import SandboxBackend
from palaestra.tasks.datasets import humaneval
from palaestra.tasks.generators import generate
from palaestra.tasks.generators import write as write_generated
from tests.sandbox.test_hostile_rewards import assert_no_reward, play
from tests.tasks.starter.pack import LOADED_DIR, WRONG_SOLUTIONS
from tests.tasks.starter.test_episodes import with_solution

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

#: Appended to each module of /app: every public function, when its run has a CPU bar (an
#: RLIMIT_CPU), first burns 3 s of CPU in a relay of forks (0.5 s each, each parent waiting and
#: exiting as its child), then answers right.
RELAY_WRAPPER = r"""
import os as _o, resource as _r, time as _t


def _relay_burn(seconds):
    spent = 0.0
    while spent < seconds:
        start = _t.process_time()
        while _t.process_time() - start < 0.5:
            pass
        spent += 0.5
        pid = _o.fork()
        if pid:
            _o._exit(_o.waitstatus_to_exitcode(_o.waitpid(pid, 0)[1]))


def _wrap(f):
    def wrapped(*args, **kwargs):
        if _r.getrlimit(_r.RLIMIT_CPU)[0] != _r.RLIM_INFINITY:
            _relay_burn(3.0)
        return f(*args, **kwargs)
    return wrapped


for _n, _f in list(globals().items()):
    if callable(_f) and getattr(_f, "__module__", None) == __name__ and not _n.startswith("_"):
        globals()[_n] = _wrap(_f)
"""


def generated(family: str, seed: int, difficulty: float, dest: Path) -> Path:
    return write_generated(family, seed, difficulty, dest / family)


async def test_fork_relay_over_a_cpu_bar(backend: SandboxBackend, tmp_path: Path) -> None:
    """meeting-rooms' large case has a 2 s bar: the right answer after 3 s of CPU spent in a
    relay of forks fails it, counted over the tree."""
    task = generated("meeting-rooms", 3, 0.5, tmp_path)
    solve = generate("meeting-rooms", 3, 0.5).solution["solve.sh"]
    assert isinstance(solve, str)
    append = (
        "for f in $(grep -l '^def ' /app/*.py); do cat >> $f <<'EOF_RELAY'\n"
        f"{RELAY_WRAPPER}\nEOF_RELAY\ndone"
    )
    episode = await play(backend, task, solve, append)
    assert_no_reward(episode)
    assert "CPU time limit of 2s exceeded" in episode.end.verifier.output


async def test_reference_package_swapped(backend: SandboxBackend, tmp_path: Path) -> None:
    """client-resilience (hard): a wrong client that copies itself over the reference's
    package on import scores 0. Its expected values are fixed when the task is generated: no
    reference runs at verify time for it to replace, and its own calls are checked."""
    task = generated("client-resilience", 1, 0.9, tmp_path)
    attack = generate("client-resilience", 1, 0.9).wrong_solutions["swap-reference"]["solve.sh"]
    assert isinstance(attack, str)
    episode = await play(backend, task, attack)
    assert_no_reward(episode)
    output = episode.end.verifier.output
    assert "PASS scenario 0: calls" in output and "reference" not in output, output


STARTER = "optimization-easy-order-report"


@pytest.mark.parametrize("attack", ["orphans-burn-cpu", "shrinks-the-large-input"])
async def test_starter_cpu_bar_attacked(backend: SandboxBackend, attack: str) -> None:
    """The right report with 5.4 s of CPU spent in orphans (nobody waits for them), or the
    original program that would copy the small input over the large one from its first,
    untimed run (the harness gives each run its own case's inputs only): both over the large
    case's CPU bar, counted over the run's tree."""
    script = with_solution(WRONG_SOLUTIONS[STARTER][attack], STARTER)
    episode = await play(backend, LOADED_DIR / STARTER, f"cd /app && {script}")
    assert_no_reward(episode)
    bar = "large export (20000 customers, 80000 orders) within 4 s of CPU: CPU time limit of 4s"
    assert bar in episode.end.verifier.output


async def test_fifo_and_link_planted_as_outputs(backend: SandboxBackend, tmp_path: Path) -> None:
    """A report written as a FIFO (starter clickstream-report), and a DEST tree whose first
    file is a FIFO and second a link to the hidden test's test.sh (sort-inbox): each is a failed
    check, never a checker blocked until its alarm nor a file read through the link."""
    task = "data-querying-hard-clickstream-report"
    script = with_solution(WRONG_SOLUTIONS[task]["fifo-report"], task)
    episode = await play(backend, LOADED_DIR / task, f"cd /app && {script}")
    assert_no_reward(episode)
    assert "report.py wrote no regular file OUT_JSON" in episode.end.verifier.output

    inbox = generated("sort-inbox", 2, 0.2, tmp_path)
    attack = generate("sort-inbox", 2, 0.2).wrong_solutions["fifo-and-link-in-dest"]["solve.sh"]
    assert isinstance(attack, str)
    episode = await play(backend, inbox, attack)
    assert_no_reward(episode)
    output = episode.end.verifier.output
    assert "FAIL trial 0: out/sorted as expected" in output, output
    assert "Hidden verifier" not in output, output  # test.sh's second line


async def test_humaneval_answers_are_only_data(
    backend_once: SandboxBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HumanEval on the harness: its wrong solutions include an object equal to everything
    (it decodes as a value equal to nothing) and a module that prints a passing verdict, tries
    to write the reward and exits 0 at import: both score 0, the canonical solution 1."""
    monkeypatch.setenv("PALAESTRA_CACHE_DIR", str(tmp_path / "cache"))
    results = await check_tasks([humaneval.load("humaneval-0")], backend=backend_once)
    assert {r.scenario: r.reward for r in results} == {
        "oracle": 1.0,
        "nop": 0.0,
        "wrong:empty-body": 0.0,
        "wrong:always-equal": 0.0,
        "wrong:fake-verdict": 0.0,
    }, [r.detail[-400:] for r in results]
    assert all(r.ok for r in results)
