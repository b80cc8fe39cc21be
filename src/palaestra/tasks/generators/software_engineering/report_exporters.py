"""report-exporters: add output formats (and, harder, options and a plug-in registry) to a small
reporting package without breaking what it already does.

The workspace is a package ``<pkg>/`` (model, export, cli) with its own visible tests for the
existing CSV and JSON exports. The checker imports nothing from /app: it runs the package's
functions and its CLI as ``nobody`` on reports drawn from the task's secret (pipes, tabs,
newlines, backslashes, None, unicode, numbers) and compares with its own reference, including the
old formats (regressions count).

Difficulty knobs: easy adds a Markdown table; medium also a TSV format with escaping and a
``--columns`` option that selects and orders columns for every format; hard also turns the
if/elif dispatch into a registry (``register`` decorator, ``available_formats``,
``--list-formats``) with a ``--sort`` option (stable, missing values last).
"""

from __future__ import annotations

import json
import random
import textwrap

from palaestra.tasks.generators import family, solve_sh_writing
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_PKGS = ["reports", "tabular", "ledger_tools", "statkit"]
_WORDS = ["alpha", "beta", "gamma", "delta", "north", "south", "api", "db", "cache", "queue",
          "café", "naïve", "a|b", "tab\there", "two\nlines", "back\\slash", "", "x,y", '"q"']  # fmt: skip
_COLUMNS = ["region", "service", "owner", "requests", "errors", "latency_ms", "cost", "team"]

_MODEL = '''\
"""A report: a title, column names and rows (dicts from column name to a value)."""
from dataclasses import dataclass, field


@dataclass
class Report:
    title: str
    columns: list
    rows: list = field(default_factory=list)

    @classmethod
    def from_json(cls, data):
        return cls(data["title"], list(data["columns"]), [dict(r) for r in data["rows"]])
'''

_EXPORT_OLD = '''\
"""Exporters: turn a Report into text."""
import csv
import io
import json


def _csv(report):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\\n")
    writer.writerow(report.columns)
    for row in report.rows:
        writer.writerow(["" if row.get(c) is None else row.get(c) for c in report.columns])
    return out.getvalue()


def _json(report):
    rows = [{c: row.get(c) for c in report.columns} for row in report.rows]
    return json.dumps({"title": report.title, "rows": rows}, indent=2, ensure_ascii=False) + "\\n"


def export(report, fmt):
    """The report as text in format ``fmt``."""
    if fmt == "csv":
        return _csv(report)
    if fmt == "json":
        return _json(report)
    raise ValueError(f"unknown format: {fmt}")
'''

_CLI_OLD = '''\
"""python -m {pkg}.cli REPORT.json [--format csv|json]"""
import argparse
import json
import sys

from {pkg}.export import export
from {pkg}.model import Report


def main(argv=None):
    parser = argparse.ArgumentParser(prog="{pkg}")
    parser.add_argument("report")
    parser.add_argument("--format", default="csv")
    args = parser.parse_args(argv)
    with open(args.report, encoding="utf-8") as f:
        report = Report.from_json(json.load(f))
    try:
        sys.stdout.write(export(report, args.format))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

# The reference implementation of every feature; tiers use a prefix of it.
_EXPORT_NEW = '''\
"""Exporters: turn a Report into text. Formats register themselves with ``register``."""
import csv
import io
import json

_FORMATS = {}


def register(name):
    """Decorator: make ``fn(report) -> str`` the exporter of format ``name``."""
    def deco(fn):
        _FORMATS[name] = fn
        return fn
    return deco


def available_formats():
    return sorted(_FORMATS)


@register("csv")
def _csv(report):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\\n")
    writer.writerow(report.columns)
    for row in report.rows:
        writer.writerow(["" if row.get(c) is None else row.get(c) for c in report.columns])
    return out.getvalue()


@register("json")
def _json(report):
    rows = [{c: row.get(c) for c in report.columns} for row in report.rows]
    return json.dumps({"title": report.title, "rows": rows}, indent=2, ensure_ascii=False) + "\\n"


def _tsv_cell(value):
    if value is None:
        return ""
    return (str(value).replace("\\\\", "\\\\\\\\").replace("\\t", "\\\\t").replace("\\n", "\\\\n")
            .replace("\\r", "\\\\r"))


@register("tsv")
def _tsv(report):
    lines = ["\\t".join(_tsv_cell(c) for c in report.columns)]
    for row in report.rows:
        lines.append("\\t".join(_tsv_cell(row.get(c)) for c in report.columns))
    return "\\n".join(lines) + "\\n"


def _md_cell(value):
    if value is None:
        return ""
    return str(value).replace("\\\\", "\\\\\\\\").replace("|", "\\\\|").replace("\\n", "<br>")


@register("markdown")
def _markdown(report):
    lines = [f"## {report.title}", ""]
    lines.append("| " + " | ".join(_md_cell(c) for c in report.columns) + " |")
    lines.append("|" + "|".join(" --- " for _ in report.columns) + "|")
    for row in report.rows:
        lines.append("| " + " | ".join(_md_cell(row.get(c)) for c in report.columns) + " |")
    return "\\n".join(lines) + "\\n"


def export(report, fmt):
    """The report as text in format ``fmt``."""
    try:
        fn = _FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown format: {fmt}") from None
    return fn(report)
'''

_CLI_NEW = '''\
"""python -m {pkg}.cli REPORT.json [--format F] [--columns a,b] [--sort COL] [--list-formats]"""
import argparse
import json
import sys

from {pkg}.export import available_formats, export
from {pkg}.model import Report


def _sort_key(col):
    def key(row):
        value = row.get(col)
        if value is None:
            return (2, 0, "")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return (0, value, "")
        return (1, 0, str(value))
    return key


def main(argv=None):
    parser = argparse.ArgumentParser(prog="{pkg}")
    parser.add_argument("report", nargs="?")
    parser.add_argument("--format", default="csv")
    parser.add_argument("--columns")
    parser.add_argument("--sort")
    parser.add_argument("--list-formats", action="store_true")
    args = parser.parse_args(argv)
    if args.list_formats:
        print("\\n".join(available_formats()))
        return 0
    with open(args.report, encoding="utf-8") as f:
        report = Report.from_json(json.load(f))
    if args.columns is not None:
        wanted = [c for c in args.columns.split(",")]
        for c in wanted:
            if c not in report.columns:
                print(f"unknown column: {{c}}", file=sys.stderr)
                return 2
        report = Report(report.title, wanted, report.rows)
    if args.sort is not None:
        if args.sort not in report.columns:
            print(f"unknown column: {{args.sort}}", file=sys.stderr)
            return 2
        report = Report(report.title, report.columns, sorted(report.rows, key=_sort_key(args.sort)))
    try:
        sys.stdout.write(export(report, args.format))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _visible_tests(pkg: str) -> str:
    return f'''\
"""The package's own tests: run with `python3 -m unittest discover -s tests` from /app."""
import json
import unittest

from {pkg}.export import export
from {pkg}.model import Report

SAMPLE = Report("Sample", ["name", "n"], [{{"name": "a", "n": 1}}, {{"name": "b,c", "n": None}}])


class ExportTests(unittest.TestCase):
    def test_csv(self):
        self.assertEqual(export(SAMPLE, "csv"), 'name,n\\na,1\\n"b,c",\\n')

    def test_json(self):
        data = json.loads(export(SAMPLE, "json"))
        self.assertEqual(data["rows"][1], {{"name": "b,c", "n": None}})

    def test_unknown(self):
        with self.assertRaises(ValueError):
            export(SAMPLE, "xml")


if __name__ == "__main__":
    unittest.main()
'''


def _random_report(rng, n_rows: int, n_cols: int) -> dict:
    cols = rng.sample(_COLUMNS, n_cols)
    rows = []
    for _ in range(n_rows):
        row = {}
        for c in cols:
            roll = rng.random()
            if roll < 0.15:
                row[c] = None
            elif roll < 0.5:
                row[c] = rng.randrange(-50, 5000)
            elif roll < 0.6:
                row[c] = round(rng.uniform(0, 100), 2)
            else:
                row[c] = rng.choice(_WORDS) + ("" if rng.random() < 0.5 else str(rng.randrange(9)))
        rows.append(row)
    return {
        "title": rng.choice(["Weekly usage", "Incidents | Q3", "Costs", "Latency"]),
        "columns": cols,
        "rows": rows,
    }


@family(
    "report-exporters",
    category="software-engineering",
    summary="Add output formats, column/sort options and a format registry to a reporting package",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    pkg = rng.choice(_PKGS)
    tier = spec.tier
    secret = rng.randrange(2**31)
    n_rows = spec.iscale(6, 60)

    asks = [
        textwrap.dedent(
            """\
            - A `markdown` format: the line `## <title>`, an empty line, then a table: the
              header `| col1 | col2 |`, the separator `| --- | --- |` written as
              `|` + `|`.join(` --- ` per column) + `|`, and one line `| v1 | v2 |` per row.
              In cells (header included) write `None` as an empty string, other values with
              `str()`; escape a backslash as `\\\\`, a `|` as `\\|`, and write a newline as
              `<br>`. The text ends with a newline."""
        )
    ]
    if tier != "easy":
        asks.append(
            textwrap.dedent(
                """\
                - A `tsv` format: the header line, then one line per row, cells joined by a tab,
                  the text ending with a newline. `None` is an empty cell; in other values (and
                  names) escape a backslash as `\\\\`, a tab as `\\t`, a newline as `\\n` and a
                  carriage return as `\\r` (two characters each).
                - A `--columns a,b,...` option of the CLI: only these columns, in this order,
                  for every format. A name that is not a column of the report: print
                  `unknown column: <name>` to stderr and exit with status 2."""
            )
        )
    if tier == "hard":
        asks.append(
            textwrap.dedent(
                """\
                - Replace the if/elif dispatch with a registry in `export.py`: a decorator
                  `register(name)` that makes `fn(report) -> str` the exporter of format `name`
                  (registering a name again replaces it), `available_formats()` returning the
                  sorted list of names, and `export()` using the registry (unknown formats still
                  raise `ValueError("unknown format: <name>")`). All built-in formats register
                  through it. The CLI gets `--list-formats` (one name a line, sorted; no report
                  argument needed then).
                - A `--sort COL` option of the CLI: rows sorted by that column, stably;
                  numbers (ints and floats, not booleans) first in numeric order, then strings
                  in string order, then missing/`None` values last. An unknown column gets the
                  same error as for `--columns` (applied after `--columns`)."""
            )
        )
    instruction = textwrap.dedent(
        """\
        # New export options for `{pkg}`

        `/app/{pkg}/` is our small reporting package: `model.py` (the `Report`), `export.py`
        (`export(report, fmt)`, CSV and JSON today) and `cli.py`
        (`python3 -m {pkg}.cli REPORT.json --format csv`). Its tests live in `/app/tests/`
        (`cd /app && python3 -m unittest discover -s tests`). Please add:

        {asks}

        Existing behaviour must not change: the CSV and JSON output stay byte-for-byte the
        same, and unknown formats still raise `ValueError` (exit status 2 from the CLI). Only
        the standard library is available.
        """
    ).format(pkg=pkg, asks="\n".join(asks))

    workspace = {
        f"{pkg}/__init__.py": f'"""{pkg}: small reports, many formats."""\n',
        f"{pkg}/model.py": _MODEL,
        f"{pkg}/export.py": _EXPORT_OLD,
        f"{pkg}/cli.py": _CLI_OLD.format(pkg=pkg),
        "tests/test_export.py": _visible_tests(pkg),
        "examples/weekly.json": json.dumps(_random_report(rng, 4, 4), indent=2, ensure_ascii=False)
        + "\n",
    }
    right_export = _EXPORT_NEW
    right_cli = _CLI_NEW.format(pkg=pkg)
    right = {f"{pkg}/export.py": right_export, f"{pkg}/cli.py": right_cli}
    wrong = {
        # forgets to escape pipes in Markdown cells
        "markdown-no-escape": {
            f"{pkg}/export.py": right_export.replace('.replace("|", "\\\\|")', ""),
            f"{pkg}/cli.py": right_cli,
        },
        # writes None as the string "None" in Markdown
        "markdown-none-as-text": {
            f"{pkg}/export.py": right_export.replace(
                'def _md_cell(value):\n    if value is None:\n        return ""\n',
                "def _md_cell(value):\n",
            ),
            f"{pkg}/cli.py": right_cli,
        },
        # the new format works but JSON output changed (a regression)
        "json-regression": {
            f"{pkg}/export.py": right_export.replace("indent=2, ensure_ascii=False", "indent=2"),
            f"{pkg}/cli.py": right_cli,
        },
    }
    if tier != "easy":
        wrong["tsv-no-backslash-escape"] = {
            f"{pkg}/export.py": right_export.replace(
                'str(value).replace("\\\\", "\\\\\\\\").replace("\\t"', 'str(value).replace("\\t"'
            ),
            f"{pkg}/cli.py": right_cli,
        }
        wrong["columns-keep-report-order"] = {
            f"{pkg}/export.py": right_export,
            f"{pkg}/cli.py": right_cli.replace(
                "report = Report(report.title, wanted, report.rows)",
                "report = Report(report.title, [c for c in report.columns if c in wanted], report.rows)",
            ),
        }
    if tier == "hard":
        wrong["sort-none-first"] = {
            f"{pkg}/export.py": right_export,
            f"{pkg}/cli.py": right_cli.replace('return (2, 0, "")', 'return (-1, 0, "")'),
        }
        wrong["registry-unsorted"] = {
            f"{pkg}/export.py": right_export.replace(
                "return sorted(_FORMATS)", "return list(_FORMATS)"
            ),
            f"{pkg}/cli.py": right_cli,
        }

    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=_tests(pkg, tier, secret, n_rows),
        solution={
            "solve.sh": solve_sh_writing(right, note="registry-based exporters and CLI options")
        },
        wrong_solutions={
            n: {"solve.sh": solve_sh_writing(f, note=f"wrong: {n}")} for n, f in wrong.items()
        },
        tags=("python", "feature", "refactor", "cli"),
        verifier_timeout_sec=240.0,
    )


#: The package's export() over (report, format) jobs: one value a job.
_EXPORT_ALL = """from PKG.export import export
from PKG.model import Report
out = []
for rep, fmt in INPUT:
    try:
        out.append(export(Report.from_json(rep), fmt))
    except ValueError as e:
        out.append("ValueError: " + str(e))
emit(out)
"""

#: The reference's CLI run on a report (JSON text) with each argv, at generation time: its
#: exit status, stdout and the end of its stderr (the checker runs the agent's as a program).
_CLI_ALL = """import os, subprocess, sys, tempfile
report, argvs = INPUT
path = os.path.join(tempfile.mkdtemp(), "report.json")
with open(path, "w", encoding="utf-8") as f:
    f.write(report)
out = []
for argv in argvs:
    args = argv if argv == ["--list-formats"] else [path] + argv
    r = subprocess.run([sys.executable, "-m", "PKG.cli"] + args, capture_output=True,
                       encoding="utf-8", errors="replace", timeout=30)
    out.append([r.returncode, r.stdout, r.stderr.strip()[-200:]])
emit(out)
"""

#: register() adds a format and replaces a built-in one.
_PLUGIN = """from PKG.export import register, export, available_formats
from PKG.model import Report
@register("shout")
def shout(report):
    return report.title.upper() + "!"
@register("csv")
def csv2(report):
    return "replaced"
r = Report("quiet", ["a"], [])
emit([[export(r, "shout"), export(r, "csv"), available_formats()]])
"""


def _tests(pkg: str, tier: str, secret: int, n_rows: int) -> dict:
    """Reports drawn from the task's secret: export() on each in every format, (hard) the
    registry, then the CLI with its options; the reference package answers now, the agent's
    in the checker (each call in a copy of /app, the CLI as a program a run)."""
    formats = ["csv", "json", "markdown"] + (["tsv"] if tier != "easy" else [])
    rng = random.Random(secret)
    reports = [_random_report(rng, n_rows, rng.randrange(2, 6)) for _ in range(4)]
    reports.append({"title": "Empty", "columns": ["a", "b"], "rows": []})
    tricky = [{"w": w, "n": i} for i, w in enumerate(_WORDS)]
    tricky += [{"w": None, "n": None}, {"w": 1.5, "n": -3}]
    reports.append({"title": "Tricky | ünïcode", "columns": ["w", "n"], "rows": tricky})
    jobs = [[r, f] for r in reports for f in formats] + [[reports[0], "xml"]]
    cols = reports[0]["columns"]
    argvs = [["--format", f] for f in formats] + [["--format", "yaml"]]
    if tier != "easy":
        pick = list(reversed(cols))[:2]
        argvs += [["--format", f, "--columns", ",".join(pick)] for f in formats]
        argvs += [["--columns", cols[0] + ",nope"]]
    if tier == "hard":
        argvs += [["--list-formats"]]
        argvs += [["--format", f, "--sort", c] for f in ("csv", "json") for c in cols]
        argvs += [["--columns", cols[1] + "," + cols[0], "--sort", cols[0]], ["--sort", "nope"]]
    ref = {f"{pkg}/{name}": text for name, text in _reference_files(pkg).items()}
    calls, cases = [], []
    python = [("export", _EXPORT_ALL, jobs, 20)]
    python += [("plugin", _PLUGIN, None, 10)] if tier == "hard" else []
    for what, text, value, cpu in python:
        code = text.replace("PKG", pkg)
        wants = hs.emitted(ref, code, value)
        if what == "export":
            labels = [
                f"export(report {i // len(formats)}, {job[1]!r})" for i, job in enumerate(jobs)
            ]
        else:
            labels = ["register() adds and replaces formats"]
        cases += [hs.Case(label, want=w) for label, w in zip(labels, wants, strict=True)]
        calls.append(hs.python_call(code, value, cases=len(wants), cpu=cpu))
    # the CLI: a real process a run, as python3 -m PKG.cli would be; run here by the reference
    report = json.dumps(reports[0], ensure_ascii=False)
    runs = hs.emitted(ref, _CLI_ALL.replace("PKG", pkg), [report, argvs])
    cli = [
        hs.Case(
            "cli " + " ".join(argv),
            files={"report.json": report},
            args=argv if argv == ["--list-formats"] else ["{in}/report.json", *argv],
            want={"stdout": out, "files": {}, "status": status, "stderr": err},
        )
        for argv, (status, out, err) in zip(argvs, runs, strict=True)
    ]
    return hs.tests(
        answer=hs.python_calls(*calls),
        cases=cases,
        compare=hs.compare("equal"),
        limits=hs.limits(timeout=60),
        timeout=200,
        also=[
            hs.part(
                answer=hs.program(["python3", "-m", f"{pkg}.cli"], status=True, stderr=200),
                cases=cli,
                compare=hs.compare("output"),
                limits=hs.limits(timeout=30, cpu=10),
            )
        ],
    )


def _reference_files(pkg: str) -> dict[str, str]:
    return {
        "__init__.py": "",
        "model.py": _MODEL,
        "export.py": _EXPORT_NEW,
        "cli.py": _CLI_NEW.format(pkg=pkg),
    }
