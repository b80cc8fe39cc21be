"""The sales-queries cases: the three databases (the visible seed and two hidden ones, made
by ``make_db.py`` and travelling as SQL dumps), the reference queries' results on them, and
the comparison (the harness's ``function`` comparison): one check a query, right on every
database, numbers within the column's tolerance."""

import os
import sqlite3
import tempfile

import make_db

SEEDS = [1, 20240, 777]
QUERIES = [f"q{i}" for i in range(1, 7)]
# allowed absolute difference per column (None: exact)
TOLERANCE = {"q1": [None, 0.011], "q2": [None, None, None], "q3": [None, None, 0.011],
             "q4": [None, None], "q5": [None, 0.011, 0.11], "q6": [None, None, 0.011]}


def dumps(rng, *seeds):
    """The call's input: each seed's database as an SQL dump, and the queries' names (a list,
    not a dict: ``hs.made`` digests a dict as named files, the checker a call's input whole)."""
    scripts = []
    with tempfile.TemporaryDirectory() as d:
        for seed in seeds:
            path = os.path.join(d, f"sales_{seed}.db")
            make_db.build(path, seed)
            con = sqlite3.connect(path)
            scripts.append("\n".join(con.iterdump()))
            con.close()
    return [scripts, QUERIES]


def expected(made, *seeds):
    """Each query's reference rows on each database, restored from its dump as the child
    restores it."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    for q in QUERIES:
        with open(os.path.join(here, "reference", q + ".sql")) as f:
            sql = f.read()
        rows = []
        for script in made[0]:
            con = sqlite3.connect(":memory:")
            con.executescript(script)
            rows.append([list(r) for r in con.execute(sql).fetchall()])
            con.close()
        out.append({"query": q, "rows": rows})
    return out


def same(q, want, got):
    if not isinstance(got, list):
        return f"expected rows, got {str(got)[:80]}"
    if len(want) != len(got):
        return f"{len(got)} rows, expected {len(want)}"
    for n, (w, g) in enumerate(zip(want, got)):
        if not isinstance(g, list) or len(g) != len(w):
            return f"row {n} has {len(g) if isinstance(g, list) else '?'} columns, expected {len(w)}"
        for tol, a, b in zip(TOLERANCE[q], w, g):
            if tol is None:
                ok = a == b and type(a) is type(b) or (
                    isinstance(a, int | float) and isinstance(b, int | float) and a == b)
            else:
                ok = isinstance(b, int | float) and not isinstance(b, bool) and abs(a - b) <= tol
            if not ok:
                return f"row {n}: expected {w}, got {g}"
    return None


def check(ck, label, want, got, options):
    """One check a query: its rows on every database, in order."""
    q = want["query"]
    if isinstance(got, dict) and "missing" in got:
        ck.check(label, False, f"{got['missing']} is missing")
        return
    if not isinstance(got, list) or len(got) != len(SEEDS):
        ck.check(label, False, f"reported {str(got)[:200]}")
        return
    for seed, rows, result in zip(SEEDS, want["rows"], got):
        if not isinstance(result, dict) or "rows" not in result:
            error = result.get("error") if isinstance(result, dict) else result
            ck.check(label, False, f"seed {seed}: the query failed: {str(error)[:200]}")
            return
        problem = same(q, rows, result["rows"])
        if problem:
            ck.check(label, False, f"seed {seed}: {problem}")
            return
    ck.check(label, True)
