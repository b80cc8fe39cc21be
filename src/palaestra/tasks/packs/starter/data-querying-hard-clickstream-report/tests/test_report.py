"""Run the agent's report.py on three warehouses (the sample, a hand-made edge-case one and a
large hidden one) and compare every number with the reference implementation."""

import json
import os
import sqlite3
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, "/tests")
import gen_events  # noqa: E402
import reference_report  # noqa: E402

EDGE_ROWS = {
    "users": [("A", "DE", "2024-01-01"), ("B", "US", "2024-01-01"), ("C", "GB", "2024-01-01"),
              ("D", "JP", "2024-01-01")],
    "user_aliases": [("a3", "a2"), ("a1", "A"), ("a2", "a1"), ("b1", "B")],
    "fx_rates": [("2024-03-01", "USD", 0.9), ("2024-03-04", "USD", 0.8),
                 ("2024-03-01", "GBP", 1.2)],
    "events": [
        ("e01", "A", "2024-03-01T10:00:00Z", "view", None, None),
        ("e02", "a1", "2024-03-01T11:30:00+01:00", "add_to_cart", None, None),  # +1800 s
        ("e03", "a3", "2024-03-01 11:00:00", "purchase", "10.00", "EUR"),        # +1800 s
        ("e04", "A", "2024-03-01T11:30:01Z", "view", None, None),                # +1801 s
        ("e04", "A", "2024-03-01T11:30:01Z", "view", None, None),
        ("e05", "b1", "2024-03-02T23:50:00-05:00", "add_to_cart", None, None),
        ("e06", "B", "2024-03-03T05:00:00Z", "view", None, None),
        ("e07", "b1", "2024-03-03T05:10:00Z", "purchase", "100.00", "USD"),    # Sunday rate
        ("e08", "B", "2024-03-04T00:30:00+05:30", "purchase", "50.00", "USD"),  # UTC 03-03
        ("e10b", "C", "2024-03-01T12:00:00Z", "add_to_cart", None, None),
        ("e10a", "C", "2024-03-01T12:00:00Z", "view", None, None),  # same time: id decides
        ("e11", "C", "2024-03-01T12:20:00Z", "purchase", "20.00", "GBP"),
        ("e12", "nobody", "2024-03-01T12:00:00Z", "view", None, None),
        ("e13", "C", "2024-03-02T00:10:00+02:00", "search", None, None),  # UTC 03-01 22:10
    ],
}


def build_edge(path):
    con = sqlite3.connect(path)
    con.executescript(gen_events.SCHEMA)
    for table, rows in EDGE_ROWS.items():
        con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    con.commit()
    con.close()


def compare(want, got, path="report"):
    leaf = path.rsplit(".", 1)[-1]
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"{path}: expected an object, got {str(got)[:80]}"
        if set(want) != set(got):
            missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
            return f"{path}: keys differ (missing {missing[:5]}, unexpected {extra[:5]})"
        for k in want:
            problem = compare(want[k], got[k], f"{path}.{k}")
            if problem:
                return problem
        return None
    if not isinstance(got, int | float) or isinstance(got, bool):
        return f"{path}: expected a number, got {str(got)[:80]}"
    tol = 0.011 if leaf.startswith("revenue") or "revenue_eur_by_country" in path else (
        0.5 if leaf == "median_session_seconds" else 0)
    if abs(got - want) > tol:
        return f"{path}: expected {want}, got {got}"
    return None


def read_output(path, limit=16 << 20):
    """The report the agent's program wrote, never through a link and never blocking (a FIFO,
    a device: an error), at most ``limit`` bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        return json.loads(f.read(limit))


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        dbs = {}
        dbs["sample"] = os.path.join(d, "sample.db")
        gen_events.build(dbs["sample"], 5, n_users=30, n_events=600, days=8)
        dbs["edge"] = os.path.join(d, "edge.db")
        build_edge(dbs["edge"])
        dbs["large"] = os.path.join(d, "large.db")
        gen_events.build(dbs["large"], 31337, n_users=400, n_events=40_000, days=28)
        for db in dbs.values():  # root's: no run of the agent's program can change a later one
            os.chmod(db, 0o444)
        os.chmod(d, 0o755)
        wants = {name: reference_report.build_report(db) for name, db in dbs.items()}  # first
        for name, db in dbs.items():
            want = wants[name]
            work = tempfile.mkdtemp(dir=d)  # this run's own
            os.chown(work, 65534, 65534)
            out = os.path.join(work, f"{name}.json")
            try:
                proc = subprocess.run([sys.executable, "-I", "/app/report.py", db, out],
                                      cwd="/app", user=65534, group=65534, extra_groups=[], capture_output=True, text=True, timeout=20)
            except subprocess.TimeoutExpired:
                print(f"FAIL {name}: report.py took more than 20 s")
                failures += 1
                continue
            if proc.returncode != 0:
                print(f"FAIL {name}: report.py exited with {proc.returncode}:\n"
                      + proc.stderr[-2000:])
                failures += 1
                continue
            try:
                got = read_output(out)
            except Exception as e:
                print(f"FAIL {name}: cannot read the report: {e}")
                failures += 1
                continue
            problem = compare(want, got)
            print(f"{'ok  ' if not problem else 'FAIL'} {name}" + (f": {problem}" if problem else ""))
            failures += bool(problem)
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
