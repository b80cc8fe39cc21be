"""log-query-cli: a log-query command-line tool (merge files, filter by level, time window and
text, count, group, tail, exit status) that misbehaves.

Bugs come from a pool of eight: level threshold, reading only the first file, case-insensitive
search, exit status, the end of the time window, the order of records with equal timestamps,
``--tail 0`` and the order of ``--by`` groups. Difficulty knobs: the number of bugs (2 / 3 / 4),
their subtlety (hard draws mostly the ones that only show on ties and boundaries) and how much
the issue tracker reveals. The hidden test runs a few dozen command lines over secret log
files with the agent's tool and compares exit status, stdout and stderr with the correct tool's,
computed when the task is generated, as the declarative harness's data (``_log_query_check``).
"""

from __future__ import annotations

import textwrap

from palaestra.tasks import outcomes
from palaestra.tasks.generators import family
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.debugging._kit import (
    Bug,
    bug_solutions,
    choose_bugs,
    inject,
    wrong_variants,
)
from palaestra.tasks.generators.debugging._log_query_check import log_tests, sample_log

_TOOLS = ["logq", "logsift", "grepl", "tailor", "logscope"]
_COMPONENTS = ["api", "db", "auth", "cache", "worker", "billing", "mailer", "search", "gateway"]


def _sources(tool: str) -> dict[str, str]:
    return {
        f"{tool}/__init__.py": f'"""{tool}: query log files."""\n',
        f"{tool}/records.py": textwrap.dedent(
            '''\
            """Log records: "2024-03-01T12:00:05 LEVEL component: message"."""

            import re
            from dataclasses import dataclass

            LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
            _LINE = re.compile(
                r"(\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d) (DEBUG|INFO|WARNING|ERROR|CRITICAL) "
                r"([\\w.-]+): (.*)"
            )


            @dataclass
            class Record:
                ts: str
                level: str
                component: str
                message: str
                line: str


            def parse_line(line):
                """A Record, or None when the line is not a log record."""
                m = _LINE.fullmatch(line.rstrip("\\n"))
                if not m:
                    return None
                return Record(*m.groups(), line=line.rstrip("\\n"))


            def read_files(paths):
                """(records, malformed) over all files, merged in timestamp order.

                Records with the same timestamp keep the order of their files on the command
                line, then their order in the file. Blank lines are ignored; any other line
                that is not a record counts as malformed."""
                records, malformed = [], 0
                for path in paths:
                    with open(path) as f:
                        for line in f:
                            if not line.strip():
                                continue
                            record = parse_line(line)
                            if record is None:
                                malformed += 1
                            else:
                                records.append(record)
                records.sort(key=lambda r: r.ts)
                return records, malformed
            '''
        ),
        f"{tool}/filters.py": textwrap.dedent(
            '''\
            """Record filters."""

            from .records import LEVELS


            def level_at_least(record, level):
                """True when the record is at `level` or more severe (names ignore case)."""
                return LEVELS.index(record.level) >= LEVELS.index(level.upper())


            def in_window(record, since=None, until=None):
                """The time window: `since` inclusive, `until` exclusive (ISO timestamps)."""
                if since is not None and record.ts < since:
                    return False
                if until is not None and record.ts >= until:
                    return False
                return True


            def matches(record, pattern, ignore_case=False):
                """Fixed-string (not regex) search of the message."""
                if ignore_case:
                    return pattern.lower() in record.message.lower()
                return pattern in record.message
            '''
        ),
        f"{tool}/cli.py": textwrap.dedent(
            f'''\
            """The command line: python3 -m {tool} FILE... [options]."""

            import argparse
            import sys
            from collections import Counter

            from .filters import in_window, level_at_least, matches
            from .records import read_files


            def build_parser():
                p = argparse.ArgumentParser(prog="{tool}", description="Query log files.")
                p.add_argument("files", nargs="+", help="log files, merged by timestamp")
                p.add_argument("--level", default="DEBUG", help="minimum level (any case)")
                p.add_argument("--since", help="first timestamp to include")
                p.add_argument("--until", help="first timestamp to exclude")
                p.add_argument("--grep", help="fixed string the message must contain")
                p.add_argument("-i", "--ignore-case", action="store_true")
                p.add_argument("--tail", type=int, help="only the last N matching records")
                out = p.add_mutually_exclusive_group()
                out.add_argument("--count", action="store_true", help="print the number only")
                out.add_argument("--by", choices=["level", "component"],
                                 help="print KEY<TAB>COUNT, most frequent first, ties by key")
                return p


            def main(argv=None):
                """Run the tool; the return value is the exit status: 0 when at least one
                record matched, 1 when none did (argparse exits 2 on usage errors)."""
                args = build_parser().parse_args(argv)
                records, malformed = read_files(args.files)
                picked = [
                    r for r in records
                    if level_at_least(r, args.level)
                    and in_window(r, args.since, args.until)
                    and (args.grep is None or matches(r, args.grep, args.ignore_case))
                ]
                if args.tail is not None:
                    picked = picked[max(0, len(picked) - args.tail):]
                if malformed:
                    print(f"skipped {{malformed}} malformed line(s)", file=sys.stderr)
                if args.count:
                    print(len(picked))
                elif args.by:
                    counts = Counter(getattr(r, args.by) for r in picked)
                    for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
                        print(f"{{key}}\\t{{n}}")
                else:
                    for r in picked:
                        print(r.line)
                return 0 if picked else 1
            '''
        ),
        f"{tool}/__main__.py": "import sys\n\nfrom .cli import main\n\nsys.exit(main())\n",
    }


def _bugs(tool: str) -> list[Bug]:
    r, f, c = f"{tool}/records.py", f"{tool}/filters.py", f"{tool}/cli.py"
    return [
        Bug(
            "level-threshold",
            f,
            (("LEVELS.index(record.level) >= ", "LEVELS.index(record.level) > "),),
            (("LEVELS.index(level.upper())", "LEVELS.index(level)"),),
            "`--level WARNING` hides the warnings themselves.",
            "    def test_level_includes_itself(self):\n"
            "        code, out = run(['--level', 'warning', '--count'])\n"
            "        self.assertEqual(out.strip(), '4')\n",
        ),
        Bug(
            "first-file-only",
            r,
            (("for path in paths:", "for path in paths[:1]:"),),
            (("    records.sort(key=lambda r: r.ts)\n", ""),),
            "With several files, only the first one is searched.",
            "    def test_all_files(self):\n"
            "        code, out = run(['--count'], both=True)\n"
            "        self.assertEqual(out.strip(), '6')\n",
        ),
        Bug(
            "ignore-case",
            f,
            (("pattern.lower() in record.message.lower()", "pattern.lower() in record.message"),),
            (("pattern.lower() in record.message.lower()", "pattern in record.message.lower()"),),
            "`-i` does not find messages that have capitals.",
            "    def test_ignore_case(self):\n"
            "        code, out = run(['--grep', 'TimeOut', '-i', '--count'])\n"
            "        self.assertEqual(out.strip(), '2')\n",
        ),
        Bug(
            "exit-status",
            c,
            (("return 0 if picked else 1", "return 0"),),
            (("return 0 if picked else 1", "return 0 if records else 1"),),
            "Our alerting script never fires: the tool exits 0 even when nothing matched.",
            "    def test_exit_status(self):\n"
            "        code, out = run(['--grep', 'no-such-text'])\n"
            "        self.assertEqual(code, 1)\n",
        ),
        Bug(
            "until-boundary",
            f,
            (("record.ts >= until", "record.ts > until"),),
            (("record.ts < since", "record.ts <= since"),),
            "`--since A --until B` and `--since B` together show some records twice.",
            "    def test_until_excludes(self):\n"
            "        code, out = run(['--until', '2024-05-01T10:00:02', '--count'])\n"
            "        self.assertEqual(out.strip(), '2')\n",
            subtle=True,
        ),
        Bug(
            "tie-order",
            r,
            (
                (
                    "records.sort(key=lambda r: r.ts)",
                    "records.sort(key=lambda r: (r.ts, r.component))",
                ),
            ),  # fmt: skip
            (
                (
                    "records.sort(key=lambda r: r.ts)",
                    "records.sort(key=lambda r: r.ts, reverse=True)\n    records.reverse()",
                ),
            ),
            "Records logged in the same second come out in a different order than in the files.",
            "    def test_tie_order(self):\n"
            "        code, out = run([], both=True)\n"
            "        lines = out.splitlines()\n"
            "        self.assertLess(lines.index(A_TIE), lines.index(B_TIE))\n",
            subtle=True,
        ),
        Bug(
            "tail-zero",
            c,
            (("picked[max(0, len(picked) - args.tail):]", "picked[-args.tail:]"),),
            (
                (
                    "picked[max(0, len(picked) - args.tail):]",
                    "picked[max(0, len(picked) - args.tail - 1):]",
                ),
            ),
            "`--tail 0` prints everything.",
            "    def test_tail_zero(self):\n"
            "        code, out = run(['--tail', '0'])\n"
            "        self.assertEqual(out, '')\n",
            subtle=True,
        ),
        Bug(
            "group-order",
            c,
            (
                (
                    "key=lambda kv: (-kv[1], kv[0]))",
                    "key=lambda kv: (kv[1], kv[0]), reverse=True)",
                ),
            ),
            (("key=lambda kv: (-kv[1], kv[0]))", "key=lambda kv: -kv[1])"),),
            "`--by` lists groups with the same count in reverse alphabetical order.",
            "    def test_by_ties(self):\n"
            "        code, out = run(['--by', 'level'])\n"
            "        self.assertEqual(out.splitlines()[:2], ['ERROR\\t2', 'WARNING\\t2'])\n",
            subtle=True,
        ),
    ]


_VISIBLE_A = [
    "2024-05-01T10:00:00 INFO web: started",
    "2024-05-01T10:00:01 WARNING web: Timeout talking to db",
    "2024-05-01T10:00:02 ERROR web: request failed",
    "2024-05-01T10:00:02 WARNING zeta: slow disk",
    "",
    "garbage line",
    "2024-05-01T10:00:03 ERROR web: timeout again",
]
_VISIBLE_B = ["2024-05-01T10:00:02 INFO alpha: tick"]


@family(
    "log-query-cli",
    category="debugging",
    summary="Misbehaving log-query CLI (filters, merge order, exit codes) with 2-4 injected bugs",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    tool = rng.choice(_TOOLS)
    correct = _sources(tool)
    n_obvious, n_subtle = {"easy": (2, 0), "medium": (2, 1), "hard": (1, 3)}[spec.tier]
    bugs = choose_bugs(rng, _bugs(tool), n_obvious, n_subtle)
    shown_n = {"easy": len(bugs), "medium": len(bugs) - 1, "hard": 2}[spec.tier]
    shown = sorted(rng.sample(bugs, shown_n), key=bugs.index)
    workspace = inject(correct, bugs)
    comps = rng.sample(_COMPONENTS, 4)
    workspace["logs/app.log"] = sample_log(rng, comps, rng.randrange(30, 60))
    workspace["logs/worker.log"] = sample_log(rng, comps, rng.randrange(20, 40))
    workspace["ISSUES.md"] = "# Open issues\n\n" + "\n".join(
        f"{k}. {b.symptom}" for k, b in enumerate(shown, start=1)
    )
    workspace["tests/test_cli.py"] = _visible_tests(tool, shown)
    secret = rng.randrange(2**31)
    instruction = textwrap.dedent(
        f"""\
        # Fix the `{tool}` command-line tool

        `/app/{tool}/` is our log query tool (`cd /app && python3 -m {tool} --help`; try it on
        `logs/*.log`). Its users filed the issues in `/app/ISSUES.md`, and
        `cd /app && python3 -m unittest discover -s tests` fails.

        Fix the tool so it behaves as its help text and docstrings say, for any log files
        and any combination of options{
            "" if spec.tier == "easy" else " (the issue list may not be complete)"
        }. Keep the
        command-line interface, the output formats, the exit statuses and the function
        `main(argv)` in `{tool}/cli.py` as they are. Only the standard library is available.
        """
    )
    wrongs = wrong_variants(correct, bugs, rng)
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=log_tests(tool, correct, rng.sample(_COMPONENTS, 5), secret, spec.iscale(60, 400)),
        **bug_solutions(correct, workspace, wrongs, note="the correct tool"),
        tags=("python", "debugging", "cli"),
        reward_outcomes=outcomes.GRADED + outcomes.IO,
    )


def _visible_tests(tool: str, shown: list[Bug]) -> str:
    body = "\n".join(b.visible_test for b in shown)
    return (
        textwrap.dedent(
            f"""\
        import contextlib
        import io
        import os
        import tempfile
        import unittest

        from {tool}.cli import main

        A = {_VISIBLE_A!r}
        B = {_VISIBLE_B!r}
        A_TIE, B_TIE = A[3], B[0]


        def run(args, both=False):
            tmp = tempfile.mkdtemp()
            paths = []
            for name, lines in (("a.log", A), ("b.log", B))[: 2 if both else 1]:
                paths.append(os.path.join(tmp, name))
                with open(paths[-1], "w") as f:
                    f.write("\\n".join(lines) + "\\n")
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(paths + args)
            return code, out.getvalue()


        class CliTests(unittest.TestCase):
        """
        )
        + body
        + '\n\nif __name__ == "__main__":\n    unittest.main()\n'
    )
