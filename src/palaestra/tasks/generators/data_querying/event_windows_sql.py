"""event-windows-sql: time-bucket and session reports over a product-analytics event table, as
one SQLite query checked on regenerated databases.

Easy: N-minute buckets of one day (floor to the bucket start, the next midnight excluded,
distinct users). Medium: every hour of a day, empty hours included (a generated calendar), with
a rolling revenue window over the filled hours. Hard: sessionization with ``LAG`` per user (a gap
of more than G minutes starts a session; events inserted out of time order; gaps of exactly G
minutes present).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.data_querying import _sqlite

_MAKE_DB = '''\
"""Build an analytics database with the production schema and synthetic events.

Usage: python3 make_db.py [--seed N] [path]    (default: the seed of /app/events.db)
Every seed gives different events with the same structure and the same kinds of corner cases.
"""

import datetime as dt
import random
import sqlite3
import sys

SCHEMA = """
CREATE TABLE events (id INTEGER PRIMARY KEY,
                     user_id INTEGER NOT NULL,
                     ts TEXT NOT NULL,            -- 'YYYY-MM-DD HH:MM:SS', UTC
                     kind TEXT NOT NULL CHECK (kind IN ('view', 'click', 'purchase')),
                     amount_cents INTEGER);       -- purchases only, else NULL
"""
FIRST_DAY = dt.datetime(2024, 3, 4)


def build(con, seed):
    rng = random.Random(seed)
    con.executescript(SCHEMA)
    day0 = FIRST_DAY
    events = []

    def add(user, t, kind=None):
        kind = kind or rng.choices(["view", "click", "purchase"], [60, 28, 12])[0]
        amount = rng.randint(199, 20000) if kind == "purchase" else None
        events.append([user, t.strftime("%Y-%m-%d %H:%M:%S"), kind, amount])

    for user in rng.sample(range(100, 999), rng.randint(20, 35)):
        t = day0 + dt.timedelta(seconds=rng.randrange(3 * 86400 - 4 * 3600))
        for _ in range(rng.randint(1, 5)):  # sessions
            for _ in range(rng.randint(1, 9)):
                add(user, t)
                t += dt.timedelta(seconds=rng.randint(5, 1100))
            t += dt.timedelta(minutes=rng.randint(50, 500))
    for gap in (10, 15, 20, 30, 45):  # users whose events are exactly `gap` minutes apart
        user = 1000 + gap
        t = day0 + dt.timedelta(days=rng.randint(0, 2), hours=rng.randint(1, 20))
        for step in (0, gap * 60, gap * 60, gap * 60 + 1, rng.randint(1, 300)):
            t += dt.timedelta(seconds=step)
            add(user, t)
    for d in range(4):  # events on the stroke of midnight
        for kind in ("view", "click", "purchase"):
            add(rng.randint(100, 999), day0 + dt.timedelta(days=d), kind)
    rng.shuffle(events)  # ids are not in time order
    con.executemany("INSERT INTO events (user_id, ts, kind, amount_cents) VALUES (?, ?, ?, ?)",
                    events)
    con.commit()


if __name__ == "__main__":
    args = sys.argv[1:]
    seed = VISIBLE_SEED
    if args[:1] == ["--seed"]:
        seed, args = int(args[1]), args[2:]
    path = args[0] if args else "events.db"
    import os
    if os.path.exists(path):
        os.remove(path)
    con = sqlite3.connect(path)
    build(con, seed)
    con.close()
    print(f"wrote {path} (seed {seed})")
'''

_RUN_QUERY = '''\
"""Print the rows a query file returns: python3 run_query.py query.sql [db]"""
import sqlite3
import sys

sql = open(sys.argv[1]).read()
con = sqlite3.connect(f"file:{sys.argv[2] if len(sys.argv) > 2 else 'events.db'}?mode=ro",
                      uri=True)
cur = con.execute(sql)
print(" | ".join(d[0] for d in cur.description))
for row in cur:
    print(" | ".join("NULL" if v is None else str(v) for v in row))
'''

_FIRST_DAY = dt.date(2024, 3, 4)


@dataclass(frozen=True)
class _Question:
    text: str
    columns: tuple[str, ...]
    right: str
    wrong: dict[str, str]


def _day(rng) -> tuple[str, str]:
    d = _FIRST_DAY + dt.timedelta(days=rng.randint(0, 2))
    return d.isoformat(), (d + dt.timedelta(days=1)).isoformat()


def _easy(rng) -> _Question:
    day, nxt = _day(rng)
    width = rng.choice([10, 15, 20, 30])
    kinds = rng.choice([("view", "click", "purchase"), ("click", "purchase"), ("view",)])
    kind_list = ", ".join(f"'{k}'" for k in kinds)
    kind_text = (
        "all events" if len(kinds) == 3 else " and ".join(f"`{k}`" for k in kinds) + " events"
    )
    bucket = (
        "printf('%02d:%02d', CAST(strftime('%H', ts) AS INTEGER), "
        f"CAST(strftime('%M', ts) AS INTEGER) / {width} * {width})"
    )
    where = f"kind IN ({kind_list}) AND ts >= '{day} 00:00:00' AND ts < '{nxt} 00:00:00'"

    def q(bucket_expr=bucket, where_expr=where, users="COUNT(DISTINCT user_id)"):
        return f"""SELECT {bucket_expr} AS bucket, COUNT(*) AS events, {users} AS users
FROM events WHERE {where_expr}
GROUP BY bucket ORDER BY bucket"""

    return _Question(
        text=f"Traffic on {day} in {width}-minute buckets, counting {kind_text}: for each "
        f"bucket with at least one such event, its start time `HH:MM` (`00:00`, `00:{width:02d}`, "
        "...; an event belongs to the bucket its time falls in, so `09:{m:02d}:59` is in the "
        f"`09:{0:02d}` bucket), the number of events and the number of distinct users. Only "
        f"events of that day (UTC) count. Order by bucket.".replace("{m:02d}", f"{width - 1:02d}"),
        columns=("bucket", "events", "users"),
        right=q(),
        wrong={
            "rounded-buckets": q(
                bucket_expr="printf('%02d:%02d', CAST(strftime('%H', ts) AS INTEGER), "
                f"CAST(ROUND(CAST(strftime('%M', ts) AS INTEGER) / {width}.0) AS INTEGER) "
                f"* {width})"
            ),
            "next-midnight-included": q(
                where_expr=f"kind IN ({kind_list}) AND ts BETWEEN '{day} 00:00:00' AND "
                f"'{nxt} 00:00:00'"
            ),
            "events-as-users": q(users="COUNT(user_id)"),
        },
    )


def _medium(rng) -> _Question:
    day, nxt = _day(rng)
    w = rng.choice([2, 3, 4])
    hours = "WITH RECURSIVE hours(h) AS (SELECT 0 UNION ALL SELECT h + 1 FROM hours WHERE h < 23)"

    def purchases(where=f"ts >= '{day} 00:00:00' AND ts < '{nxt} 00:00:00'"):
        return f""",
p AS (SELECT CAST(strftime('%H', ts) AS INTEGER) AS h, COUNT(*) AS n,
             SUM(amount_cents) AS rev
      FROM events WHERE kind = 'purchase' AND {where} GROUP BY h)"""

    def q(frame=f"{w - 1} PRECEDING", p=None):
        return (
            hours
            + (p or purchases())
            + f"""
SELECT printf('%02d', hours.h) AS hour, COALESCE(p.n, 0) AS purchases,
  COALESCE(p.rev, 0) AS revenue_cents,
  SUM(COALESCE(p.rev, 0)) OVER (ORDER BY hours.h ROWS BETWEEN {frame} AND CURRENT ROW)
    AS rolling_cents
FROM hours LEFT JOIN p ON p.h = hours.h ORDER BY hours.h"""
        )

    active_only = (
        "WITH p AS (SELECT CAST(strftime('%H', ts) AS INTEGER) AS h, COUNT(*) AS n, "
        f"SUM(amount_cents) AS rev FROM events WHERE kind = 'purchase' AND ts >= '{day} 00:00:00' "
        f"AND ts < '{nxt} 00:00:00' GROUP BY h)\n"
        "SELECT printf('%02d', h) AS hour, n AS purchases, rev AS revenue_cents,\n"
        f"  SUM(rev) OVER (ORDER BY h ROWS BETWEEN {w - 1} PRECEDING AND CURRENT ROW) "
        "AS rolling_cents\nFROM p ORDER BY h"
    )
    return _Question(
        text=f"Purchases on {day} (UTC) hour by hour: one row for **each** of the 24 hours "
        "(`hour` as `00` ... `23`, also hours without purchases) with the number of purchases, "
        f"their revenue in cents (0 when none), and `rolling_cents`: the revenue of the last {w} "
        f"hours, this hour included (for the first {w - 1} hour(s) of the day, only the hours "
        "of that day so far). Order by hour.",
        columns=("hour", "purchases", "revenue_cents", "rolling_cents"),
        right=q(),
        wrong={
            "active-hours-only": active_only,
            "window-one-hour-too-wide": q(frame=f"{w} PRECEDING"),
            "next-midnight-included": q(
                p=purchases(where=f"ts BETWEEN '{day} 00:00:00' AND '{nxt} 00:00:00'")
            ),
        },
    )


def _hard(rng) -> _Question:
    gap = rng.choice([10, 15, 20, 30, 45])
    epoch = "CAST(strftime('%s', ts) AS INTEGER)"

    def q(cmp=">", partition="PARTITION BY user_id ", order="ts, id"):
        return f"""WITH marked AS (
  SELECT id, user_id, ts, kind,
    CASE WHEN LAG(ts) OVER w IS NULL
           OR {epoch} - CAST(strftime('%s', LAG(ts) OVER w) AS INTEGER) {cmp} {gap * 60}
         THEN 1 ELSE 0 END AS starts
  FROM events WINDOW w AS ({partition}ORDER BY {order})),
numbered AS (
  SELECT user_id, ts, kind,
    SUM(starts) OVER ({partition}ORDER BY {order} ROWS UNBOUNDED PRECEDING) AS session
  FROM marked),
sessions AS (
  SELECT user_id, session,
    MAX({epoch}) - MIN({epoch}) AS seconds, SUM(kind = 'purchase') AS purchases
  FROM numbered GROUP BY user_id, session)
SELECT user_id, COUNT(*) AS sessions, MAX(seconds) AS longest_session_s,
  SUM(purchases > 0) AS buying_sessions
FROM sessions GROUP BY user_id ORDER BY user_id"""

    return _Question(
        text=f"Sessionize the event stream. Per user, take the events in time order (equal "
        "timestamps by `id`); the first event starts a session, and an event starts a new "
        f"session when **more than {gap} minutes** passed since the user's previous event (a "
        f"gap of exactly {gap} minutes stays in the same session). For each user: the number of "
        "sessions, `longest_session_s` (the longest session's duration in seconds, from its "
        "first to its last event; a one-event session lasts 0), and `buying_sessions` (the "
        "number of sessions with at least one purchase). Order by `user_id`. Note that event "
        "ids are not in time order.",
        columns=("user_id", "sessions", "longest_session_s", "buying_sessions"),
        right=q(),
        wrong={
            "gap-at-least": q(cmp=">="),
            "no-partition-by-user": q(partition=""),
            "ordered-by-id": q(order="id"),
        },
    )


@family(
    "event-windows-sql",
    category="data-querying",
    summary="Time buckets, gap-filled rolling windows (medium) and sessionization (hard) over an "
    "event table, one SQLite query checked on regenerated databases",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    question = {"easy": _easy, "medium": _medium, "hard": _hard}[spec.tier](rng)
    visible_seed = rng.randrange(1000, 10**6)
    secrets = [rng.randrange(10**6, 2**31) for _ in range(3)]
    make_db = _MAKE_DB.replace("VISIBLE_SEED", str(visible_seed))
    cols = ", ".join(f"`{c}`" for c in question.columns)
    instruction = f"""\
# Product analytics query

The product team asked:

> {question.text}

Answer with **one SQLite `SELECT` statement** (a `WITH` clause is fine) in `/app/query.sql`.
It must return exactly the columns {cols}, in that order, with rows in the order asked.

`/app/events.db` holds a sample of the event table; production has the same schema (see
`/app/make_db.py`, which built it; `python3 /app/make_db.py --seed N other.db` builds other
samples). Your query will be run against other databases of this schema, so it must be right in
general, not only for this sample. `python3 /app/run_query.py /app/query.sql` prints what it
returns.

Schema: `events(id, user_id, ts, kind, amount_cents)`: `ts` is `YYYY-MM-DD HH:MM:SS` text in
UTC, `kind` is `view`, `click` or `purchase`, and `amount_cents` is set for purchases only.
"""
    con = _sqlite.database(make_db, visible_seed)
    visible_answer = [list(r) for r in con.execute(question.right)]
    data = con.serialize()
    con.close()
    wrong = dict(question.wrong)
    wrong["visible-answer-hardcoded"] = _sqlite.hardcoded(question.columns, visible_answer)
    tests = _sqlite.tests(
        make_db=make_db,
        reference=question.right,
        columns=question.columns,
        secrets=secrets,
        visible_seed=visible_seed,
        path="/app/query.sql",
        tol=0.01,  # a float computed through julianday() is fine
    )
    return hs.task(
        instruction=instruction,
        workspace={"make_db.py": make_db, "run_query.py": _RUN_QUERY, "events.db": data},
        tests=tests,
        answer_path="query.sql",
        reference=question.right + "\n",
        wrongs={name: sql + "\n" for name, sql in wrong.items()},
        note="reference",
        tags=("sql", "sqlite", "window-functions", "time-series"),
    )
