"""region-revenue-pg: answer a sales question with one query against a real PostgreSQL server.

The agent writes ``/app/answer.sql``; ``/app/try_query.sh`` runs it on a throwaway server
loaded with the sample data. The hidden test (``harness_spec``: ``palaestra_pg``) starts its own
server inside the sandbox (initdb and pg_ctl as ``nobody``, password authentication only, a
Unix socket in a private directory, no TCP), loads fresh data made from the task's secret seed,
and sends the answer as SQL only (the server's protocol, no psql: its meta-commands are not
SQL) as a role that may only read that data, and compares the rows with a Python reference's.
The data sets and the reference's rows are made when the task is generated (plain integers,
strings and dates, the same on any Python); a verification loads each in turn into a fresh
``public`` schema and runs the query on it as that data set's reader. Easy: per-region totals that must keep regions without sales (outer
join, ``COALESCE``, no join fan-out). Medium: top customers per region in a year with ties
(``RANK``) and a timestamp year boundary. Hard: a month calendar per region with empty months
(``generate_series``) and a year-to-date running total per region (window frame).
"""

from __future__ import annotations

import random
import textwrap

from palaestra.tasks import outcomes
from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.optimization._bench import apply_edits

_PACKAGES = ("postgresql",)

_SCHEMA = """\
CREATE TABLE customers (
    id       integer PRIMARY KEY,
    name     text NOT NULL UNIQUE,
    region   text NOT NULL,
    signup   date NOT NULL
);
CREATE TABLE orders (
    id           integer PRIMARY KEY,
    customer_id  integer NOT NULL REFERENCES customers (id),
    ordered_at   timestamp NOT NULL,
    status       text NOT NULL CHECK (status IN ('paid', 'refunded', 'cancelled')),
    amount_cents integer NOT NULL
);
"""

_TRY = """\
#!/usr/bin/env bash
# Run a query (default /app/answer.sql) against a throwaway PostgreSQL server loaded with
# /app/schema.sql and /app/sample_data.sql; prints its rows. The server listens on a Unix
# socket in a temporary directory only and is removed afterwards.
set -euo pipefail
query=$(realpath "${1:-/app/answer.sql}")
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
dir=$(mktemp -d)
chmod 755 "$dir"
cp /app/schema.sql /app/sample_data.sql "$dir/" && cp "$query" "$dir/query.sql"
chmod 644 "$dir"/*.sql
as=()
if [ "$(id -u)" -eq 0 ]; then  # PostgreSQL refuses to run as root
  chown 65534:65534 "$dir"
  as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
"${as[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >/dev/null
trap '"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1; rm -rf "$dir"' EXIT
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -o "-k $dir -c listen_addresses=''" -w -l "$dir/log" \\
  start >/dev/null
psql=("${as[@]}" psql -X -q -h "$dir" -U postgres -v ON_ERROR_STOP=1)
"${psql[@]}" -f "$dir/schema.sql" -f "$dir/sample_data.sql"
"${psql[@]}" -f "$dir/query.sql"
"""

_EASY = """\
SELECT c.region,
       COUNT(DISTINCT c.id) AS customers,
       COUNT(o.id) AS paid_orders,
       COALESCE(SUM(o.amount_cents), 0) AS revenue_cents
FROM customers c
LEFT JOIN orders o ON o.customer_id = c.id AND o.status = 'paid'
GROUP BY c.region
ORDER BY revenue_cents DESC, c.region;
"""

_MEDIUM = """\
WITH revenue AS (
    SELECT c.region, c.name, SUM(o.amount_cents) AS revenue_cents
    FROM customers c
    JOIN orders o ON o.customer_id = c.id
    WHERE o.status = 'paid'
      AND o.ordered_at >= DATE 'YEAR-01-01' AND o.ordered_at < DATE 'NEXT-01-01'
    GROUP BY c.id, c.region, c.name
), ranked AS (
    SELECT region, name, revenue_cents,
           RANK() OVER (PARTITION BY region ORDER BY revenue_cents DESC) AS place
    FROM revenue
)
SELECT region, name, revenue_cents, place
FROM ranked
WHERE place <= TOPN
ORDER BY region, place, name;
"""

_HARD = """\
WITH months AS (
    SELECT generate_series(DATE 'YEAR-01-01', DATE 'YEAR-12-01', INTERVAL '1 month') AS month
), regions AS (
    SELECT DISTINCT region FROM customers
), sales AS (
    SELECT c.region, date_trunc('month', o.ordered_at) AS month, SUM(o.amount_cents) AS cents
    FROM orders o
    JOIN customers c ON c.id = o.customer_id
    WHERE o.status = 'paid'
      AND o.ordered_at >= DATE 'YEAR-01-01' AND o.ordered_at < DATE 'NEXT-01-01'
    GROUP BY 1, 2
)
SELECT r.region, to_char(m.month, 'YYYY-MM') AS month,
       COALESCE(s.cents, 0) AS revenue_cents,
       SUM(COALESCE(s.cents, 0)) OVER (PARTITION BY r.region ORDER BY m.month) AS running_cents
FROM regions r
CROSS JOIN months m
LEFT JOIN sales s ON s.region = r.region AND s.month = m.month
ORDER BY r.region, m.month;
"""

_YEAR_END = ("o.ordered_at < DATE 'NEXT-01-01'", "o.ordered_at <= DATE 'YEAR-12-31'")
_REFUNDS = ("WHERE o.status = 'paid'\n      AND ", "WHERE ")
_WRONGS = {
    "easy": {
        "inner-join": [("LEFT JOIN orders", "JOIN orders")],
        "customers-counted-per-order": [("COUNT(DISTINCT c.id)", "COUNT(*)")],
        "refunds-counted": [(" AND o.status = 'paid'", "")],
        "no-revenue-is-null": [("COALESCE(SUM(o.amount_cents), 0)", "SUM(o.amount_cents)")],
    },
    "medium": {
        "row-number-drops-ties": [("RANK()", "ROW_NUMBER()")],
        "dense-rank": [("RANK()", "DENSE_RANK()")],
        "year-end-cut": [_YEAR_END],
        "refunds-counted": [_REFUNDS],
    },
    "hard": {
        "empty-months-dropped": [("LEFT JOIN sales", "JOIN sales")],
        "running-total-across-regions": [
            ("OVER (PARTITION BY r.region ORDER BY m.month)", "OVER (ORDER BY r.region, m.month)")
        ],
        "year-end-cut": [_YEAR_END],
        "refunds-counted": [_REFUNDS],
    },
}

# Python, run when the task is generated: the data and the reference answer.
_DATA = r'''
import datetime as dt

TIER, YEAR, TOPN, N_CUSTOMERS, N_ORDERS = {params}
REGIONS = ["north", "south", "east", "west", "central", "islands"]
WORDS = ["acme", "bolt", "cobalt", "delta", "ember", "fjord", "gale", "harbor", "iris", "jade"]


def make_data(rng, n_customers, n_orders):
    regions = rng.sample(REGIONS, 4)
    quiet = regions[-1]  # its customers never pay
    customers, orders = [], []
    for i in range(n_customers):
        region = regions[i % len(regions)] if i < len(regions) else rng.choice(regions)
        name = "{{}}-{{:03d}}".format(rng.choice(WORDS), i)
        signup = dt.date(YEAR - 2, 1, 1) + dt.timedelta(days=rng.randrange(700))
        customers.append((i + 1, name, region, signup))
    start = dt.datetime(YEAR - 1, 12, 1)
    for _ in range(n_orders):
        cid, _, region, _ = rng.choice(customers)
        r = rng.random()
        if r < 0.1:
            at = dt.datetime(YEAR, 12, 31, rng.randrange(24), rng.randrange(60))
        elif r < 0.15:
            at = dt.datetime(YEAR + 1, 1, 1, 0, 0, rng.randrange(60))
        else:
            at = start + dt.timedelta(minutes=rng.randrange(60 * 24 * 400))
        status = "refunded" if region == quiet else rng.choice(["paid", "paid", "paid", "refunded", "cancelled"])
        orders.append([len(orders) + 1, cid, at, status, rng.choice([500, 1000, 1500, 2500, 9900])])
    # twins: a customer copies the orders of the region's best customer of the year, so
    # revenues tie at the top
    def revenue(cid):
        return sum(o[4] for o in orders if o[1] == cid and o[3] == "paid" and o[2].year == YEAR)

    for twin in rng.sample(customers, max(1, n_customers // 5)):
        peers = [c for c in customers if c[2] == twin[2] and c[0] != twin[0]]
        if peers:
            model = max(peers, key=lambda c: (revenue(c[0]), c[0]))
            orders = [o for o in orders if o[1] != twin[0]]
            orders += [[0, twin[0]] + o[2:] for o in orders if o[1] == model[0]]
    orders = [[i + 1] + o[1:] for i, o in enumerate(orders)]
    return customers, orders


def data_sql(customers, orders):
    lines = ["INSERT INTO customers VALUES"]
    lines.append(",\n".join("({{}}, '{{}}', '{{}}', '{{}}')".format(*c) for c in customers) + ";")
    if orders:
        lines.append("INSERT INTO orders VALUES")
        lines.append(",\n".join("({{}}, {{}}, '{{}}', '{{}}', {{}})".format(
            o[0], o[1], o[2].strftime("%Y-%m-%d %H:%M:%S"), o[3], o[4]) for o in orders) + ";")
    return "\n".join(lines) + "\n"


def answer(customers, orders):
    """The expected rows, as psql prints them (lists of text cells)."""
    region_of = {{c[0]: c[2] for c in customers}}
    paid = [o for o in orders if o[3] == "paid"]
    if TIER == "easy":
        rows = []
        for region in sorted({{c[2] for c in customers}}):
            mine = [o for o in paid if region_of[o[1]] == region]
            count = sum(1 for c in customers if c[2] == region)
            rows.append([region, count, len(mine), sum(o[4] for o in mine)])
        rows.sort(key=lambda r: (-r[3], r[0]))
        return [[str(v) for v in r] for r in rows]
    in_year = [o for o in paid if o[2].year == YEAR]
    if TIER == "medium":
        revenue = {{}}
        for o in in_year:
            revenue[o[1]] = revenue.get(o[1], 0) + o[4]
        rows = []
        for c in customers:
            if c[0] in revenue:
                place = 1 + sum(1 for k, v in revenue.items() if region_of[k] == c[2] and v > revenue[c[0]])
                if place <= TOPN:
                    rows.append([c[2], c[1], revenue[c[0]], place])
        rows.sort(key=lambda r: (r[0], r[3], r[1]))
        return [[str(v) for v in r] for r in rows]
    rows = []
    for region in sorted({{c[2] for c in customers}}):
        running = 0
        for month in range(1, 13):
            cents = sum(o[4] for o in in_year if region_of[o[1]] == region and o[2].month == month)
            running += cents
            rows.append([region, "{{}}-{{:02d}}".format(YEAR, month), str(cents), str(running)])
    return rows
'''

_QUESTIONS = {
    "easy": """\
        For every region that has customers: the region, its number of customers, its number
        of paid orders and the total of its paid orders in cents (0 when none), as columns
        `region, customers, paid_orders, revenue_cents`; largest revenue first, ties by
        region name. Only orders with status `paid` count as sales.""",
    "medium": """\
        The best customers of YEAR in each region: a customer's revenue is the total of their
        paid orders placed in YEAR (`ordered_at` is a timestamp; the whole of December 31
        belongs to the year). Rank customers within their region by revenue, largest first,
        tied customers sharing a place and the next place skipping (1, 2, 2, 4: SQL's RANK);
        list those placed TOPN or better. Customers without paid orders in YEAR are not
        ranked. Columns `region, name, revenue_cents, place`, ordered by region, place, name.""",
    "hard": """\
        A YEAR sales calendar: for every region that has customers and each month of YEAR
        (all twelve, also those without sales), the region, the month as `YYYY-MM`, that
        month's paid revenue in cents (0 without sales) and the region's running total since
        January (year to date). `ordered_at` is a timestamp; the whole of December 31 belongs
        to the year. Columns `region, month, revenue_cents, running_cents`, ordered by region,
        then month.""",
}


def _cases(scope: dict, secret: int) -> list[hs.Case]:
    """The data sets made from ``secret``: the SQL that loads each, and the reference's rows
    (lists of text cells, as the server sends them)."""
    rng = random.Random(secret)
    sizes = [(3, 5)] + [(scope["N_CUSTOMERS"], scope["N_ORDERS"])] * 3
    cases = []
    for k, (n_customers, n_orders) in enumerate(sizes):
        customers, orders = scope["make_data"](rng, n_customers, n_orders)
        label = f"data set {k + 1} ({len(customers)} customers, {len(orders)} orders)"
        load = _SCHEMA + scope["data_sql"](customers, orders)
        cases.append(hs.Case(label, load=load, want=scope["answer"](customers, orders)))
    return cases


@family(
    "region-revenue-pg",
    category="data-querying",
    summary="PostgreSQL query on a live server: outer joins, RANK ties, month calendar windows",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    year, topn = rng.choice([2022, 2023, 2024]), rng.choice([2, 3])
    n_customers, n_orders = spec.iscale(8, 40), spec.iscale(30, 400)
    data = _DATA.format(params=repr((spec.tier, year, topn, n_customers, n_orders)))
    subst = {"YEAR": str(year), "NEXT": str(year + 1), "TOPN": str(topn)}

    def fill(text: str) -> str:
        for key, value in subst.items():
            text = text.replace(key, value)
        return text

    template = {"easy": _EASY, "medium": _MEDIUM, "hard": _HARD}[spec.tier]
    oracle = fill(template)
    wrongs = {
        name: fill(apply_edits(template, edits, name)) for name, edits in _WRONGS[spec.tier].items()
    }
    scope: dict = {}
    exec(data, scope)
    sample = scope["data_sql"](*scope["make_data"](rng, 8, 40))
    question = fill(textwrap.dedent(_QUESTIONS[spec.tier]))
    instruction = textwrap.dedent(
        """\
        # A sales question for PostgreSQL

        Our sales live in a PostgreSQL database (schema: `/app/schema.sql`). Write one SQL
        query in `/app/answer.sql` that answers:

        {question}

        It will be run as one SQL statement (no `psql` meta-commands) against the production
        database (same schema, other data) as a user that may only read, and its rows
        compared with the expected ones, so the query must be right for any data, not only
        the sample. `/app/try_query.sh` runs
        `/app/answer.sql` on a throwaway PostgreSQL server loaded with `/app/sample_data.sql`.
        """
    ).replace("{question}", question)
    tests = hs.tests(
        answer=hs.postgres_query("/app/answer.sql"),
        cases=_cases(scope, rng.randrange(2**31)),
        compare=hs.compare("rows"),
        limits=hs.limits(timeout=120),
        kind="io",
        timeout=400,
    )
    return hs.task(
        instruction=instruction,
        workspace={
            "schema.sql": _SCHEMA,
            "sample_data.sql": sample,
            "try_query.sh": _TRY,
            "answer.sql": "-- your query here\n",
        },
        tests=tests,
        answer_path="answer.sql",
        reference=oracle,
        wrongs=wrongs,
        note="the reference query",
        tags=("sql", "postgresql", "data-querying"),
        verifier_timeout_sec=420.0,
        reward_outcomes=outcomes.TESTS + outcomes.IO,
        packages=_PACKAGES,
    )
