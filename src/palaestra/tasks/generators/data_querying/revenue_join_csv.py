"""revenue-join-csv: join orders, customers and exchange rates from CSV exports into revenue per
country (a script the checker runs on exports generated from a per-task secret, with the
reference's report made when the task is generated).

Easy: one rate per currency, paid orders only, quoted customer names with commas (a naive
``split(",")`` misreads them), orders of unknown customers under ``UNKNOWN``. Medium: rates that
change over time (an as-of join on the order date, boundary days included). Hard: also partial
refunds from a second file and orders exported twice (de-duplicated by id).
"""

from __future__ import annotations

import csv
import io

from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_GEN = r'''
import csv as _csv
import datetime as _dt
import io as _io
import random as _random

COUNTRIES = ["DE", "FR", "NL", "JP", "US", "BR", "KE", "IN", "CA", "SE"]
CURRENCIES = ["USD", "GBP", "JPY", "CHF", "SEK", "BRL"]
WORDS = ["Acme", "Globex", "Initech", "Umbrella", "Stark", "Wayne", "Tyrell", "Cyberdyne",
         "Soylent", "Hooli", "Vandelay", "Wonka"]


def _csv_text(header, rows):
    buf = _io.StringIO()
    w = _csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def make_exports(seed, tier, n_orders):
    """{file name: text} of one export directory."""
    rng = _random.Random(seed)
    countries = rng.sample(COUNTRIES, rng.randint(5, 8))
    customers = []
    for cid in range(1, rng.randint(25, 45)):
        name = rng.choice(WORDS) + " " + rng.choice(["GmbH", "Ltd", "Inc", "SA"])
        if rng.random() < 0.4:
            name = rng.choice(WORDS) + ", " + name  # a comma inside a quoted field
        if rng.random() < 0.1:
            name = name + ' "Intl"'
        customers.append([cid + 100, name, rng.choice(countries)])
    currencies = rng.sample(CURRENCIES, 3) + ["EUR"]
    start = _dt.date(2024, 1, 1)
    rates = []  # (currency, valid_from, rate)
    change_days = {}
    for cur in currencies[:-1]:
        base = rng.uniform(0.005, 0.02) if cur == "JPY" else rng.uniform(0.08, 1.3)
        days = [0] + (sorted(rng.sample(range(10, 170), rng.randint(2, 5))) if tier != "easy"
                      else [])
        change_days[cur] = days
        for d in days:
            rates.append([cur, (start + _dt.timedelta(days=d)).isoformat(),
                          f"{base * rng.uniform(0.9, 1.1):.6f}"])
    rng.shuffle(rates)
    orders = []
    for oid in range(1, n_orders + 1):
        cur = rng.choice(currencies)
        if cur != "EUR" and tier != "easy" and rng.random() < 0.15:
            day = rng.choice(change_days[cur])  # exactly on the day a rate changes
        else:
            day = rng.randrange(180)
        cust = rng.choice(customers)[0] if rng.random() < 0.93 else rng.randint(900, 990)
        status = rng.choices(["paid", "refunded", "cancelled", "pending"], [80, 8, 6, 6])[0]
        amount = rng.randint(100, 500000) / 100 if cur != "JPY" else rng.randint(100, 90000)
        amount_text = f"{amount:.2f}" if cur != "JPY" else str(int(amount))
        orders.append([5000 + oid, cust, (start + _dt.timedelta(days=day)).isoformat(), cur,
                       amount_text, status])
    refunds = []
    if tier == "hard":
        for o in rng.sample(orders, len(orders) // 8):
            part = float(o[4]) * rng.choice([0.1, 0.25, 0.5, 1.0])
            refunds.append([o[0], f"{part:.2f}" if o[3] != "JPY" else str(int(part))])
        orders += [list(o) for o in rng.sample(orders, len(orders) // 12)]  # exported twice
    rng.shuffle(orders)
    files = {
        "customers.csv": _csv_text(["customer_id", "name", "country"], customers),
        "orders.csv": _csv_text(["order_id", "customer_id", "order_date", "currency", "amount",
                                 "status"], orders),
        "fx_rates.csv": _csv_text(["currency", "valid_from", "eur_per_unit"], rates),
    }
    if tier == "hard":
        files["refunds.csv"] = _csv_text(["order_id", "amount"], refunds)
    return files
'''

_RIGHT = r'''"""Revenue per country from the CSV exports: python3 revenue.py EXPORT_DIR"""

import csv
import os
import sys

TIER = "TIER_VALUE"


def read(root, name):
    with open(os.path.join(root, name), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def rate_on(rates, currency, day):
    if currency == "EUR":
        return 1.0
    best = None
    for valid_from, rate in rates[currency]:
        if valid_from <= day:
            best = rate
    return best


def revenue(root):
    country = {r["customer_id"]: r["country"] for r in read(root, "customers.csv")}
    rates = {}
    for r in read(root, "fx_rates.csv"):
        rates.setdefault(r["currency"], []).append((r["valid_from"], float(r["eur_per_unit"])))
    for cur in rates:
        rates[cur].sort()
    refunded = {}
    if TIER == "hard":
        for r in read(root, "refunds.csv"):
            refunded[r["order_id"]] = refunded.get(r["order_id"], 0.0) + float(r["amount"])
    orders = {}
    for o in read(root, "orders.csv"):
        orders[o["order_id"]] = o
    totals = {}
    for o in orders.values():
        if o["status"] != "paid":
            continue
        amount = float(o["amount"]) - refunded.get(o["order_id"], 0.0)
        eur = amount * rate_on(rates, o["currency"], o["order_date"])
        c = country.get(o["customer_id"], "UNKNOWN")
        n, total = totals.get(c, (0, 0.0))
        totals[c] = (n + 1, total + eur)
    rows = sorted(totals.items(), key=lambda kv: (-round(kv[1][1], 2), kv[0]))
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["country", "orders", "revenue_eur"])
    for c, (n, total) in rows:
        out.writerow([c, n, f"{total:.2f}"])


if __name__ == "__main__":
    revenue(sys.argv[1])
'''

_NAIVE_SPLIT = _RIGHT.replace(
    """    with open(os.path.join(root, name), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))""",
    """    with open(os.path.join(root, name), encoding="utf-8") as f:
        lines = f.read().splitlines()
    header = lines[0].split(",")
    return [dict(zip(header, line.split(","))) for line in lines[1:] if line]""",
)
_INNER_JOIN = _RIGHT.replace(
    """        c = country.get(o["customer_id"], "UNKNOWN")""",
    """        if o["customer_id"] not in country:
            continue
        c = country[o["customer_id"]]""",
)
_ALL_STATUSES = _RIGHT.replace(
    """        if o["status"] != "paid":
            continue
""",
    """        if o["status"] == "cancelled":
            continue
""",
)
_LATEST_RATE = _RIGHT.replace("        if valid_from <= day:\n", "        if True:\n")
_STRICT_BEFORE = _RIGHT.replace(
    "        if valid_from <= day:\n", "        if valid_from < day or best is None:\n"
)
_NO_REFUNDS = _RIGHT.replace(
    """amount = float(o["amount"]) - refunded.get(o["order_id"], 0.0)""",
    """amount = float(o["amount"])""",
)
_DUPLICATES = _RIGHT.replace(
    """    orders = {}
    for o in read(root, "orders.csv"):
        orders[o["order_id"]] = o""",
    """    orders = {}
    for i, o in enumerate(read(root, "orders.csv")):
        orders[i] = o""",
)


@family(
    "revenue-join-csv",
    category="data-querying",
    summary="Join orders, customers and FX rates from CSV into revenue per country, run on fresh "
    "exports: quoting and unknown keys (easy), as-of rates (medium), refunds and duplicates (hard)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    tier = spec.tier
    n_orders = spec.iscale(150, 900)
    visible_seed = rng.randrange(10**6)
    secrets = [rng.randrange(10**6, 2**31) for _ in range(2)]
    ns: dict = {}
    exec(compile(_GEN, "<gen>", "exec"), ns)
    exports = ns["make_exports"](visible_seed, tier, n_orders)
    right = _RIGHT.replace("TIER_VALUE", tier)

    files = "`customers.csv`, `orders.csv`, `fx_rates.csv`" + (
        " and `refunds.csv`" if tier == "hard" else ""
    )
    rules = [
        "Only orders with `status` `paid` count (not `refunded`, `cancelled` or `pending`).",
        "Convert each order's `amount` (in its `currency`) to EUR with `eur_per_unit` from "
        "`fx_rates.csv`; `EUR` amounts are already in EUR and have no rate rows.",
        "The country of an order is its customer's `country` in `customers.csv`; orders whose "
        "customer is not in that file go under the country `UNKNOWN`.",
        "The files are standard CSV with a header row: fields may be quoted and contain commas "
        "or quotes (customer names do).",
    ]
    if tier != "easy":
        rules[1] = (
            "Convert each order's `amount` (in its `currency`) to EUR with the rate **in effect "
            "on the order date**: the row of `fx_rates.csv` for that currency with the latest "
            "`valid_from` on or before `order_date` (a rate is valid from its `valid_from` day "
            "included). `EUR` amounts are already in EUR and have no rate rows; every other "
            "order has a rate."
        )
    if tier == "hard":
        rules += [
            "`refunds.csv` lists partial or full refunds (`order_id`, `amount` in the order's "
            "currency; an order may have several): subtract them from the order's amount before "
            "converting, at the same rate. A refunded paid order still counts in `orders`.",
            "The order export sometimes lists an order twice (same `order_id`, identical "
            "rows): count each order once.",
        ]
    instruction = f"""\
# Revenue per country

Finance needs revenue per customer country from our CSV exports. Write `/app/revenue.py` so
that `python3 /app/revenue.py EXPORT_DIR` reads {files} from `EXPORT_DIR` and prints a CSV
report to stdout. `/app/exports/` holds a sample export; the script will be run on other
exports with the same columns, so compute everything from the files.

{chr(10).join("- " + r for r in rules)}

Output: a header line `country,orders,revenue_eur`, then one line per country that has at
least one counted order: the number of counted orders and the revenue in EUR with 2 decimals
(`1234.50`). Sort by revenue descending, then country ascending. Revenue is compared with a
tolerance of 0.01. Only the standard library is available.
"""
    visible = _run_reference(right, exports)
    wrong = {
        "naive-comma-split": _NAIVE_SPLIT,
        "drops-unknown-customers": _INNER_JOIN,
        "counts-every-status": _ALL_STATUSES,
    }
    if tier != "easy":
        wrong["latest-rate"] = _LATEST_RATE
        wrong["rate-from-day-after"] = _STRICT_BEFORE
    if tier == "hard":
        wrong["ignores-refunds"] = _NO_REFUNDS
        wrong["counts-duplicates"] = _DUPLICATES
    wrong = {k: v.replace("TIER_VALUE", tier) for k, v in wrong.items()}
    wrong["visible-report-hardcoded"] = f"import sys\nsys.stdout.write({visible!r})\n"
    return hs.task(
        instruction=instruction,
        workspace={f"exports/{name}": text for name, text in exports.items()},
        tests=_tests(ns["make_exports"], right, tier, n_orders, secrets),
        answer_path="revenue.py",
        reference=right,
        wrongs=wrong,
        note="csv module, as-of",
        tags=("python", "csv", "joins"),
    )


def _tests(make_exports, right: str, tier: str, n_orders: int, secrets: list[int]) -> dict:
    """The script on exports made from the secrets, its CSV against the reference's (run now):
    the header exactly, then the rows (revenue within 0.01)."""
    cases = []
    for i, seed in enumerate(secrets):
        exports = make_exports(seed, tier, n_orders + 31 * i)
        header, *rows = list(csv.reader(io.StringIO(_run_reference(right, exports))))
        files = {f"exports/{name}": text for name, text in exports.items()}
        cases.append(hs.Case(f"export {i + 1}", files=files, want={"header": header, "rows": rows}))
    return hs.tests(
        answer=hs.program(
            ["python3", "{app}/revenue.py", "{in}/exports"], require="/app/revenue.py"
        ),
        cases=cases,
        compare=hs.compare(
            "csv",
            columns=[None, "strip", 0.0100001],
            header_label="{label}: header",
            rows_label="{label}: {n} country rows",
        ),
        limits=hs.limits(timeout=60, cpu=10),
    )


def _run_reference(script: str, exports: dict[str, str]) -> str:
    import contextlib
    import io
    import os
    import tempfile

    ns: dict = {"__name__": "revenue"}
    exec(compile(script, "revenue.py", "exec"), ns)
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in exports.items():
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                f.write(text)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            ns["revenue"](tmp)
    return buf.getvalue()
