"""ticket-report-sql: answer a support manager's question with one SQLite query over a
generated helpdesk database.

The agent writes ``/app/answer.sql``; the checker runs it against databases generated from
per-task secret seeds (same schema; built, and the reference query's rows taken, when the task
is generated) and compares the rows, so hard-coding the visible answer fails. The question is drawn per task from the tier's
pool. Easy: one table, a filter with a timestamp boundary trap, a custom sort. Medium: joins that
must keep empty groups, ``NULL``-aware averages, ``HAVING`` thresholds. Hard: top-N per group
with ties (window functions) or a month calendar with a running backlog since the start of data.
"""

from __future__ import annotations

from dataclasses import dataclass

from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.data_querying import _sqlite

# Shipped as /app/make_db.py, and run when the task is generated: the data generator.
_MAKE_DB = '''\
"""Build a helpdesk database with the production schema and synthetic data.

Usage: python3 make_db.py [--seed N] [path]    (default: the seed of /app/tickets.db)
Every seed gives different data with the same structure and the same kinds of corner cases.
"""

import datetime as dt
import random
import sqlite3
import sys

SCHEMA = """
CREATE TABLE teams     (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE agents    (id INTEGER PRIMARY KEY, name TEXT NOT NULL, team_id INTEGER NOT NULL
                        REFERENCES teams(id));
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
                        plan TEXT NOT NULL CHECK (plan IN ('free', 'pro', 'enterprise')),
                        country TEXT NOT NULL);
CREATE TABLE tickets   (id INTEGER PRIMARY KEY,
                        customer_id INTEGER NOT NULL REFERENCES customers(id),
                        agent_id INTEGER REFERENCES agents(id),
                        priority TEXT NOT NULL
                          CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
                        opened_at TEXT NOT NULL,
                        closed_at TEXT);
"""
TEAMS = ["Billing", "Platform", "Onboarding", "Mobile", "Payments", "Identity", "Search",
         "Hardware", "Enterprise", "Data"]
FIRST = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea",
         "Mo", "Nia", "Oto", "Pia", "Raf", "Sol", "Tia", "Uma"]
COUNTRIES = ["DE", "FR", "JP", "BR", "US", "IN", "KE", "NZ"]
PRIORITIES = ["low", "normal", "high", "urgent"]


def fmt(t):
    return t.strftime("%Y-%m-%d %H:%M:%S")


def build(con, seed):
    rng = random.Random(seed)
    con.executescript(SCHEMA)
    teams = rng.sample(TEAMS, rng.randint(4, 6))
    con.executemany("INSERT INTO teams VALUES (?, ?)", list(enumerate(teams, 1)))
    # the last team never gets an agent
    agents = []
    for aid, first in enumerate(rng.sample(FIRST, rng.randint(9, 14)), 1):
        team = aid if aid < len(teams) else 1 if aid == len(teams) else rng.randint(1, len(teams) - 1)
        agents.append((aid, f"{first} {chr(65 + rng.randrange(26))}.", team))
    con.executemany("INSERT INTO agents VALUES (?, ?, ?)", agents)
    idle_agent = agents[-1][0]  # never assigned a ticket
    customers = []
    for cid in range(1, rng.randint(40, 70)):
        customers.append((cid, f"Customer {rng.randrange(1000, 9999)}-{cid}",
                          rng.choice(["free", "free", "pro", "pro", "enterprise"]),
                          rng.choice(COUNTRIES)))
    con.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", customers)
    start, days = dt.datetime(2023, 1, 1), 365 + 366 + 181
    gaps = {(2023, rng.randint(2, 11)), (2024, rng.randint(2, 11))}  # months nobody opened a ticket
    tickets = []

    def add(opened, closed_after_h=None, agent=None, customer=None, priority=None):
        if (opened.year, opened.month) in gaps:
            return
        if closed_after_h is None and rng.random() < 0.75:
            closed_after_h = rng.randint(1, 400) + rng.random()
        closed = None
        if closed_after_h is not None:
            closed = fmt(opened + dt.timedelta(seconds=int(closed_after_h * 3600)))
        if agent is None and rng.random() < 0.9:
            agent = rng.choice(agents[:-1])[0]
        tickets.append((len(tickets) + 1, customer or rng.choice(customers[:-2])[0], agent,
                        priority or rng.choice(PRIORITIES), fmt(opened), closed))

    for _ in range(rng.randint(450, 650)):
        add(start + dt.timedelta(seconds=rng.randrange(days * 86400)))
    for year in (2023, 2024, 2025):  # tickets on the first and the last second of each month
        for month in range(1, 13 if year < 2025 else 7):
            first = dt.datetime(year, month, 1)
            nxt = dt.datetime(year + month // 12, month % 12 + 1, 1)
            add(first)
            add(nxt - dt.timedelta(seconds=1))
    # In each year, the two busiest closers of the first team are made to tie.
    for year in (2023, 2024):
        counts = {}
        for t in tickets:
            if t[5] and t[5][:4] == str(year) and t[2] and agents[t[2] - 1][2] == 1:
                counts[t[2]] = counts.get(t[2], 0) + 1
        team_agents = [a[0] for a in agents[:-1] if a[2] == 1]
        ranked = sorted(team_agents, key=lambda a: (-counts.get(a, 0), a))
        if len(ranked) >= 2:
            for _ in range(counts.get(ranked[0], 0) - counts.get(ranked[1], 0)):
                add(dt.datetime(year, 12, 15, 10, 0, rng.randrange(60)), 2.0, ranked[1])
    con.executemany("INSERT INTO tickets VALUES (?, ?, ?, ?, ?, ?)", tickets)
    con.commit()
    assert idle_agent not in {t[2] for t in tickets}


if __name__ == "__main__":
    args = sys.argv[1:]
    seed = VISIBLE_SEED
    if args[:1] == ["--seed"]:
        seed, args = int(args[1]), args[2:]
    path = args[0] if args else "tickets.db"
    import os
    if os.path.exists(path):
        os.remove(path)
    con = sqlite3.connect(path)
    build(con, seed)
    con.close()
    print(f"wrote {path} (seed {seed})")
'''

_RUN_QUERY = '''\
"""Print the rows a query file returns: python3 run_query.py answer.sql [db]"""
import sqlite3
import sys

sql = open(sys.argv[1]).read()
con = sqlite3.connect(f"file:{sys.argv[2] if len(sys.argv) > 2 else 'tickets.db'}?mode=ro",
                      uri=True)
cur = con.execute(sql)
print(" | ".join(d[0] for d in cur.description))
for row in cur:
    print(" | ".join("NULL" if v is None else str(v) for v in row))
'''


@dataclass(frozen=True)
class _Question:
    text: str  # the request, in the manager's words (markdown)
    columns: tuple[str, ...]
    right: str
    wrong: dict[str, str]


_PRIO_ORDER = (
    "CASE priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END"
)


def _easy(rng) -> _Question:
    if rng.random() < 0.5:
        plan = rng.choice(["free", "pro", "enterprise"])
        return _Question(
            text=f"How many tickets are **still open** (not closed) per priority, counting only "
            f"tickets of customers on the `{plan}` plan? One row per priority that has at least "
            "one such ticket, most severe first: `urgent`, `high`, `normal`, `low`.",
            columns=("priority", "open_tickets"),
            right=f"""SELECT t.priority, COUNT(*) AS open_tickets
FROM tickets t JOIN customers c ON c.id = t.customer_id
WHERE t.closed_at IS NULL AND c.plan = '{plan}'
GROUP BY t.priority
ORDER BY {_PRIO_ORDER.replace("priority", "t.priority")}""",
            wrong={
                "alphabetical-priority": f"""SELECT t.priority, COUNT(*) AS open_tickets
FROM tickets t JOIN customers c ON c.id = t.customer_id
WHERE t.closed_at IS NULL AND c.plan = '{plan}'
GROUP BY t.priority ORDER BY t.priority""",
                "all-tickets": f"""SELECT t.priority, COUNT(*) AS open_tickets
FROM tickets t JOIN customers c ON c.id = t.customer_id
WHERE c.plan = '{plan}'
GROUP BY t.priority ORDER BY {_PRIO_ORDER.replace("priority", "t.priority")}""",
                "every-plan": f"""SELECT priority, COUNT(*) AS open_tickets FROM tickets
WHERE closed_at IS NULL GROUP BY priority ORDER BY {_PRIO_ORDER}""",
            },
        )
    year, month = rng.choice([2023, 2024]), rng.randint(1, 12)
    ym = f"{year}-{month:02d}"
    nxt = f"{year + month // 12}-{month % 12 + 1:02d}"
    last_day = {2: 29 if year == 2024 else 28, 4: 30, 6: 30, 9: 30, 11: 30}.get(month, 31)
    return _Question(
        text=f"How many tickets were **opened** in {ym} (any time of any day of that month), per "
        "customer plan? One row per plan with at least one such ticket, the busiest plan "
        "first; equal counts by plan name.",
        columns=("plan", "tickets"),
        right=f"""SELECT c.plan, COUNT(*) AS tickets
FROM tickets t JOIN customers c ON c.id = t.customer_id
WHERE t.opened_at >= '{ym}-01 00:00:00' AND t.opened_at < '{nxt}-01 00:00:00'
GROUP BY c.plan ORDER BY tickets DESC, c.plan""",
        wrong={
            "between-dates": f"""SELECT c.plan, COUNT(*) AS tickets
FROM tickets t JOIN customers c ON c.id = t.customer_id
WHERE t.opened_at BETWEEN '{ym}-01' AND '{ym}-{last_day:02d}'
GROUP BY c.plan ORDER BY tickets DESC, c.plan""",
            "closed-in-month": f"""SELECT c.plan, COUNT(*) AS tickets
FROM tickets t JOIN customers c ON c.id = t.customer_id
WHERE substr(t.closed_at, 1, 7) = '{ym}'
GROUP BY c.plan ORDER BY tickets DESC, c.plan""",
            "distinct-customers": f"""SELECT c.plan, COUNT(DISTINCT c.id) AS tickets
FROM tickets t JOIN customers c ON c.id = t.customer_id
WHERE substr(t.opened_at, 1, 7) = '{ym}'
GROUP BY c.plan ORDER BY tickets DESC, c.plan""",
        },
    )


def _medium(rng) -> _Question:
    if rng.random() < 0.5:
        return _Question(
            text="For **every** team (also teams without agents or without closed tickets): "
            "how many tickets its agents have closed, and the average time to close them in "
            "hours (`closed_at - opened_at`), rounded to 1 decimal (`NULL` when the team closed "
            "nothing). Tickets with no agent belong to no team. Order by team name.",
            columns=("team", "closed_tickets", "avg_hours"),
            right="""SELECT tm.name AS team, COUNT(t.id) AS closed_tickets,
  ROUND(AVG((julianday(t.closed_at) - julianday(t.opened_at)) * 24), 1) AS avg_hours
FROM teams tm
LEFT JOIN agents a ON a.team_id = tm.id
LEFT JOIN tickets t ON t.agent_id = a.id AND t.closed_at IS NOT NULL
GROUP BY tm.id ORDER BY tm.name""",
            wrong={
                "inner-joins": """SELECT tm.name AS team, COUNT(t.id) AS closed_tickets,
  ROUND(AVG((julianday(t.closed_at) - julianday(t.opened_at)) * 24), 1) AS avg_hours
FROM teams tm JOIN agents a ON a.team_id = tm.id
JOIN tickets t ON t.agent_id = a.id AND t.closed_at IS NOT NULL
GROUP BY tm.id ORDER BY tm.name""",
                "count-star": """SELECT tm.name AS team, COUNT(*) AS closed_tickets,
  ROUND(AVG((julianday(t.closed_at) - julianday(t.opened_at)) * 24), 1) AS avg_hours
FROM teams tm
LEFT JOIN agents a ON a.team_id = tm.id
LEFT JOIN tickets t ON t.agent_id = a.id AND t.closed_at IS NOT NULL
GROUP BY tm.id ORDER BY tm.name""",
                "open-tickets-in-average": """SELECT tm.name AS team,
  COUNT(t.closed_at) AS closed_tickets,
  ROUND(AVG(COALESCE(julianday(t.closed_at) - julianday(t.opened_at), 0) * 24), 1) AS avg_hours
FROM teams tm
LEFT JOIN agents a ON a.team_id = tm.id
LEFT JOIN tickets t ON t.agent_id = a.id
GROUP BY tm.id ORDER BY tm.name""",
            },
        )
    plan = rng.choice(["free", "pro", "enterprise"])
    k = rng.randint(2, 3)
    return _Question(
        text=f"Which customers on the `{plan}` plan have **at least {k}** tickets that are "
        "still open? For each: its id, its name, the number of its open tickets, and when "
        "the oldest of them was opened. Most open tickets first; equal counts by customer id.",
        columns=("customer_id", "name", "open_tickets", "oldest_open"),
        right=f"""SELECT c.id AS customer_id, c.name, COUNT(*) AS open_tickets,
  MIN(t.opened_at) AS oldest_open
FROM customers c JOIN tickets t ON t.customer_id = c.id
WHERE c.plan = '{plan}' AND t.closed_at IS NULL
GROUP BY c.id HAVING COUNT(*) >= {k}
ORDER BY open_tickets DESC, c.id""",
        wrong={
            "more-than": f"""SELECT c.id AS customer_id, c.name, COUNT(*) AS open_tickets,
  MIN(t.opened_at) AS oldest_open
FROM customers c JOIN tickets t ON t.customer_id = c.id
WHERE c.plan = '{plan}' AND t.closed_at IS NULL
GROUP BY c.id HAVING COUNT(*) > {k}
ORDER BY open_tickets DESC, c.id""",
            "newest-open": f"""SELECT c.id AS customer_id, c.name, COUNT(*) AS open_tickets,
  MAX(t.opened_at) AS oldest_open
FROM customers c JOIN tickets t ON t.customer_id = c.id
WHERE c.plan = '{plan}' AND t.closed_at IS NULL
GROUP BY c.id HAVING COUNT(*) >= {k}
ORDER BY open_tickets DESC, c.id""",
            "all-tickets-threshold": f"""SELECT c.id AS customer_id, c.name,
  SUM(t.closed_at IS NULL) AS open_tickets,
  MIN(CASE WHEN t.closed_at IS NULL THEN t.opened_at END) AS oldest_open
FROM customers c JOIN tickets t ON t.customer_id = c.id
WHERE c.plan = '{plan}'
GROUP BY c.id HAVING COUNT(*) >= {k} AND SUM(t.closed_at IS NULL) > 0
ORDER BY open_tickets DESC, c.id""",
        },
    )


def _hard(rng) -> _Question:
    year = rng.choice([2023, 2024])
    if rng.random() < 0.5:
        base = f"""WITH per_agent AS (
  SELECT a.team_id, a.id AS agent_id, a.name, COUNT(*) AS closed
  FROM agents a JOIN tickets t ON t.agent_id = a.id
  WHERE t.closed_at >= '{year}-01-01' AND t.closed_at < '{year + 1}-01-01'
  GROUP BY a.id)"""
        return _Question(
            text=f"For each team, who closed the most tickets in {year} (by `closed_at`)? One "
            "row per top agent: when several agents of a team tie for the most, list them "
            "all. Teams that closed nothing that year have no row. Order by team name, then "
            "agent name.",
            columns=("team", "agent", "closed"),
            right=base
            + """
SELECT tm.name AS team, p.name AS agent, p.closed
FROM (SELECT *, RANK() OVER (PARTITION BY team_id ORDER BY closed DESC) AS r FROM per_agent) p
JOIN teams tm ON tm.id = p.team_id
WHERE p.r = 1 ORDER BY tm.name, p.name""",
            wrong={
                "row-number-drops-ties": base
                + """
SELECT tm.name AS team, p.name AS agent, p.closed
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY team_id ORDER BY closed DESC, name) AS r
      FROM per_agent) p
JOIN teams tm ON tm.id = p.team_id
WHERE p.r = 1 ORDER BY tm.name, p.name""",
                "opened-year": f"""WITH per_agent AS (
  SELECT a.team_id, a.id AS agent_id, a.name, COUNT(*) AS closed
  FROM agents a JOIN tickets t ON t.agent_id = a.id
  WHERE t.closed_at IS NOT NULL AND substr(t.opened_at, 1, 4) = '{year}'
  GROUP BY a.id)
SELECT tm.name AS team, p.name AS agent, p.closed
FROM (SELECT *, RANK() OVER (PARTITION BY team_id ORDER BY closed DESC) AS r FROM per_agent) p
JOIN teams tm ON tm.id = p.team_id
WHERE p.r = 1 ORDER BY tm.name, p.name""",
                "global-top": base
                + """
SELECT tm.name AS team, p.name AS agent, p.closed
FROM per_agent p JOIN teams tm ON tm.id = p.team_id
WHERE p.closed = (SELECT MAX(closed) FROM per_agent) ORDER BY tm.name, p.name""",
            },
        )
    year = rng.choice([2024, 2025])  # data starts in 2023: the backlog carries over
    months = f"""WITH RECURSIVE months(m) AS (
  SELECT '{year}-01' UNION ALL
  SELECT strftime('%Y-%m', m || '-01', '+1 month') FROM months WHERE m < '{year}-12')"""
    backlog = """(SELECT COUNT(*) FROM tickets t
   WHERE t.opened_at < date(m || '-01', '+1 month')
     AND (t.closed_at IS NULL OR t.closed_at >= date(m || '-01', '+1 month')))"""
    return _Question(
        text=f"A monthly backlog report for {year}: one row for **each** of its 12 months "
        "(`month` as `YYYY-MM`, also months in which nothing happened), with the number of "
        "tickets opened in that month, the number closed in that month (by `closed_at`), and "
        "the backlog at the end of the month: tickets opened before the month ended and not "
        "closed by then, counting everything since the first ticket in the database. Order "
        "by month.",
        columns=("month", "opened", "closed", "backlog"),
        right=months
        + f"""
SELECT m AS month,
  (SELECT COUNT(*) FROM tickets WHERE substr(opened_at, 1, 7) = m) AS opened,
  (SELECT COUNT(*) FROM tickets WHERE substr(closed_at, 1, 7) = m) AS closed,
  {backlog} AS backlog
FROM months ORDER BY m""",
        wrong={
            "active-months-only": f"""SELECT substr(opened_at, 1, 7) AS month, COUNT(*) AS opened,
  (SELECT COUNT(*) FROM tickets c WHERE substr(c.closed_at, 1, 7) = substr(o.opened_at, 1, 7))
    AS closed,
  (SELECT COUNT(*) FROM tickets t
   WHERE t.opened_at < date(substr(o.opened_at, 1, 7) || '-01', '+1 month')
     AND (t.closed_at IS NULL
          OR t.closed_at >= date(substr(o.opened_at, 1, 7) || '-01', '+1 month'))) AS backlog
FROM tickets o WHERE substr(opened_at, 1, 4) = '{year}'
GROUP BY month ORDER BY month""",
            "backlog-from-year-start": months
            + f"""
SELECT m AS month,
  (SELECT COUNT(*) FROM tickets WHERE substr(opened_at, 1, 7) = m) AS opened,
  (SELECT COUNT(*) FROM tickets WHERE substr(closed_at, 1, 7) = m) AS closed,
  (SELECT COUNT(*) FROM tickets t WHERE t.opened_at >= '{year}-01-01'
     AND t.opened_at < date(m || '-01', '+1 month')
     AND (t.closed_at IS NULL OR t.closed_at >= date(m || '-01', '+1 month'))) AS backlog
FROM months ORDER BY m""",
            "backlog-ignores-later-closing": months
            + """
SELECT m AS month,
  (SELECT COUNT(*) FROM tickets WHERE substr(opened_at, 1, 7) = m) AS opened,
  (SELECT COUNT(*) FROM tickets WHERE substr(closed_at, 1, 7) = m) AS closed,
  (SELECT COUNT(*) FROM tickets t WHERE t.opened_at < date(m || '-01', '+1 month')
     AND t.closed_at IS NULL) AS backlog
FROM months ORDER BY m""",
        },
    )


@family(
    "ticket-report-sql",
    category="data-querying",
    summary="One SQLite query answering a helpdesk question, checked on regenerated databases: "
    "filters and boundaries (easy), outer joins and HAVING (medium), ties and calendars (hard)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    question = {"easy": _easy, "medium": _medium, "hard": _hard}[spec.tier](rng)
    visible_seed = rng.randrange(1000, 10**6)
    secrets = [rng.randrange(10**6, 2**31) for _ in range(3)]
    make_db = _MAKE_DB.replace("VISIBLE_SEED", str(visible_seed))
    cols = ", ".join(f"`{c}`" for c in question.columns)
    instruction = f"""\
# Helpdesk report

The support manager asked:

> {question.text}

Answer with **one SQLite `SELECT` statement** (a `WITH` clause is fine) in `/app/answer.sql`.
It must return exactly the columns {cols}, in that order, with rows in the order asked.

`/app/tickets.db` is a copy of the helpdesk database filled with synthetic data; production has
the same schema (see `/app/make_db.py`, which built it; `python3 /app/make_db.py --seed N
other.db` builds other data sets with the same structure). Your query will be run against
other databases of this schema, so it must be right in general, not only for this data.
`python3 /app/run_query.py /app/answer.sql` prints what your query returns.

Schema: `teams(id, name)`, `agents(id, name, team_id)`, `customers(id, name, plan, country)`
with `plan` one of `free`, `pro`, `enterprise`, and `tickets(id, customer_id, agent_id,
priority, opened_at, closed_at)`: `agent_id` is `NULL` for unassigned tickets, `closed_at` is
`NULL` while a ticket is open, and timestamps are `YYYY-MM-DD HH:MM:SS` text (UTC). Numbers
are compared with a tolerance of 0.05.
"""
    visible_answer = _sqlite.rows(make_db, visible_seed, question.right)
    wrong = dict(question.wrong)
    wrong["visible-answer-hardcoded"] = _sqlite.hardcoded(question.columns, visible_answer)
    tests = _sqlite.tests(
        make_db=make_db,
        reference=question.right,
        columns=question.columns,
        secrets=secrets,
        visible_seed=visible_seed,
        path="/app/answer.sql",
        tol=0.05,
    )
    return hs.task(
        instruction=instruction,
        workspace={
            "make_db.py": make_db,
            "run_query.py": _RUN_QUERY,
            "tickets.db": _sqlite.database_bytes(make_db, visible_seed),
        },
        tests=tests,
        answer_path="answer.sql",
        reference=question.right + "\n",
        wrongs={name: sql + "\n" for name, sql in wrong.items()},
        note="the reference query",
        tags=("sql", "sqlite"),
    )
