"""log-query-cli: a log-query command-line tool (merge files, filter by level, time window and
text, count, group, tail, exit status) that misbehaves.

Bugs come from a pool of eight: level threshold, reading only the first file, case-insensitive
search, exit status, the end of the time window, the order of records with equal timestamps,
``--tail 0`` and the order of ``--by`` groups. Difficulty knobs: the number of bugs (2 / 3 / 4),
their subtlety (hard draws mostly the ones that only show on ties and boundaries) and how much
the issue tracker reveals. The hidden test runs a few dozen command lines over fresh secret log
files against the agent's tool and the correct one and compares exit status, stdout and stderr.
"""

from __future__ import annotations

import textwrap

from palaestra.tasks import outcomes
from palaestra.tasks.generators import family, python_test_sh, solve_sh_writing
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.debugging._kit import (
    HIDDEN_PRELUDE,
    Bug,
    changed,
    choose_bugs,
    inject,
    reference_json,
    wrong_variants,
)

_TOOLS = ["logq", "logsift", "grepl", "tailor", "logscope"]
_COMPONENTS = ["api", "db", "auth", "cache", "worker", "billing", "mailer", "search", "gateway"]
_WORDS = ["timeout", "retry", "connection", "quota", "disk", "token", "replica", "latency"]


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
    workspace["logs/app.log"] = _sample_log(rng, comps, rng.randrange(30, 60))
    workspace["logs/worker.log"] = _sample_log(rng, comps, rng.randrange(20, 40))
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
        tests={
            "test.sh": python_test_sh(timeout=100),
            "reference.json": reference_json(correct),
            "test_hidden.py": _hidden(
                tool, rng.sample(_COMPONENTS, 5), secret, spec.iscale(60, 400)
            ),
        },
        solution={
            "solve.sh": solve_sh_writing(changed(correct, workspace), note="the correct tool")
        },
        wrong_solutions={
            name: {"solve.sh": solve_sh_writing(changed(files, workspace), note=f"wrong: {name}")}
            for name, files in wrongs.items()
        },
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


_LOG_CODE = r'''
def log_lines(rng, comps, n, start):
    """n random records from `start` (seconds), with equal timestamps, odd lines and blanks."""
    levels = ["DEBUG", "INFO", "INFO", "INFO", "WARNING", "ERROR", "CRITICAL"]
    t, lines = start, []
    for _ in range(n):
        t += rng.choice([0, 0, 1, 1, 2, 5])
        word = rng.choice(WORDS)
        word = rng.choice([word, word.upper(), word.capitalize()])
        msg = rng.choice(["{} on shard {}", "{} after {} ms", "user {1} hit {0}", "{} ok ({})"])
        lines.append("2024-05-{:02d}T{:02d}:{:02d}:{:02d} {} {}: {}".format(
            1 + t // 86400, t // 3600 % 24, t // 60 % 60, t % 60, rng.choice(levels),
            rng.choice(comps), msg.format(word, rng.randrange(1000))))
        r = rng.random()
        if r < 0.04:
            lines.append("")
        elif r < 0.07:
            lines.append(rng.choice(["Traceback (most recent call last):", "  at line 3",
                                     "2024-05-01 TRACE x: y"]))
    return lines
'''


def _sample_log(rng, comps: list[str], n: int) -> str:
    scope: dict = {"WORDS": _WORDS}
    exec(_LOG_CODE, scope)
    return "\n".join(scope["log_lines"](rng, comps, n, 3600 * 9)) + "\n"


def _hidden(tool: str, comps: list[str], secret: int, n: int) -> str:
    return (
        HIDDEN_PRELUDE
        + f"WORDS = {_WORDS!r}\n"
        + _LOG_CODE
        + f"""
TOOL, COMPS, SECRET, N = {tool!r}, {comps!r}, {secret}, {n}
rng = random.Random(SECRET)
DRIVER = '''
import contextlib, io
from {tool}.cli import main
out = []
for argv in INPUT:
    o, e = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
            code = main(argv)
    except SystemExit as ex:
        code = ex.code if isinstance(ex.code, int) or ex.code is None else 1
    except Exception as ex:
        code = "raised " + type(ex).__name__
    out.append([code, o.getvalue(), e.getvalue()[-400:]])
emit(out)
'''

work = copy_tree_for_child(tempfile.mkdtemp(prefix="logs-"), prefix="logs-")
files = []
texts = [log_lines(rng, COMPS, N, 3600 * 8 + rng.randrange(600)) for _ in range(3)]
# equal timestamps across files, in the opposite order of their components
tie = [l for l in texts[0] if l[:4] == "2024"][N // 2][:19]
texts[0].append(tie + " INFO zz-last: tie in the first file")
texts[1].append(tie + " INFO aa-first: tie in the second file")
texts[0].sort(key=lambda l: l[:19] if l[:4] == "2024" else "")
texts[1].sort(key=lambda l: l[:19] if l[:4] == "2024" else "")
texts.append(["2024-05-01T00:00:0{{}} {{}} {{}}: x".format(i, lvl, c) for i, (lvl, c) in
              enumerate([("ERROR", "zeta"), ("ERROR", "zeta"), ("INFO", "alpha"),
                         ("INFO", "alpha"), ("DEBUG", "mid")])])
for k, lines in enumerate(texts):
    path = os.path.join(work, "part{{}}.log".format(k))
    with open(path, "w") as f:
        f.write("\\n".join(lines) + "\\n")
    os.chown(path, 65534, 65534)
    files.append(path)
stamps = sorted(l[:19] for t in texts[:3] for l in t if l[:4] == "2024")
some = lambda: rng.choice(stamps)
word = rng.choice(WORDS)
argvs = [
    files[:1], files[:3], [files[3], "--by", "component"], [files[3], "--by", "level"],
    files[:3] + ["--by", "component"], files[:3] + ["--by", "level", "--level", "info"],
    files[:3] + ["--level", "warning"], files[:3] + ["--level", "ERROR", "--count"],
    files[:3] + ["--level", rng.choice(["Info", "critical", "WARNING"])],
    files[:3] + ["--grep", word.capitalize()], files[:3] + ["--grep", word.upper()[:4], "-i"],
    files[:3] + ["--grep", "".join(rng.choice([c.upper(), c]) for c in word), "-i", "--count"],
    files[:3] + ["--grep", "no-such-text-" + str(rng.randrange(99))],
    files[:3] + ["--grep", "no-such-text", "--count"],
    files[:3] + ["--until", stamps[0]], files[:3] + ["--tail", "0"],
    files[:3] + ["--tail", str(rng.randrange(1, 9))], files[:1] + ["--tail", "3", "--level", "warning"],
    files[:3] + ["--until", some()], files[:3] + ["--since", some()],
    files[:3] + ["--since", tie, "--until", tie], [files[1], files[0], "--since", tie],
    files[:3] + ["--count", "--by", "level"],
]
for _ in range(8):
    a, b = sorted([some(), some()])
    argvs.append(files[:3] + ["--since", a, "--until", b, "--count"])
    argvs.append(rng.sample(files[:3], rng.randrange(1, 4)) + ["--since", a, "--until", b])

ck = Checker(kind="io")
ck.compile_python(os.path.join("/app", TOOL))
ref = reference_dir()
want = run_python(DRIVER, argvs, cwd=ref, timeout=60)
got = run_python(DRIVER, argvs, cwd="/app", timeout=60)
if not want.ok:
    raise SystemExit("reference failed: " + want.error)
if not got.ok:
    ck.error("main(argv) runs", got.error)
else:
    for k, argv in enumerate(argvs):
        w = want.value[k]
        g = got.value[k] if k < len(got.value) else None
        label = " ".join(os.path.basename(a) for a in argv)
        ck.check("{{}}: {{}}".format(k, label), g == w, "expected {{}}, got {{}}".format(short(w), short(g)))
for argv in (files[:3] + ["--level", "error"], files[:3] + ["--grep", "no-such-text"]):
    w = run_command(["python3", "-B", "-m", TOOL] + argv, cwd=ref)
    g = run_command(["python3", "-B", "-m", TOOL] + argv, cwd="/app")
    label = "python3 -m {{}} {{}}".format(TOOL, " ".join(argv[3:]))
    if g.timed_out or "Traceback (most recent call last)" in g.stderr:  # it crashed
        ck.error(label, g.error or g.stderr[-300:])
        continue
    ck.check(label, (g.returncode, g.stdout) == (w.returncode, w.stdout),
             "expected exit {{}}, got exit {{}}".format(w.returncode, g.returncode))
ck.finish()
"""
    )
