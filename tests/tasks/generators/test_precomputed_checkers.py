"""Checkers that read what the generator precomputed (``tests/precomputed.bin``, or the
declarative hidden test's ``tests/harness.bin``): they use it, and a missing or corrupt one
gives no reward (never a pass). (region-revenue-pg's SQL-only answers:
tests/sandbox/test_hostile_sql.py.)"""

from __future__ import annotations

import marshal
import zlib
from pathlib import Path

import pytest

from palaestra import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.sandbox.local import LocalBackend
from palaestra.scaffolds import OraclePolicy
from palaestra.tasks import load_task
from palaestra.tasks.generators import write as write_generated
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier


async def _oracle_reward(task_dir: Path) -> float | None:
    task = load_task(task_dir)
    async with CodeEnv([task], sandbox=LocalBackend()) as env:
        return (await rollout(env, OraclePolicy.from_tasks([task]))).reward


async def _reward_of(task_dir: Path, answer: str) -> tuple[float | None, str]:
    command = f"cat > /app/answer.sql <<'EOF_ANSWER'\n{answer}\nEOF_ANSWER"
    policy = ScriptedPolicy([bash_action(command), SUBMIT_ACTION])
    async with CodeEnv(TaskSet.from_dir(task_dir), sandbox=LocalBackend()) as env:
        episode = await rollout(env, policy)
    verifier = episode.end.verifier
    return episode.reward, verifier.output if verifier is not None else ""


@pytest.mark.parametrize(
    "family", ["unindexed-sqlite", "build-graph-memo", "log-query-cli", "orders-pipeline"]
)
async def test_checker_needs_its_precomputed_cases(family: str, tmp_path: Path):
    task_dir = write_generated(family, 3, 0.0, tmp_path / "task")
    assert await _oracle_reward(task_dir) == 1.0
    blob = task_dir / "tests" / "precomputed.bin"
    if not blob.exists():  # a declarative hidden test: its spec holds the cases
        blob = task_dir / "tests" / "harness.bin"
    blob.write_bytes(blob.read_bytes()[:-40])  # corrupt
    assert await _oracle_reward(task_dir) == 0.0
    blob.unlink()
    assert await _oracle_reward(task_dir) == 0.0


async def test_log_query_usage_errors_still_checked_against_the_reference(tmp_path: Path):
    """The one command line argparse rejects has no precomputed result (its words vary with
    the Python): the reference runs on it, and a tool that words it otherwise fails."""
    task_dir = write_generated("log-query-cli", 5, 0.5, tmp_path / "task")
    spec = marshal.loads(zlib.decompress((task_dir / "tests" / "harness.bin").read_bytes()))
    (usage,) = [part for part in spec["also"] if part["reference"]]
    assert usage["cases"][0]["by_reference"]  # its expected value: the reference's, run now
    tool = next(iter(usage["reference"]["files"])).split("/")[0]
    solve = task_dir / "solution" / "solve.sh"
    solve.write_text(
        solve.read_text() + f'\nsed -i \'s/prog="{tool}"/prog="{tool}-x"/\' /app/{tool}/cli.py\n'
    )
    assert await _oracle_reward(task_dir) == 0.0
