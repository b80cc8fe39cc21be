"""SQL answers are run as SQL only, once on each backend (``backend_once``: the verifier, not
the sandbox's helper, is under test): a PostgreSQL answer that is a psql meta-command, a
server-side program or file read, or a change of role, and an SQLite answer that attaches or
changes a database, all score 0, each refused for its own reason (the verifier's output says
which); the reference still passes the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from palaestra.sandbox import SandboxBackend
from palaestra.sandbox.dockerfile_replay import host_packages_missing
from palaestra.tasks.generators import write as write_generated
from tests.sandbox.test_hostile_rewards import play, write

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

pg = pytest.mark.skipif(
    bool(host_packages_missing(("postgresql",))), reason="needs PostgreSQL on this host"
)

#: answer -> what the verifier's output says about it
PG_ATTACKS = {
    "\\! touch /tmp/pwned": "syntax error",
    "COPY (SELECT 1) TO PROGRAM 'touch /tmp/pwned'": "not a query",
    "SET ROLE postgres": "not a query",
    "SELECT pg_read_file('/etc/shadow')": "permission denied for function pg_read_file",
}


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_generated("region-revenue-pg", 2, 0.1, tmp_path_factory.mktemp("gen") / "pg")


def _reference(task: Path) -> str:
    solve = (task / "solution" / "solve.sh").read_text()
    return solve.split("<<'PALAESTRA_EOF_0'\n", 1)[1].split("\nPALAESTRA_EOF_0", 1)[0]


def _output(episode) -> str:
    verifier = episode.end.verifier
    return verifier.output if verifier is not None else ""


@pg
@pytest.mark.parametrize("answer", list(PG_ATTACKS))
async def test_postgres_answer_is_sql_only(backend_once: SandboxBackend, region: Path, answer: str):
    episode = await play(backend_once, region, write("/app/answer.sql", answer))
    output = _output(episode)
    assert episode.end.status != "error", output
    assert episode.reward == 0.0, output
    assert PG_ATTACKS[answer] in output, output
    assert "PASS" not in output, output


@pg
async def test_postgres_reference_passes_and_more_than_one_statement_does_not(
    backend_once: SandboxBackend, region: Path
):
    right = _reference(region)
    episode = await play(backend_once, region, write("/app/answer.sql", right))
    assert episode.reward == 1.0, _output(episode)
    two = right.rstrip().rstrip(";") + ";\nSELECT 1;"
    episode = await play(backend_once, region, write("/app/answer.sql", two))
    assert episode.reward == 0.0 and "multiple commands" in _output(episode), _output(episode)


SQLITE_ATTACKS = {
    "ATTACH DATABASE '/tmp/x.db' AS x": "not authorized",
    "PRAGMA writable_schema = ON": "not authorized",
    "SELECT load_extension('/tmp/x.so')": "not authorized",
    "DELETE FROM tickets": "not authorized",
}


@pytest.mark.parametrize("answer", list(SQLITE_ATTACKS))
async def test_sqlite_answer_reads_only(backend_once: SandboxBackend, tmp_path: Path, answer: str):
    task = write_generated("ticket-report-sql", 1, 0.1, tmp_path / "sqlite")
    episode = await play(backend_once, task, write("/app/answer.sql", answer))
    output = _output(episode)
    assert episode.end.status != "error", output
    assert episode.reward == 0.0, output
    assert SQLITE_ATTACKS[answer] in output, output
