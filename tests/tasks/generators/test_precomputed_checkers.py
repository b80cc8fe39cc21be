"""Checkers that read what the generator precomputed (``tests/precomputed.bin``): they use it,
a missing or corrupt one gives no reward (never a pass), and region-revenue-pg's batched psql
session cannot be confused by what the agent's SQL prints."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from palaestra import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.sandbox.dockerfile_replay import host_packages_missing
from palaestra.sandbox.local import LocalBackend
from palaestra.scaffolds import OraclePolicy
from palaestra.tasks import load_task
from palaestra.tasks.generators import write as write_generated
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action


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
    blob.write_bytes(blob.read_bytes()[:-40])  # corrupt
    assert await _oracle_reward(task_dir) == 0.0
    blob.unlink()
    assert await _oracle_reward(task_dir) == 0.0


async def test_log_query_usage_errors_still_checked_against_the_reference(tmp_path: Path):
    """The one command line argparse rejects has no precomputed result (its words vary with
    the Python): the reference runs on it, and a tool that words it otherwise fails."""
    task_dir = write_generated("log-query-cli", 5, 0.5, tmp_path / "task")
    tool = json.loads((task_dir / "tests" / "reference.json").read_text())
    tool = next(iter(tool)).split("/")[0]
    solve = task_dir / "solution" / "solve.sh"
    solve.write_text(
        solve.read_text() + f'\nsed -i \'s/prog="{tool}"/prog="{tool}-x"/\' /app/{tool}/cli.py\n'
    )
    assert await _oracle_reward(task_dir) == 0.0


pg = pytest.mark.skipif(
    bool(host_packages_missing(("postgresql",))), reason="needs PostgreSQL on this host"
)


@pg
async def test_region_revenue_batched_and_alone(tmp_path: Path):
    """The reference query passes batched and, with a psql command and no final semicolon,
    in one psql per data set; output that fakes markers, or a query right on one data set
    only, does not pass."""
    task_dir = write_generated("region-revenue-pg", 2, 0.1, tmp_path / "task")
    solve = (task_dir / "solution" / "solve.sh").read_text()
    right = solve.split("<<'PALAESTRA_EOF_0'\n", 1)[1].split("\nPALAESTRA_EOF_0", 1)[0]
    assert (await _reward_of(task_dir, right))[0] == 1.0
    alone = "\\pset null ''\n" + right.rstrip().rstrip(";")
    assert (await _reward_of(task_dir, alone))[0] == 1.0
    # prints the right rows once, then lines shaped like markers with the rest of it
    fake = (
        textwrap.dedent(
            """\
        SELECT 'x' AS a WHERE current_user <> 'reader_case0';
        SELECT repeat('0', 32) || ' ' || g FROM generate_series(1, 4) AS g;
        """
        )
        + right
    )
    reward, output = await _reward_of(task_dir, fake)
    assert reward == 0.0, output
    only_first = (
        f"SELECT * FROM ({right.rstrip().rstrip(';')}) AS r WHERE current_user = 'reader_case0';"  # noqa: E501
    )
    reward, output = await _reward_of(task_dir, only_first)
    assert reward == 0.0 and "PASS data set 1" in output, output
    # fails on data set 2 only: the batch stops there, and each data set is loaded again and
    # queried alone (its reader made once, in the batch)
    fails_second = (
        "SELECT 1 / (CASE WHEN current_user = 'reader_case1' THEN 0 ELSE 1 END) AS one;\n" + right
    )
    reward, output = await _reward_of(task_dir, fails_second)
    assert reward == 0.0, output
    assert "cannot load" not in output and "division by zero" in output, output
