"""What the SQLite query families share: databases built by the task's ``make_db.py`` source
from a seed, the hidden test (the reference query's rows on databases made from per-task
secret seeds, at generation time; the agent's query run read-only on the same databases by
the harness) and the wrong answer that hard-codes the visible database's rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from palaestra.tasks.generators import harness_spec as hs


def database(make_db: str, seed: int) -> sqlite3.Connection:
    """An in-memory database built by ``make_db``'s ``build(con, seed)``."""
    ns: dict = {"__name__": "make_db"}
    exec(compile(make_db, "make_db.py", "exec"), ns)
    con = sqlite3.connect(":memory:")
    ns["build"](con, seed)
    return con


def database_bytes(make_db: str, seed: int) -> bytes:
    con = database(make_db, seed)
    try:
        return con.serialize()
    finally:
        con.close()


def rows(make_db: str, seed: int, sql: str) -> list[list]:
    con = database(make_db, seed)
    try:
        return [list(r) for r in con.execute(sql)]
    finally:
        con.close()


def tests(
    *,
    make_db: str,
    reference: str,
    columns: Sequence[str],
    secrets: Sequence[int],
    visible_seed: int,
    path: str,
    tol: float,
) -> dict[str, str | bytes]:
    """The ``tests/`` of a query family: the query in ``path`` against a database per secret
    seed and the visible one; its column names exactly, its rows with numbers within
    ``tol``."""
    cases = []
    for i, seed in enumerate([*secrets, visible_seed]):
        label = "the visible database" if i == len(secrets) else f"regenerated database {i + 1}"
        want = {"columns": list(columns), "rows": rows(make_db, seed, reference)}
        cases.append(hs.Case(label, want=want, db=database_bytes(make_db, seed)))
    return hs.tests(
        answer=hs.sqlite_query(path),
        cases=cases,
        compare=hs.compare("rows", tol=tol, rows_label="rows on {label} ({n} expected)"),
        limits=hs.limits(timeout=60),
    )


def hardcoded(columns: Sequence[str], answer: list[list]) -> str:
    """A query that returns ``answer`` whatever the data: the visible database's rows."""
    aliases = ", ".join(f"column{i + 1} AS {c}" for i, c in enumerate(columns))
    values = ", ".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in answer)
    if not answer:
        values = "(" + ", ".join("NULL" for _ in columns) + ") LIMIT 0"
    return f"SELECT {aliases} FROM (VALUES {values})"


def _literal(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return repr(v)
