"""sales-report-js: a Node.js monthly sales report with JavaScript's classic bugs.

The program reads a CSV of sales on standard input and prints, per month and customer, units
and net amount after discounts, customers ranked by amount. Bugs come from a pool of five:
``getUTCMonth`` read as 1-based, quantities concatenated as strings, amounts compared as
strings, a 0% discount taken as missing (``||`` instead of an emptiness test) and a default
discount applied after rounding. Difficulty knobs: the number of bugs (2 / 3 / 4), their
subtlety, and the size of the hidden inputs. The hidden test (the declarative harness's data)
runs the agent's ``main.js`` with Node as ``nobody`` on secret inputs and compares with a
Python reference's reports, made when the task is generated.
"""

from __future__ import annotations

import random
import re
import textwrap

from palaestra.tasks import outcomes
from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators._toolchains import NODE
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.debugging._kit import (
    Bug,
    bug_solutions,
    choose_bugs,
    inject,
    wrong_variants,
)

_CORRECT = """\
// Monthly sales report. Reads CSV on standard input: a header line, then
// `date,customer,qty,unit_cents,discount_pct` rows (date YYYY-MM-DD). Prints, per month
// (YYYY-MM, ascending) and customer, tab-separated: month, customer, units, net amount "D.CC".
// A row's net is qty * unit_cents less its discount, half a cent rounded up; an empty
// discount means the default DEFAULT_PCT%. Within a month customers are listed by net amount,
// largest first, ties by name. Cells are trimmed; rows that do not parse are skipped.
"use strict";
const fs = require("fs");

const DEFAULT_PCT = DEFAULT_VALUE;

function parseRow(line) {
  const cells = line.split(",").map((c) => c.trim());
  if (cells.length !== 5) return null;
  const [date, customer, qty, unit, disc] = cells;
  const d = new Date(date + "T00:00:00Z");
  if (!customer || Number.isNaN(d.getTime())) return null;
  if (!/^[0-9]+$/.test(qty) || !/^[0-9]+$/.test(unit)) return null;
  const pct = disc === "" ? DEFAULT_PCT : Number(disc);
  if (!Number.isInteger(pct) || pct < 0 || pct > 100) return null;
  const month = `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, "0")}`;
  return { month, customer, qty: Number(qty), unit: Number(unit), pct };
}

function lineNet(row) {
  return Math.floor((row.qty * row.unit * (100 - row.pct) + 50) / 100);
}

function money(cents) {
  return `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, "0")}`;
}

function report(text) {
  const months = new Map();
  for (const line of text.split("\\n").slice(1)) {
    if (!line.trim()) continue;
    const row = parseRow(line);
    if (row === null) continue;
    if (!months.has(row.month)) months.set(row.month, new Map());
    const byCustomer = months.get(row.month);
    const acc = byCustomer.get(row.customer) || { units: 0, net: 0 };
    acc.units += row.qty;
    acc.net += lineNet(row);
    byCustomer.set(row.customer, acc);
  }
  const out = [];
  for (const month of [...months.keys()].sort()) {
    const rows = [...months.get(month).entries()];
    rows.sort((a, b) => b[1].net - a[1].net || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    for (const [customer, acc] of rows) {
      out.push([month, customer, acc.units, money(acc.net)].join("\\t"));
    }
  }
  return out;
}

const lines = report(fs.readFileSync(0, "utf8"));
process.stdout.write(lines.map((l) => l + "\\n").join(""));
"""

_MAIN = "main.js"


def _bugs() -> list[Bug]:
    return [
        Bug(
            "month-zero-based",
            _MAIN,
            (("String(d.getUTCMonth() + 1)", "String(d.getUTCMonth())"),),
            (('String(d.getUTCMonth() + 1).padStart(2, "0")', "String(d.getUTCMonth() + 1)"),),
            "January's sales are reported under month 00 and December's under 11.",
        ),
        Bug(
            "units-concatenated",
            _MAIN,
            (("qty: Number(qty),", "qty,"),),
            (("qty: Number(qty),", "qty: Number(qty) || 1,"),),
            "A customer with several rows in a month gets units like 0312.",
        ),
        Bug(
            "amounts-compared-as-text",
            _MAIN,
            (
                (
                    "rows.sort((a, b) => b[1].net - a[1].net || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));",
                    "rows.sort((a, b) => (money(b[1].net) > money(a[1].net) ? 1 : -1));",
                ),
            ),
            (
                (
                    "rows.sort((a, b) => b[1].net - a[1].net || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));",
                    "rows.sort((a, b) => b[1].net - a[1].net);",
                ),
            ),
            "A customer at 95.00 is ranked above one at 1,200.00.",
        ),
        Bug(
            "zero-discount-ignored",
            _MAIN,
            (('disc === "" ? DEFAULT_PCT : Number(disc)', "Number(disc) || DEFAULT_PCT"),),
            (('disc === "" ? DEFAULT_PCT : Number(disc)', "Number(disc) ?? DEFAULT_PCT"),),
            "Rows sold at an explicit 0% discount come out discounted.",
            subtle=True,
        ),
        Bug(
            "discount-after-rounding",
            _MAIN,
            (
                (
                    "Math.floor((row.qty * row.unit * (100 - row.pct) + 50) / 100)",
                    "row.qty * Math.floor((row.unit * (100 - row.pct) + 50) / 100)",
                ),
            ),
            (
                (
                    "Math.floor((row.qty * row.unit * (100 - row.pct) + 50) / 100)",
                    "Math.round(row.qty * row.unit * (100 - row.pct) / 100 - 0.5)",
                ),
            ),
            "Net amounts drift by a few cents from the accountants' figures on larger orders.",
            subtle=True,
        ),
    ]


_NAMES = ["acme", "bolt", "cobalt", "delta", "ember", "fjord", "gale", "harbor", "iris"]
_HEADER = "date,customer,qty,unit_cents,discount_pct"


def _make_input(rng, n: int) -> str:
    """n random sales rows: some unparsable, some with blanks around cells, some ties."""
    rows = [_HEADER]
    for _ in range(n):
        year, month = rng.choice([2023, 2024]), rng.choice([1, 2, 10, 11, 12])
        date = f"{year}-{month:02d}-{rng.randint(1, 28):02d}"
        qty = str(rng.choice([0, 1, 2, 3, 7, 12, 40]))
        unit = str(rng.choice([5, 99, 333, 1250, 4999, 20001, 99999]))
        disc = rng.choice(["", "", "0", "0", "5", "15", "33", "5.5", "150"])
        row = [date, rng.choice(_NAMES), qty, unit, disc]
        r = rng.random()
        if r < 0.03:
            row[0] = "n/a"
        elif r < 0.05:
            row = row[:4]
        elif r < 0.1:
            row = [" " + c for c in row]
        rows.append(",".join(row))
        if rng.random() < 0.1:  # a tie: another customer, the same sale
            twin = list(row)
            twin[1] = (" " if twin[1].startswith(" ") else "") + rng.choice(_NAMES)
            rows.append(",".join(twin))
    return "\n".join(rows) + "\n"


def _expected(stdin: str, default: int) -> str:
    """The report the header comment describes (the reference, in Python)."""
    months: dict[str, dict[str, list[int]]] = {}
    for line in stdin.split("\n")[1:]:
        cells = [c.strip() for c in line.split(",")]
        if not line.strip() or len(cells) != 5:
            continue
        date, customer, qty, unit, disc = cells
        if not customer or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", date):
            continue
        if not re.fullmatch("[0-9]+", qty) or not re.fullmatch("[0-9]+", unit):
            continue
        if disc == "":
            pct = default
        elif re.fullmatch("[0-9]+", disc):
            pct = int(disc)
        else:
            continue
        if pct > 100:
            continue
        acc = months.setdefault(date[:7], {}).setdefault(customer, [0, 0])
        acc[0] += int(qty)
        acc[1] += (int(qty) * int(unit) * (100 - pct) + 50) // 100
    out = []
    for month in sorted(months):
        ranked = sorted(months[month].items(), key=lambda kv: (-kv[1][1], kv[0]))
        for customer, (units, net) in ranked:
            out.append(f"{month}\t{customer}\t{units}\t{net // 100}.{net % 100:02d}")
    return "\n".join(out) + "\n"


def _tests(secret: int, default: int, n_rows: int) -> dict[str, str | bytes]:
    """A tie on amount, then random inputs of growing size; the report expected, made now."""
    rng = random.Random(secret)
    first, second, third = sorted(rng.sample(_NAMES, 3))
    tie = (
        f"{_HEADER}\n2024-01-05,{third},2,500,0\n"
        f"2024-01-09,{second},1,1000,0\n2024-01-07,{first},1,20,0\n"
    )
    inputs = [("customers tied on amount", tie)]
    for k, n in enumerate([3, n_rows // 4, n_rows, n_rows]):
        inputs.append((f"input {k + 1} ({n} rows)", _make_input(rng, n)))
    cases = [
        hs.Case(label, stdin=text, want={"lines": hs.lines(_expected(text, default))})
        for label, text in inputs
    ]
    return hs.tests(
        answer=hs.program(NODE.run),
        cases=cases,
        compare=hs.compare("lines"),
        limits=hs.limits(timeout=60),
        kind="io",
        timeout=400,
    )


@family(
    "sales-report-js",
    category="debugging",
    summary="Node.js sales report with 2-4 JavaScript bugs (month index, string concat, sorting)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    default = rng.choice([5, 10, 12, 20])
    n_obvious, n_subtle = {"easy": (2, 0), "medium": (2, 1), "hard": (3, 1)}[spec.tier]
    bugs = choose_bugs(rng, _bugs(), n_obvious, n_subtle)
    correct = {_MAIN: _CORRECT.replace("DEFAULT_VALUE", str(default))}
    workspace = inject(correct, bugs)
    wrongs = wrong_variants(correct, bugs, rng)
    sample = _make_input(rng, 30)
    reports = "\n".join(f"- {b.symptom}" for b in bugs)
    if spec.tier == "hard":
        reports = "- The figures are wrong in several ways; the accountants sent no details."
    instruction = textwrap.dedent(
        """\
        # Fix the sales report

        `/app/main.js` prints our monthly sales report (`node main.js < sales.csv`; a sample
        is `/app/sample.csv`). Its header comment describes the report exactly. The
        accountants report:

        {reports}

        Find and fix every bug so the report is exactly what the header describes, for any
        input. Keep the command line and the output format; Node.js from the distribution,
        no npm packages.
        """
    ).replace("{reports}", reports)
    return GeneratedTask(
        instruction=instruction,
        workspace={**workspace, "sample.csv": sample},
        tests=_tests(rng.randrange(2**31), default, spec.iscale(40, 400)),
        **bug_solutions(correct, workspace, wrongs, note="the correct report"),
        tags=("javascript", "node", "debugging"),
        verifier_timeout_sec=420.0,
        reward_outcomes=outcomes.GRADED + outcomes.IO,
        packages=NODE.packages,
    )
