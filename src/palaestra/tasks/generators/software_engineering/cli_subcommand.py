"""cli-subcommand: add a ``report`` subcommand to a multi-module bookkeeping CLI.

The workspace is a package ``<pkg>/`` (``money``, ``store``, ``cli`` and a ``commands/`` package
whose modules register their subcommands) with ``add`` and ``list`` and its own tests. The agent
adds ``commands/report.py``: totals per group as an aligned table, with filters and validation.
The checker imports nothing from /app: it runs the CLI as ``nobody`` on ledgers drawn from the
task's secret (refunds, ties, untagged entries, months at year ends) with many argument sets, the
old commands included, and compares exit status, stdout and stderr with a private reference.

Difficulty knobs: easy reports per category with ``--month``; medium adds ``--from``/``--to``,
``--by tag|month`` (an entry counts once per tag; the TOTAL row counts entries once) and
``--format json``; hard adds ``--budget FILE`` (every budgeted category listed, BUDGET and LEFT
columns, exit status 3 when over budget) with its validation. Ledger size grows.
"""

from __future__ import annotations

import json
import random
import textwrap

from palaestra.tasks.generators import family, solve_sh_writing
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_PKGS = ["ledger", "pennies", "bookkeeper", "tally"]
_CATS = ["food", "rent", "travel", "books", "utilities", "fun", "health", "gifts"]
_TAGS = ["work", "family", "tax", "cash", "online", "q1"]

_MONEY = '''\
"""Amounts are strings like "12.50" or "-3.20" in the ledger; we compute in integer cents."""
import re

_AMOUNT = re.compile(r"-?[0-9]+(\\.[0-9]{1,2})?")


def parse_amount(text):
    """ "12.5" -> 1250; ValueError for anything else."""
    if not isinstance(text, str) or not _AMOUNT.fullmatch(text):
        raise ValueError(f"invalid amount: {text}")
    sign = -1 if text.startswith("-") else 1
    whole, _, frac = text.lstrip("-").partition(".")
    return sign * (int(whole) * 100 + int((frac + "00")[:2]))


def format_cents(cents):
    """1250 -> "12.50", -5 -> "-0.05"."""
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"
'''

_STORE = '''\
"""The ledger file: a JSON list of entries {id, date, amount, category, note, tags}."""
import json
import os


def load(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def save(path, entries):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(entries, f, indent=1)
    os.replace(tmp, path)
'''

_CLI = '''\
"""python3 -m {pkg} [--db FILE] COMMAND ...: every module in commands.COMMANDS adds one command."""
import argparse
import sys

from {pkg}.commands import COMMANDS


def main(argv=None):
    parser = argparse.ArgumentParser(prog="{pkg}")
    parser.add_argument("--db", default="ledger.json", help="the ledger file")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
'''

_MAIN = """\
import sys

from {pkg}.cli import main

sys.exit(main())
"""

_ADD = '''\
"""add --date YYYY-MM-DD --amount 12.50 --category C [--note N] [--tag T ...]"""
import re
import sys

from {pkg} import store
from {pkg}.money import parse_amount


def register(sub):
    p = sub.add_parser("add", help="record an entry")
    p.add_argument("--date", required=True)
    p.add_argument("--amount", required=True)
    p.add_argument("--category", required=True)
    p.add_argument("--note", default="")
    p.add_argument("--tag", action="append", default=[])
    p.set_defaults(run=run)


def run(args):
    if not re.fullmatch(r"[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}", args.date):
        print(f"error: invalid date: {{args.date}}", file=sys.stderr)
        return 2
    try:
        parse_amount(args.amount)
    except ValueError as e:
        print(f"error: {{e}}", file=sys.stderr)
        return 2
    entries = store.load(args.db)
    entry = {{"id": max((e["id"] for e in entries), default=0) + 1, "date": args.date,
             "amount": args.amount, "category": args.category, "note": args.note,
             "tags": args.tag}}
    entries.append(entry)
    store.save(args.db, entries)
    print(f"added #{{entry['id']}}")
    return 0
'''

_LIST = '''\
"""list [--category C]: one line per entry, in date order."""
from {pkg} import store
from {pkg}.money import format_cents, parse_amount


def register(sub):
    p = sub.add_parser("list", help="show entries")
    p.add_argument("--category")
    p.set_defaults(run=run)


def run(args):
    entries = sorted(store.load(args.db), key=lambda e: (e["date"], e["id"]))
    for e in entries:
        if args.category and e["category"] != args.category:
            continue
        tags = ",".join(e["tags"])
        print(f"{{e['id']:>4}}  {{e['date']}}  {{format_cents(parse_amount(e['amount'])):>10}}  "
              f"{{e['category']}}  {{e['note']}}" + (f"  [{{tags}}]" if tags else ""))
    return 0
'''

_INIT_OLD = '''\
"""The subcommands: each module has register(subparsers) and sets ``run``."""
from {pkg}.commands import add, list_

COMMANDS = [add, list_]
'''

_INIT_NEW = _INIT_OLD.replace("import add, list_", "import add, list_, report").replace(
    "[add, list_]", "[add, list_, report]"
)

_REPORT = '''\
"""report: totals per group as a table (or JSON)."""
import datetime
import json
import re
import sys

from {pkg} import store
from {pkg}.money import format_cents, parse_amount


def register(sub):
    p = sub.add_parser("report", help="totals per group")
    p.add_argument("--month")
    p.add_argument("--from", dest="start")
    p.add_argument("--to", dest="end")
    p.add_argument("--by", choices=["category", "tag", "month"], default="category")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--budget")
    p.set_defaults(run=run)


def _fail(message):
    print(f"error: {{message}}", file=sys.stderr)
    return 2


def _date(text):
    if not re.fullmatch(r"[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}", text):
        return None
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        return None


def run(args):
    if args.month is not None and not re.fullmatch(r"[0-9]{{4}}-(0[1-9]|1[0-2])", args.month):
        return _fail(f"invalid month: {{args.month}}")
    for text in (args.start, args.end):
        if text is not None and _date(text) is None:
            return _fail(f"invalid date: {{text}}")
    if args.start and args.end and args.start > args.end:
        return _fail("--from is after --to")
    budget = None
    if args.budget is not None:
        if args.by != "category":
            return _fail("--budget needs --by category")
        try:
            with open(args.budget, encoding="utf-8") as f:
                raw = json.load(f)
        except (OSError, ValueError):
            return _fail(f"cannot read budget: {{args.budget}}")
        if not isinstance(raw, dict):
            return _fail(f"cannot read budget: {{args.budget}}")
        budget = {{}}
        for cat in sorted(raw):
            try:
                budget[cat] = parse_amount(raw[cat])
            except ValueError:
                return _fail(f"invalid budget for {{cat}}: {{raw[cat]}}")
    entries = []
    for e in store.load(args.db):
        if args.month and not e["date"].startswith(args.month + "-"):
            continue
        if args.start and e["date"] < args.start:
            continue
        if args.end and e["date"] > args.end:
            continue
        entries.append(e)
    groups = {{}}
    for e in entries:
        cents = parse_amount(e["amount"])
        if args.by == "category":
            keys = [e["category"]]
        elif args.by == "month":
            keys = [e["date"][:7]]
        else:
            keys = sorted(set(e["tags"])) or ["(untagged)"]
        for key in keys:
            count, total = groups.get(key, (0, 0))
            groups[key] = (count + 1, total + cents)
    if budget is not None:
        for cat in budget:
            groups.setdefault(cat, (0, 0))
    rows = sorted(groups.items(), key=lambda kv: (-kv[1][1], kv[0]))
    count = len(entries)
    total = sum(parse_amount(e["amount"]) for e in entries)
    over = False
    if args.format == "json":
        out = {{"groups": [], "count": count, "total": format_cents(total)}}
        for name, (n, cents) in rows:
            g = {{"name": name, "count": n, "total": format_cents(cents)}}
            if budget is not None:
                b = budget.get(name, 0)
                g["budget"], g["left"] = format_cents(b), format_cents(b - cents)
                over = over or cents > b
            out["groups"].append(g)
        if budget is not None:
            out["budget"] = format_cents(sum(budget.values()))
            out["left"] = format_cents(sum(budget.values()) - total)
        print(json.dumps(out, indent=2))
    else:
        title = args.by.upper()
        width = max([len(title), len("TOTAL")] + [len(name) for name in groups])
        head = f"{{title:<{{width}}}}  {{'COUNT':>5}}  {{'TOTAL':>10}}"
        if budget is not None:
            head += f"  {{'BUDGET':>10}}  {{'LEFT':>10}}"
        print(head)
        for name, (n, cents) in rows:
            line = f"{{name:<{{width}}}}  {{n:>5}}  {{format_cents(cents):>10}}"
            if budget is not None:
                b = budget.get(name, 0)
                line += f"  {{format_cents(b):>10}}  {{format_cents(b - cents):>10}}"
                over = over or cents > b
            print(line)
        foot = f"{{'TOTAL':<{{width}}}}  {{count:>5}}  {{format_cents(total):>10}}"
        if budget is not None:
            b = sum(budget.values())
            foot += f"  {{format_cents(b):>10}}  {{format_cents(b - total):>10}}"
        print(foot)
    return 3 if over else 0
'''


def _visible_tests(pkg: str) -> str:
    return textwrap.dedent(
        f'''\
        """The package's own tests: `cd /app && python3 -m unittest discover -s tests`."""
        import io
        import os
        import tempfile
        import unittest
        from contextlib import redirect_stdout

        from {pkg}.cli import main
        from {pkg}.money import format_cents, parse_amount


        class CliTests(unittest.TestCase):
            def test_money(self):
                self.assertEqual(parse_amount("-3.2"), -320)
                self.assertEqual(format_cents(-5), "-0.05")

            def test_add_then_list(self):
                with tempfile.TemporaryDirectory() as tmp:
                    db = os.path.join(tmp, "l.json")
                    with redirect_stdout(io.StringIO()):
                        self.assertEqual(main(["--db", db, "add", "--date", "2024-01-02",
                                               "--amount", "12.5", "--category", "food"]), 0)
                    out = io.StringIO()
                    with redirect_stdout(out):
                        main(["--db", db, "list"])
                    self.assertIn("12.50", out.getvalue())


        if __name__ == "__main__":
            unittest.main()
        '''
    )


def _ledger(rng, n):
    """Entries with refunds, untagged entries, year-end months and a tie between two categories."""
    entries = []
    for i in range(n):
        y, m = rng.choice([2023, 2024]), rng.randrange(1, 13)
        cents = rng.choice(
            [rng.randrange(100, 20000), rng.randrange(1, 99), -rng.randrange(100, 3000)]
        )
        amount = ("-" if cents < 0 else "") + "%d.%02d" % (abs(cents) // 100, abs(cents) % 100)
        if rng.random() < 0.2:
            amount = amount.rstrip("0").rstrip(".") if "." in amount else amount
        entries.append({
            "id": i + 1,
            "date": "%d-%02d-%02d" % (y, m, rng.randrange(1, 29)),
            "amount": amount,
            "category": rng.choice(_CATS[:6]),
            "note": rng.choice(["", "weekly", "refund", "card"]),
            "tags": rng.sample(_TAGS, rng.choice([0, 0, 1, 1, 2, 3])),
        })  # fmt: skip
    entries[0]["amount"] = "-%d.%02d" % (rng.randrange(1, 40), rng.randrange(100))  # a refund
    entries[-1]["tags"] = rng.sample(_TAGS, 2)
    date = entries[0]["date"]
    for cat in ("health", "gifts"):  # the same total: the tie is broken by name, not ledger order
        entries.append({"id": len(entries) + 1, "date": date, "amount": "25.00", "category": cat,
                        "note": "", "tags": []})  # fmt: skip
    rng.shuffle(entries)
    pos = {e["category"]: i for i, e in enumerate(entries) if e["category"] in ("gifts", "health")}
    if pos["gifts"] < pos["health"]:
        i, j = pos["gifts"], pos["health"]
        entries[i], entries[j] = entries[j], entries[i]
    return entries


def _argvs(rng, tier, entries):
    months = sorted({e["date"][:7] for e in entries})
    dates = sorted(e["date"] for e in entries)
    argvs = [["list"], ["list", "--category", entries[0]["category"]], ["report"]]
    argvs += [["report", "--month", m] for m in rng.sample(months, min(3, len(months)))]
    argvs += [["report", "--month", "2031-01"], ["report", "--month", "2024-13"],
              ["report", "--month", "2024-1"], ["report", "--month", "24-01"]]  # fmt: skip
    if tier != "easy":
        lo, hi = sorted(rng.sample(dates, 2))
        argvs += [
            ["report", "--from", lo, "--to", hi],
            ["report", "--from", hi],
            ["report", "--to", lo],
        ]
        argvs += [
            ["report", "--by", "tag"],
            ["report", "--by", "month"],
            ["report", "--by", "tag", "--format", "json"],
        ]
        argvs += [
            ["report", "--format", "json", "--month", months[0]],
            ["report", "--from", hi, "--to", lo],
        ]
        argvs += [["report", "--from", "2024-02-30"], ["report", "--to", "20240105"]]
        argvs += [["report", "--by", "month", "--from", dates[0], "--to", dates[0]]]
    if tier == "hard":
        argvs += [["report", "--budget", "BUDGET"], ["report", "--budget", "BUDGET", "--format", "json"],
                  ["report", "--budget", "BUDGET", "--month", months[-1]],
                  ["report", "--budget", "BIG"], ["report", "--budget", "BAD"],
                  ["report", "--budget", "MISSING"], ["report", "--budget", "BUDGET", "--by", "tag"]]  # fmt: skip
    return argvs


def _budgets(rng, entries):
    spent = {}
    for e in entries:
        spent[e["category"]] = spent.get(e["category"], 0) + float(e["amount"])
    cats = sorted(spent)
    budget = {
        c: "%d.%02d" % (rng.randrange(0, 600), rng.randrange(100)) for c in rng.sample(cats, 3)
    }
    budget[max(cats, key=lambda c: (spent[c], c))] = "0.00"  # over budget
    budget["savings"] = "100"  # budgeted, never spent
    big = {c: "100000" for c in cats}
    bad = dict(budget, **{cats[0]: "12,50"})
    return {"BUDGET": budget, "BIG": big, "BAD": bad}


@family(
    "cli-subcommand",
    category="software-engineering",
    summary="Add a report subcommand (filters, grouping, JSON, budgets) to a multi-module CLI",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    pkg = rng.choice(_PKGS)
    tier = spec.tier
    secret = rng.randrange(2**31)
    n = spec.iscale(15, 80)

    asks = [
        """\
- `python3 -m {pkg} [--db FILE] report` prints, for each category, how many entries it has and
  their total, as a table: a header line, one line per group, then a `TOTAL` line. Columns are
  joined by two spaces: the group name left-aligned to width `W` (the longest of the header
  word, `TOTAL` and every group name), `COUNT` right-aligned to width 5, `TOTAL` right-aligned to
  width 10 (amounts written like `format_cents` does). The header is `CATEGORY`, `COUNT`,
  `TOTAL` laid out the same way. Groups are sorted by total, largest first, then by name.
  Refunds (negative amounts) count like any entry. With no entries, only the header and the
  `TOTAL` line (`0`, `0.00`).
- `--month YYYY-MM` keeps entries of that month only. A value that is not four digits, a dash
  and a month `01`..`12`: print `error: invalid month: <value>` to stderr, exit status 2."""
    ]
    if tier != "easy":
        asks.append(
            """\
- `--from YYYY-MM-DD` and `--to YYYY-MM-DD`: inclusive date bounds (combinable with each other
  and with `--month`). A value not in exactly that form, or not a real date:
  `error: invalid date: <value>`; `--from` later than `--to`: `error: --from is after --to`
  (both exit 2; check `--month`, then `--from`, then `--to`, then the order).
- `--by category|tag|month` (default `category`; the header word is the choice in upper case).
  With `tag`, an entry counts once in each of its tags (a tag listed twice counts once), and an
  entry without tags goes to `(untagged)`; the `TOTAL` line still counts each entry once. With
  `month`, the group is `YYYY-MM`.
- `--format json` prints instead `{"groups": [{"name": ..., "count": ..., "total": "12.50"},
  ...], "count": N, "total": "..."}` (same order, amounts as strings), with `json.dumps(...,
  indent=2)`."""
        )
    if tier == "hard":
        asks.append(
            """\
- `--budget FILE`: a JSON object from category to amount (a string, as in the ledger). Only
  with `--by category`, else `error: --budget needs --by category`. Every budgeted category is
  listed even without entries; two more columns, `BUDGET` and `LEFT` (budget minus total; `0.00`
  budget for categories not in the file), width 10 each, also on the `TOTAL` line (the sum of
  all budgets, and that minus the total). In JSON, each group gets `"budget"` and `"left"` and
  so does the top level. When any category spent more than its budget, print the report anyway
  and exit with status 3. A file that cannot be read or is not a JSON object:
  `error: cannot read budget: <FILE>`; an amount that does not parse: `error: invalid budget
  for <category>: <value>` (the first such category in sorted order). Both exit 2, checked after
  the date options."""
        )
    instruction = textwrap.dedent(
        """\
        # A `report` command for `{pkg}`

        `/app/{pkg}/` is our little bookkeeping CLI (`python3 -m {pkg} --db FILE add|list ...`).
        Each subcommand is a module of `{pkg}/commands/` with `register(subparsers)`, listed in
        `{pkg}/commands/__init__.py`; amounts are strings in the ledger and `{pkg}/money.py`
        turns them into integer cents and back. Add a `report` subcommand:

        {asks}

        It only reads the ledger. `add` and `list` must keep working exactly as they do (see
        `/app/tests/`: `cd /app && python3 -m unittest discover -s tests`). There is a sample
        ledger in `/app/sample-ledger.json`. Only the standard library is available.
        """
    ).format(pkg=pkg, asks="\n".join(asks).replace("{pkg}", pkg))

    workspace = {
        f"{pkg}/__init__.py": f'"""{pkg}: a tiny ledger."""\n',
        f"{pkg}/__main__.py": _MAIN.format(pkg=pkg),
        f"{pkg}/money.py": _MONEY,
        f"{pkg}/store.py": _STORE,
        f"{pkg}/cli.py": _CLI.format(pkg=pkg),
        f"{pkg}/commands/__init__.py": _INIT_OLD.format(pkg=pkg),
        f"{pkg}/commands/add.py": _ADD.format(pkg=pkg),
        f"{pkg}/commands/list_.py": _LIST.format(pkg=pkg),
        "tests/test_cli.py": _visible_tests(pkg),
        "sample-ledger.json": json.dumps(_ledger(rng, 8), indent=1) + "\n",
    }
    report = _REPORT.format(pkg=pkg)
    init = _INIT_NEW.format(pkg=pkg)

    def variant(text):
        return {f"{pkg}/commands/report.py": text, f"{pkg}/commands/__init__.py": init}

    wrong = {
        # ties keep ledger order instead of name order
        "ties-not-by-name": variant(
            report.replace("key=lambda kv: (-kv[1][1], kv[0])", "key=lambda kv: -kv[1][1]")
        ),
        # accepts month 13 and single-digit months
        "loose-month-check": variant(
            report.replace(r'r"[0-9]{4}-(0[1-9]|1[0-2])"', r'r"[0-9]{4}-[0-9]{1,2}"')
        ),
        # refunds left out of the totals
        "skips-refunds": variant(
            report.replace(
                "    for e in store.load(args.db):\n",
                '    for e in store.load(args.db):\n        if e["amount"].startswith("-"):\n            continue\n',
            )
        ),
        # name column not widened for long names
        "fixed-width-names": variant(
            report.replace(
                'width = max([len(title), len("TOTAL")] + [len(name) for name in groups])',
                "width = 10",
            )
        ),
    }
    if tier != "easy":
        wrong["to-exclusive"] = variant(
            report.replace(
                'if args.end and e["date"] > args.end:', 'if args.end and e["date"] >= args.end:'
            )
        )
        wrong["untagged-dropped"] = variant(
            report.replace(
                'keys = sorted(set(e["tags"])) or ["(untagged)"]', 'keys = sorted(set(e["tags"]))'
            )
        )
        wrong["total-row-sums-groups"] = variant(
            report.replace(
                '    count = len(entries)\n    total = sum(parse_amount(e["amount"]) for e in entries)',
                "    count = sum(n for n, _ in groups.values())\n    total = sum(c for _, c in groups.values())",
            )
        )
    if tier == "hard":
        wrong["budget-lists-spent-only"] = variant(
            report.replace(
                "        for cat in budget:\n            groups.setdefault(cat, (0, 0))\n", ""
            )
        )
        wrong["over-budget-exit-0"] = variant(
            report.replace("    return 3 if over else 0", "    return 0")
        )
    for name, files in wrong.items():
        assert files[f"{pkg}/commands/report.py"] != report, name
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=_tests(pkg, tier, secret, n),
        solution={
            "solve.sh": solve_sh_writing(variant(report), note="commands/report.py, registered")
        },
        wrong_solutions={
            name: {"solve.sh": solve_sh_writing(f, note=f"wrong: {name}")}
            for name, f in wrong.items()
        },
        tags=("python", "feature", "cli"),
        verifier_timeout_sec=240.0,
    )


#: Runs every trial's argvs in one process, as the CLI's main() would, in a directory of the
#: trial's files (the ledger, budgets) named as in the argvs; a fresh copy of the ledger each.
_RUNNER = """
import contextlib, io, os, shutil, tempfile
from PKG.cli import main

out = []
for trial in INPUT:
    os.chdir(tempfile.mkdtemp())
    for name, text in trial["files"].items():
        with open(name, "w", encoding="utf-8") as f:
            f.write(text)
    for argv in trial["argvs"]:
        shutil.copy("ledger.json", "db.json")
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = main(["--db", "db.json"] + argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except Exception as e:
                code = "crash: " + type(e).__name__
        with open("db.json", encoding="utf-8") as f:
            after = f.read()
        out.append([code, stdout.getvalue(), stderr.getvalue().strip()[-300:], after])
emit(out)
"""

#: The reference's module entry point in a real process, at generation time, on a copy of
#: the last trial's ledger (the checker runs the agent's as a program).
_ENTRY = """
import os, subprocess, sys
with open("l.json", "w", encoding="utf-8") as f:
    f.write(INPUT)
argv = [sys.executable, "-m", "PKG", "--db", os.path.abspath("l.json")] + ARGV
r = subprocess.run(argv, capture_output=True, encoding="utf-8", errors="replace", timeout=30)
emit([r.returncode, r.stdout, r.stderr.strip()[-300:]])
"""

#: The entry point's argv: an error path, so its output names no path.
_ENTRY_ARGV = ["report", "--month", "1999-00"]


def _tests(pkg: str, tier: str, secret: int, n: int) -> dict:
    """Two ledgers drawn from the task's secret, each with its argvs (old commands included);
    the reference package's answers fixed now, the agent's CLI run on them in the checker."""
    rng = random.Random(secret)
    trials = []
    for trial, size in enumerate([n, 3]):
        entries = _ledger(rng, size)
        if trial == 1:
            entries.append(
                dict(entries[0], id=99, category="a-very-long-category-name", tags=["tax", "tax"])
            )
        files = {"ledger.json": json.dumps(entries), "NOTJSON": "{nope"}
        for label, budget in _budgets(rng, entries).items():
            files[label] = json.dumps(budget)
        argvs = _argvs(rng, tier, entries)
        argvs.append(["add", "--date", "2024-05-05", "--amount", "-1.5", "--category", "x"])
        if tier == "hard":
            argvs.append(["report", "--budget", "NOTJSON"])
        trials.append({"files": files, "argvs": argvs})
    reference = {f"{pkg}/{name}": text for name, text in _reference(pkg).items()}
    runner = _RUNNER.replace("PKG", pkg)
    wants = hs.emitted(reference, runner, trials)
    labels = [
        f"trial {t}: {' '.join(argv)}" for t, trial in enumerate(trials) for argv in trial["argvs"]
    ]
    cases = [hs.Case(label, want=want) for label, want in zip(labels, wants, strict=True)]
    # the module entry point, in a real process, on the last ledger (its error path)
    ledger = trials[-1]["files"]["ledger.json"]
    status, out, err = hs.emitted(
        reference, _ENTRY.replace("PKG", pkg).replace("ARGV", repr(_ENTRY_ARGV)), ledger
    )
    entry = hs.Case(
        f"python3 -m {pkg} {' '.join(_ENTRY_ARGV)}",
        files={"l.json": ledger},
        args=_ENTRY_ARGV,
        want={"stdout": out, "files": {}, "status": status, "stderr": err},
    )
    return hs.tests(
        answer=hs.python_calls(hs.python_call(runner, trials, cpu=20)),
        cases=cases,
        compare=hs.compare("equal"),
        limits=hs.limits(timeout=60),
        timeout=200,
        also=[
            hs.part(
                answer=hs.program(
                    ["python3", "-m", pkg, "--db", "{in}/l.json"], status=True, stderr=300
                ),
                cases=[entry],
                compare=hs.compare("output"),
                limits=hs.limits(timeout=30, cpu=10),
            )
        ],
    )


def _reference(pkg: str) -> dict[str, str]:
    return {
        "__init__.py": "",
        "__main__.py": _MAIN.format(pkg=pkg),
        "money.py": _MONEY,
        "store.py": _STORE,
        "cli.py": _CLI.format(pkg=pkg),
        "commands/__init__.py": _INIT_NEW.format(pkg=pkg),
        "commands/add.py": _ADD.format(pkg=pkg),
        "commands/list_.py": _LIST.format(pkg=pkg),
        "commands/report.py": _REPORT.format(pkg=pkg),
    }
