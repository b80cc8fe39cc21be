"""unindexed-sqlite: a per-user activity report that runs its SQLite queries against an
unindexed table, one full scan per user and query.

The program loads users and events CSVs into an in-memory SQLite database and, for each user,
asks for counts, totals and the last event; from medium on also the most frequent event kind,
on hard also the number of active days. Every lookup scans the whole events table. Difficulty
knobs: the data size and the number of per-user queries. Output must stay byte-identical on
fresh secret data (idle users, ties between kinds, malformed rows, events out of time order);
the large data set runs under a CPU bar.

The reference's output is made when the task is generated (see ``_bench``): csv, integer
sums and SQLite queries whose every order is explicit (ties broken by kind, users by rowid,
BINARY text comparison) print the same on any Python 3 and SQLite 3.
"""

from __future__ import annotations

import textwrap

from palaestra.tasks.generators import family, solve_sh_writing
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.optimization._bench import DRAWS, apply_edits, bench_tests

_PROGRAMS = ["user_activity.py", "activity_report.py", "engagement.py", "member_stats.py"]

_SOURCE = '''\
"""Per-user activity report.

    python3 {program} EVENTS_CSV USERS_CSV > activity.tsv

users: id,name   events: user_id,ts,kind,amount_cents (ts: ISO 8601, "2024-05-01T09:30:00")
Cells are stripped of blanks; event rows without four cells or with a non-integer amount
are ignored. One tab-separated line per user, in the order of the users file: id, name,
number of events, total amount, latest timestamp ("-" if none){extra_doc}.
"""

import csv
import sqlite3
import sys


def load(db, events_path, users_path):
    db.execute("CREATE TABLE users (id TEXT, name TEXT)")
    db.execute("CREATE TABLE events (user_id TEXT, ts TEXT, kind TEXT, amount INTEGER)")
    with open(users_path, newline="") as f:
        rows = csv.reader(f)
        next(rows, None)
        db.executemany(
            "INSERT INTO users VALUES (?, ?)",
            ([r[0].strip(), r[1].strip()] for r in rows if len(r) >= 2),
        )
    with open(events_path, newline="") as f:
        rows = csv.reader(f)
        next(rows, None)
        db.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?)",
            (
                [r[0].strip(), r[1].strip(), r[2].strip(), int(r[3])]
                for r in rows
                if len(r) == 4 and r[3].strip().lstrip("-").isdigit()
            ),
        )


def fmt(cents):
    sign = "-" if cents < 0 else ""
    return f"{{sign}}{{abs(cents) // 100}}.{{abs(cents) % 100:02d}}"


def main(events_path, users_path):
    db = sqlite3.connect(":memory:")
    load(db, events_path, users_path)
    out = []
    for uid, name in db.execute("SELECT id, name FROM users ORDER BY rowid").fetchall():
        n, total, last = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(amount), 0), MAX(ts) FROM events WHERE user_id = ?",
            (uid,),
        ).fetchone()
        cols = [uid, name, str(n), fmt(total), last or "-"]
{extra_code}        out.append("\\t".join(cols))
    sys.stdout.write("".join(line + "\\n" for line in out))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
'''

_TOP_KIND = """\
        top = db.execute(
            "SELECT kind, COUNT(*) AS c FROM events WHERE user_id = ? "
            "GROUP BY kind ORDER BY c DESC, kind LIMIT 1",
            (uid,),
        ).fetchone()
        cols.append(top[0] if top else "-")
"""
_DAYS = """\
        days = db.execute(
            "SELECT COUNT(DISTINCT substr(ts, 1, 10)) FROM events WHERE user_id = ?", (uid,)
        ).fetchone()[0]
        cols.append(str(days))
"""
_INDEX = (
    "    load(db, events_path, users_path)\n",
    "    load(db, events_path, users_path)\n"
    '    db.execute("CREATE INDEX events_by_user ON events (user_id)")\n',
)

_INPUTS = (
    DRAWS
    + r"""

def make_inputs(rng, n):
    # About n / 20 users (some idle, some listed out of id order) and n events: 1% with
    # a non-integer amount, 1% without the amount cell, 3% with blanks before every cell.
    n_users = max(1, n // 20)
    ids = []
    while len(ids) < n_users:  # distinct ids out of 10 n_users + 10, in random order
        ids = list(dict.fromkeys(ids + list(draw_below(rng, 10 * n_users + 10, 2 * n_users))))
    ids = ["u%05d" % i for i in ids[:n_users]]
    names = ["Ana", "Bo", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jules"]
    nums = draw_below(rng, 100, n_users)
    users = "".join(map("%s,%s %d\n".__mod__, zip(ids, draw_picks(rng, names, n_users), nums)))
    active = [u for u, r in zip(ids, draw_below(rng, 100, n_users)) if r < 93]
    n = n if active else 0
    # kinds[:randrange(2, 7)] then a kind of those: 87, 87, 57, 37, 22, 10 in 300
    kinds = ["view,", "click,", "buy,", "refund,", "share,", "login,"]
    weighted = [0] * 87 + [1] * 87 + [2] * 57 + [3] * 37 + [4] * 22 + [5] * 10
    kind = draw_picks(rng, weighted, n)
    amount = ["0"] * n
    paid = [i for i, k in enumerate(kind) if k == 2 or k == 3]
    for i, a in zip(paid, draw_below(rng, 52000, len(paid))):
        amount[i] = str(a - 2000)
    columns = [
        draw_picks(rng, active, n),
        draw_picks(rng, [",2024-%02d-" % m for m in range(1, 13)], n),
        draw_picks(rng, ["%02dT" % d for d in range(1, 29)], n),
        draw_picks(rng, ["%02d:" % h for h in range(24)], n),
        draw_picks(rng, ["%02d:" % m for m in range(60)], n),
        draw_picks(rng, ["%02d," % s for s in range(60)], n),
        list(map(kinds.__getitem__, kind)),
        amount,
        "\n",
    ]
    events = flat_rows(columns, n)
    for i, bad in draw_rows(rng, n, [0.01, 0.01, 0.03]):
        row = row_text(events, 9, i)[:-1].split(",")
        row = [row[:3] + ["1.5"], row[:3], [" " + c for c in row]][bad]
        set_row(events, 9, i, ",".join(row) + "\n")
    events = "user_id,ts,kind,amount_cents\n" + "".join(events)
    return {"events.csv": events, "users.csv": "id,name\n" + users}
"""
)


def _program(program: str, tier: str) -> str:
    extra_doc = {
        "easy": "",
        "medium": ', most frequent event kind (ties: alphabetically first; "-" if none)',
        "hard": ', most frequent event kind (ties: alphabetically first; "-" if none), number '
        "of distinct days with events",
    }[tier]
    extra = {"easy": "", "medium": _TOP_KIND, "hard": _TOP_KIND + _DAYS}[tier]
    return _SOURCE.format(program=program, extra_doc=extra_doc, extra_code=extra)


@family(
    "unindexed-sqlite",
    category="optimization",
    summary="Per-user SQLite report doing full table scans (1-3 queries a user) under a CPU bar",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    program = rng.choice(_PROGRAMS)
    slow = _program(program, spec.tier)
    fast = apply_edits(slow, [_INDEX])
    big = spec.iscale(60_000, 90_000)
    secret = rng.randrange(2**31)
    index_on = rng.choice(["ts", "kind, user_id", "amount"])
    wrongs = {
        # an index the lookups cannot use: still one full scan per user and query
        "index-on-wrong-columns": apply_edits(
            slow, [(_INDEX[0], _INDEX[1].replace("(user_id)", f"({index_on})"))]
        ),
        # a rewrite that only reports users who have events
        "idle-users-dropped": apply_edits(
            fast,
            [
                (
                    "        cols = [uid, name,",
                    "        if n == 0:\n            continue\n        cols = [uid, name,",
                )
            ],  # fmt: skip
        ),
        # users in id order instead of the file's order
        "users-sorted-by-id": apply_edits(
            fast, [("FROM users ORDER BY rowid", "FROM users ORDER BY id")]
        ),  # fmt: skip
    }
    if spec.tier != "easy":
        wrongs["kind-ties-reversed"] = apply_edits(fast, [("ORDER BY c DESC, kind LIMIT 1", "ORDER BY c DESC, kind DESC LIMIT 1")])  # fmt: skip
    scope: dict = {}
    exec(_INPUTS, scope)
    sample = scope["make_inputs"](rng, 400)
    instruction = textwrap.dedent(
        f"""\
        # Speed up the activity report

        `/app/{program}` builds the per-user activity report from our exports
        (`python3 /app/{program} events.csv users.csv > activity.tsv`; small samples are in
        `/app/data/`). Its docstring describes the output. On the full exports it runs for
        many minutes.

        Make it fast: on {big:,} events of {big // 20:,} users it must finish within 2 seconds
        of CPU time (it will be measured on such data). Its output must stay
        **byte-for-byte identical** to what the current program prints, for every input.
        Keep the command line; only the standard library (including `sqlite3`) is available.
        """
    )
    return GeneratedTask(
        instruction=instruction,
        workspace={
            program: slow,
            "data/events.csv": sample["events.csv"],
            "data/users.csv": sample["users.csv"],
        },
        tests={
            **bench_tests(
                reference=fast,
                program=program,
                inputs_code=_INPUTS,
                args=["events.csv", "users.csv"],
                secret=secret,
                small_sizes=[0, 30, 600],
                big_size=big,
                cpu_bar=2,
            ),
        },
        solution={"solve.sh": solve_sh_writing({program: fast}, note="index on events.user_id")},
        wrong_solutions={
            name: {"solve.sh": solve_sh_writing({program: src}, note=f"wrong: {name}")}
            for name, src in wrongs.items()
        },
        tags=("python", "optimization", "sqlite", "indexing"),
        verifier_timeout_sec=240.0,
    )
