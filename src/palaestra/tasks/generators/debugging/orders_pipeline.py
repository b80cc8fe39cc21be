"""orders-pipeline: a CSV-to-summary data pipeline (parse, clean, deduplicate, aggregate, write)
whose monthly figures are wrong.

The pipeline reads an orders export, rejects malformed rows (with a reason), keeps the last
version of each order, drops refunds and writes a per-region, per-month summary. Bugs come from
a pool of eight (date order, month format, currency symbols, e-mail normalisation, which
duplicate wins, refund status normalisation, rounding of the average, negative amounts).
Difficulty knobs: the number of bugs (2 / 3 / 4), their subtlety (hard draws mostly the subtle
ones, which only show on some rows), and how much the finance team's report reveals. The hidden
test (the declarative harness's data) runs the pipeline on secret exports and compares both
output files, and the parsing functions, with the correct pipeline's, computed when the task is
generated (``_orders_check``).
"""

from __future__ import annotations

import textwrap

from palaestra.tasks.generators import family
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.debugging._kit import (
    Bug,
    bug_solutions,
    choose_bugs,
    inject,
    wrong_variants,
)
from palaestra.tasks.generators.debugging._orders_check import orders_tests

_PACKAGES = ["pipeline", "etl", "orderflow", "salesjob", "ledgerpipe"]
_REGIONS = ["north", "south", "east", "west", "central", "coast", "metro", "alps", "delta"]
_DOMAINS = ["example.com", "mail.test", "shop.example", "corp.test"]
_FIRST = ["ana", "ben", "chen", "dara", "eli", "fay", "gus", "hana", "ivo", "jules", "kim", "lea"]


def _sources(pkg: str) -> dict[str, str]:
    return {
        f"{pkg}/__init__.py": f'"""{pkg}: orders export -> monthly summary."""\n',
        f"{pkg}/parse.py": textwrap.dedent(
            '''\
            """Parsing of single fields."""

            import datetime
            import re

            _AMOUNT = re.compile(r"(\\d+)(?:\\.(\\d{1,2}))?")


            def parse_date(text):
                """"2024-03-07" (ISO) or "07/03/2024" (day/month/year) -> datetime.date.

                Anything else raises ValueError."""
                text = text.strip()
                if "/" in text:
                    day, month, year = text.split("/")
                    return datetime.date(int(year), int(month), int(day))
                return datetime.date.fromisoformat(text)


            def parse_cents(text):
                """"12.50", "12.5", "$1,200", " 7 " -> integer cents.

                An optional leading "$" and thousands separators are allowed. Negative amounts,
                more than two decimals and anything else raise ValueError."""
                m = _AMOUNT.fullmatch(text.strip().lstrip("$").replace(",", ""))
                if not m:
                    raise ValueError(f"bad amount {text!r}")
                return int(m.group(1)) * 100 + int((m.group(2) or "0").ljust(2, "0"))


            def month_key(date):
                """The summary's month column: "2024-03"."""
                return f"{date.year}-{date.month:02d}"
            '''
        ),
        f"{pkg}/clean.py": textwrap.dedent(
            '''\
            """Row cleaning: normalise, reject, deduplicate."""

            from .parse import parse_cents, parse_date

            FIELDS = ("order_id", "email", "region", "date", "amount", "status")


            def clean(rows):
                """rows: dicts read from the CSV (line numbers start at 2, after the header).

                Returns (orders, rejects). Each order is a dict with order_id, email (stripped
                and lower-cased), region (stripped, upper-cased), date (datetime.date), cents
                and status (stripped, lower-cased). A row with a missing or empty field, a bad
                date or a bad amount is rejected as (line, reason). When an order id appears
                more than once, the last valid row wins.
                """
                orders, rejects = {}, []
                for line, row in enumerate(rows, start=2):
                    missing = [f for f in FIELDS if not (row.get(f) or "").strip()]
                    if missing:
                        rejects.append((line, "missing " + missing[0]))
                        continue
                    try:
                        date = parse_date(row["date"])
                    except ValueError:
                        rejects.append((line, "bad date"))
                        continue
                    try:
                        cents = parse_cents(row["amount"])
                    except ValueError:
                        rejects.append((line, "bad amount"))
                        continue
                    oid = row["order_id"].strip()
                    orders.pop(oid, None)
                    orders[oid] = {
                        "order_id": oid,
                        "email": row["email"].strip().lower(),
                        "region": row["region"].strip().upper(),
                        "date": date,
                        "cents": cents,
                        "status": row["status"].strip().lower(),
                    }
                return list(orders.values()), rejects
            '''
        ),
        f"{pkg}/summary.py": textwrap.dedent(
            '''\
            """Aggregation and output."""

            import csv

            from .parse import month_key


            def summarise(orders):
                """Per (region, month) over the orders whose status is not "refunded": orders,
                distinct customers (e-mails), revenue and average order value in cents (the
                average rounded half up). Rows sorted by region, then month."""
                groups = {}
                for o in orders:
                    if o["status"] == "refunded":
                        continue
                    g = groups.setdefault((o["region"], month_key(o["date"])), [0, set(), 0])
                    g[0] += 1
                    g[1].add(o["email"])
                    g[2] += o["cents"]
                rows = []
                for (region, month), (n, emails, revenue) in sorted(groups.items()):
                    average = (2 * revenue + n) // (2 * n)
                    rows.append([region, month, n, len(emails), revenue, average])
                return rows


            def fmt(cents):
                return f"{cents // 100}.{cents % 100:02d}"


            def write_summary(rows, path):
                with open(path, "w", newline="") as f:
                    w = csv.writer(f)
                    w.writerow(["region", "month", "orders", "customers", "revenue", "average"])
                    for region, month, n, customers, revenue, average in rows:
                        w.writerow([region, month, n, customers, fmt(revenue), fmt(average)])


            def write_rejects(rejects, path):
                with open(path, "w", newline="") as f:
                    w = csv.writer(f)
                    w.writerow(["line", "reason"])
                    w.writerows(rejects)
            '''
        ),
        f"{pkg}/__main__.py": textwrap.dedent(
            f'''\
            """python3 -m {pkg} ORDERS_CSV OUT_DIR: write OUT_DIR/summary.csv and rejects.csv."""

            import csv
            import os
            import sys

            from .clean import clean
            from .summary import summarise, write_rejects, write_summary


            def main(argv):
                if len(argv) != 2:
                    sys.exit("usage: python3 -m {pkg} ORDERS_CSV OUT_DIR")
                with open(argv[0], newline="") as f:
                    orders, rejects = clean(list(csv.DictReader(f)))
                os.makedirs(argv[1], exist_ok=True)
                write_summary(summarise(orders), os.path.join(argv[1], "summary.csv"))
                write_rejects(rejects, os.path.join(argv[1], "rejects.csv"))


            if __name__ == "__main__":
                main(sys.argv[1:])
            '''
        ),
    }


def _bugs(pkg: str) -> list[Bug]:
    p, c, s = f"{pkg}/parse.py", f"{pkg}/clean.py", f"{pkg}/summary.py"
    return [
        Bug(
            "date-order",
            p,
            (("day, month, year = text.split", "month, day, year = text.split"),),
            (
                (
                    "return datetime.date(int(year), int(month), int(day))",
                    "return datetime.date(int(year), min(int(month), int(day)), max(int(month), int(day)))",
                ),
            ),  # fmt: skip
            'Orders dated like "25/03/2024" are all rejected as "bad date", and early-March '
            "orders show up in other months.",
            "    def test_day_first(self):\n"
            '        self.assertEqual(parse_date("25/03/2024"), datetime.date(2024, 3, 25))\n'
            '        self.assertEqual(parse_date("02/03/2024"), datetime.date(2024, 3, 2))\n',
        ),
        Bug(
            "month-format",
            p,
            (('f"{date.year}-{date.month:02d}"', 'f"{date.year}-{date.month}"'),),
            (('f"{date.year}-{date.month:02d}"', 'f"{date.year}-{date.month:2d}"'),),
            'The month column reads "2024-3" and January sorts after October.',
            "    def test_month_key(self):\n"
            '        self.assertEqual(month_key(datetime.date(2024, 3, 9)), "2024-03")\n',
        ),
        Bug(
            "currency-symbol",
            p,
            (('text.strip().lstrip("$").replace(",", "")', 'text.strip().replace(",", "")'),),
            (('text.strip().lstrip("$").replace(",", "")', 'text.strip().lstrip("$")'),),
            'Every amount written with a dollar sign ("$45.00") lands in rejects.csv.',
            '    def test_dollar(self):\n        self.assertEqual(parse_cents("$1,045.5"), 104550)\n',
        ),
        Bug(
            "email-case",
            c,
            (('"email": row["email"].strip().lower()', '"email": row["email"].strip()'),),
            (('"email": row["email"].strip().lower()', '"email": row["email"].lower()'),),
            "The customers column counts the same person twice when the shop saved their "
            "address with capitals.",
            "    def test_email_normalised(self):\n"
            "        rows = [dict(ROW, order_id='1', email='Ann@X.test'), "
            "dict(ROW, order_id='2', email=' ann@x.test ')]\n"
            "        orders, _ = clean(rows)\n"
            "        self.assertEqual(summarise(orders)[0][3], 1)\n",
        ),
        Bug(
            "first-duplicate-wins",
            c,
            (
                (
                    "orders.pop(oid, None)\n        orders[oid] = {",
                    "if oid in orders:\n            continue\n        orders[oid] = {",
                ),
            ),  # fmt: skip
            (
                (
                    "orders.pop(oid, None)\n        orders[oid] = {",
                    "orders.pop(oid, None)\n        orders[oid + row['email'].strip().lower()] = {",
                ),
            ),  # fmt: skip
            "Corrected orders keep their old amount.",
            "    def test_last_row_wins(self):\n"
            "        rows = [dict(ROW, amount='10'), dict(ROW, amount='12.5')]\n"
            "        orders, _ = clean(rows)\n"
            "        self.assertEqual([o['cents'] for o in orders], [1250])\n",
            subtle=True,
        ),
        Bug(
            "refund-status",
            c,
            (('"status": row["status"].strip().lower()', '"status": row["status"].strip()'),),
            (('"status": row["status"].strip().lower()', '"status": row["status"].lower()'),),
            "Some refunded orders still count as revenue.",
            "    def test_refund_status(self):\n"
            "        orders, _ = clean([dict(ROW, status='Refunded')])\n"
            "        self.assertEqual(summarise(orders), [])\n",
            subtle=True,
        ),
        Bug(
            "average-rounding",
            s,
            (("(2 * revenue + n) // (2 * n)", "revenue // n"),),
            (("(2 * revenue + n) // (2 * n)", "-(-revenue // n)"),),
            "The average order value is often a cent off finance's figure.",
            "    def test_average_half_up(self):\n"
            "        rows = [dict(ROW, order_id=str(i), amount=a) for i, a in "
            "enumerate(['0.01', '0.02', '0.02'])]\n"
            "        orders, _ = clean(rows)\n"
            "        self.assertEqual(summarise(orders)[0][5], 2)\n",
            subtle=True,
        ),
        Bug(
            "negative-amounts",
            p,
            (('_AMOUNT = re.compile(r"(\\d+)', '_AMOUNT = re.compile(r"(-?\\d+)'),),
            # over-corrects: rejects zero amounts too
            (("if not m:", 'if not m or not int(m.group(1) + (m.group(2) or "0")):'),),
            "Negative amounts from the old till system are not rejected.",
            "    def test_negative_rejected(self):\n"
            "        with self.assertRaises(ValueError):\n"
            '            parse_cents("-5.00")\n',
            subtle=True,
        ),
    ]


@family(
    "orders-pipeline",
    category="debugging",
    summary="CSV orders pipeline (parse, dedupe, aggregate) with 2-4 injected data bugs",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    pkg = rng.choice(_PACKAGES)
    regions = rng.sample(_REGIONS, rng.randrange(3, 6))
    correct = _sources(pkg)
    pool = _bugs(pkg)
    n_obvious, n_subtle = {"easy": (2, 0), "medium": (2, 1), "hard": (1, 3)}[spec.tier]
    bugs = choose_bugs(rng, pool, n_obvious, n_subtle)
    shown_n = {"easy": len(bugs), "medium": len(bugs) - 1, "hard": 2}[spec.tier]
    shown = sorted(rng.sample(bugs, shown_n), key=bugs.index)
    workspace = inject(correct, bugs)
    workspace["data/orders.csv"] = _sample_csv(rng, regions, rng.randrange(25, 45))
    workspace["NOTES.md"] = _report(pkg, shown)
    workspace["tests/test_pipeline.py"] = _visible_tests(pkg, shown, regions[0])
    secret = rng.randrange(2**31)
    instruction = textwrap.dedent(
        f"""\
        # Fix the orders pipeline

        `/app/{pkg}/` turns an orders export into the monthly summary finance uses:
        `cd /app && python3 -m {pkg} data/orders.csv out/` writes `out/summary.csv` and
        `out/rejects.csv`. Finance says the figures are wrong; their notes are in
        `/app/NOTES.md`, and `cd /app && python3 -m unittest discover -s tests` fails.

        Find and fix the bugs in the pipeline{
            "" if spec.tier == "easy" else " (the notes may not list every problem)"
        }. The
        docstrings document the intended behaviour; it must hold for any export, not only
        `data/orders.csv`. Keep the command line, the module and function names and the format
        of both output files as they are. Only the standard library is available.
        """
    )
    wrongs = wrong_variants(correct, bugs, rng)
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=orders_tests(pkg, correct, _export(), regions, secret, spec.iscale(150, 600)),
        **bug_solutions(correct, workspace, wrongs, note="the correct pipeline"),
        tags=("python", "debugging", "csv", "data-pipeline"),
    )


def _report(pkg: str, shown: list[Bug]) -> str:
    items = "\n".join(f"* {b.symptom}" for b in shown)
    return f"# Finance: problems with the {pkg} summary\n\n{items}\n"


def _visible_tests(pkg: str, shown: list[Bug], region: str) -> str:
    body = "\n".join(b.visible_test for b in shown)
    return (
        "import datetime\nimport unittest\n\n"
        f"from {pkg}.clean import clean\n"
        f"from {pkg}.parse import month_key, parse_cents, parse_date\n"
        f"from {pkg}.summary import summarise\n\n"
        f"ROW = {{'order_id': 'A1', 'email': 'a@x.test', 'region': '{region}', "
        "'date': '2024-03-05', 'amount': '10.00', 'status': 'paid'}\n\n\n"
        f"class PipelineTests(unittest.TestCase):\n{body}\n\n"
        'if __name__ == "__main__":\n    unittest.main()\n'
    )


_ROWS_CODE = r'''
def export(rng, regions, n):
    """A random orders export with every odd case the pipeline must handle."""
    people = ["{}{}".format(rng.choice(FIRST), rng.randrange(100)) for _ in range(max(4, n // 5))]
    lines = ["order_id,email,region,date,amount,status"]
    ids = []
    for k in range(n):
        oid = "O{}".format(rng.randrange(10**5)) if not ids or rng.random() < 0.85 else rng.choice(ids)
        ids.append(oid)
        email = rng.choice(people) + "@" + rng.choice(DOMAINS)
        r = rng.random()
        if r < 0.2:
            email = email.capitalize()
        elif r < 0.3:
            email = " " + email.upper() + " "
        region = rng.choice(regions)
        region = rng.choice([region, region.upper(), " " + region.title()])
        y, m, d = rng.choice([2023, 2024]), rng.randrange(1, 13), rng.randrange(1, 29)
        date = rng.choice(["{}-{:02d}-{:02d}".format(y, m, d), "{:02d}/{:02d}/{}".format(d, m, y)])
        cents = rng.randrange(0, 200000)
        amount = "{}.{:02d}".format(cents // 100, cents % 100)
        r = rng.random()
        if r < 0.15:
            amount = "$" + amount
        elif r < 0.25 and cents >= 100000:
            amount = "${:,}.{:02d}".format(cents // 100, cents % 100)
        elif r < 0.35 and cents % 10 == 0:
            amount = amount[:-1]
        status = rng.choice(["paid"] * 6 + ["refunded", "Refunded", " REFUNDED", "shipped"])
        row = [oid, email, region, date, amount, status]
        r = rng.random()
        if r < 0.03:
            row[4] = "-" + row[4].lstrip("$")
        elif r < 0.05:
            row[3] = "{}-13-01".format(y)
        elif r < 0.07:
            row[rng.randrange(6)] = ""
        elif r < 0.08:
            row[4] = "12.345"
        lines.append(",".join('"{}"'.format(x) if "," in x else x for x in row))
    return "\n".join(lines) + "\n"
'''


def _export():
    scope: dict = {"FIRST": _FIRST, "DOMAINS": _DOMAINS}
    exec(_ROWS_CODE, scope)
    return scope["export"]


def _sample_csv(rng, regions: list[str], n: int) -> str:
    return _export()(rng, regions, n)
