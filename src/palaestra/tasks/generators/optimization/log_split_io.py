"""log-split-io: an access-log splitter with wasteful I/O: it re-reads the input from the top
for every line, reopens an output file per line, and (from medium on) re-reads an output
file to find its last line.

The program routes each access-log line to ``OUT_DIR/<date>.log`` (or ``unparsed.log``),
drops a line equal to the previous line of the same output file, and prints a summary.
Difficulty knobs: the number of I/O slow spots (fixing only the input side stays quadratic on
medium/hard) and the log size. Output files and summary must stay byte-identical on fresh
secret logs (CRLF lines, no final newline, interleaved duplicates, unparsable lines); the
large log runs under a CPU bar.

The reference's output is made when the task is generated (see ``_bench``): an ASCII regex,
line endings and sorted names give the same files on any Python 3.
"""

from __future__ import annotations

import textwrap

from palaestra.tasks import outcomes
from palaestra.tasks.generators import family, solve_sh_writing
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.optimization._bench import DRAWS, apply_edits, bench_tests

_PROGRAMS = ["split_logs.py", "logsplit.py", "daily_logs.py", "route_access_log.py"]

FAST = '''\
"""Split an access log into one file per day.

    python3 {program} ACCESS_LOG OUT_DIR

Each line goes to OUT_DIR/<YYYY-MM-DD>.log after the date of its "[12/Mar/2024:10:15:32"
timestamp, or to OUT_DIR/unparsed.log when it has none. Lines are written without their
"\\n" or "\\r\\n" ending, plus "\\n" (also the last line, even if the log does not end with a
newline). A line equal to the previous line written to the same file is dropped. Files are
created fresh. Prints one line per output file, sorted by name: name, lines written, lines
dropped (tab-separated), then "total" with the number of input lines.
"""

import os
import re
import sys

_STAMP = re.compile(r"\\[(\\d\\d)/([A-Z][a-z]{{2}})/(\\d{{4}}):")
_MONTHS = {{m: i for i, m in enumerate(
    "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), start=1)}}


def file_for(line):
    m = _STAMP.search(line)
    if not m or m.group(2) not in _MONTHS:
        return "unparsed.log"
    return f"{{m.group(3)}}-{{_MONTHS[m.group(2)]:02d}}-{{m.group(1)}}.log"


def strip_ending(raw):
    if raw.endswith("\\n"):
        raw = raw[:-1]
    if raw.endswith("\\r"):
        raw = raw[:-1]
    return raw


def read_lines(path):
    """The file's lines, endings included."""
    with open(path, newline="") as f:
        yield from f


def main(src, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    handles, last, written, dropped = {{}}, {{}}, {{}}, {{}}
    total = 0
    try:
        for raw in read_lines(src):
            total += 1
            line = strip_ending(raw)
            name = file_for(line)
            if name in handles and last[name] == line:
                dropped[name] += 1
                continue
            if name not in handles:
                handles[name] = open(os.path.join(out_dir, name), "w")
                written[name], dropped[name] = 0, 0
            handles[name].write(line + "\\n")
            last[name] = line
            written[name] += 1
    finally:
        for handle in handles.values():
            handle.close()
    for name in sorted(written):
        print(f"{{name}}\\t{{written[name]}}\\t{{dropped[name]}}")
    print(f"total\\t{{total}}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
'''

# the slow program: the same behaviour through wasteful I/O
_READ_SLOW = (
    '    with open(path, newline="") as f:\n        yield from f\n',
    "    for index in range(count_lines(path)):\n        yield get_line(path, index)\n",
)
_HELPERS = (
    "def read_lines(path):\n",
    """\
def count_lines(path):
    with open(path, newline="") as f:
        return sum(1 for _ in f)


def get_line(path, index):
    with open(path, newline="") as f:
        for i, raw in enumerate(f):
            if i == index:
                return raw
    return ""


def last_line(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        lines = f.read().splitlines()
    return lines[-1] if lines else None


def read_lines(path):
""",
)
_WRITE_SLOW = (
    (
        """\
            if name not in handles:
                handles[name] = open(os.path.join(out_dir, name), "w")
                written[name], dropped[name] = 0, 0
            handles[name].write(line + "\\n")
""",
        """\
            if name not in handles:
                handles[name] = None
                written[name], dropped[name] = 0, 0
            mode = "a" if written[name] else "w"
            with open(os.path.join(out_dir, name), mode) as out:
                out.write(line + "\\n")
""",
    ),
    ("        for handle in handles.values():\n            handle.close()\n", "        pass\n"),
)
_LAST_SLOW = (
    "if name in handles and last[name] == line:",
    "if name in handles and last_line(os.path.join(out_dir, name)) == line:",
)

_WRONG = {
    "crlf-kept": (('    if raw.endswith("\\r"):\n        raw = raw[:-1]\n', ""),),
    "last-line-unterminated": (
        (
            'handles[name].write(line + "\\n")',
            'handles[name].write(line + ("\\n" if raw.endswith("\\n") else ""))',
        ),  # fmt: skip
    ),
    "dedupe-across-files": (
        ("if name in handles and last[name] == line:", "if last.get('any') == line:"),
        ("            last[name] = line\n", "            last[name] = last['any'] = line\n"),
    ),
    "unparsed-dropped": (
        (
            "            name = file_for(line)\n",
            "            name = file_for(line)\n"
            '            if name == "unparsed.log":\n                continue\n',
        ),  # fmt: skip
    ),
}

_INPUTS = (
    DRAWS
    + r"""

def make_inputs(rng, n):
    # n access-log lines over a few days: CRLF endings (5%), no final newline, duplicates of
    # a file's previous line (4% that of the day's last good line, also with other days'
    # lines in between, 2% the line before), unparsable lines (2%).
    days = []
    k = 3 + draw_below(rng, 5, 1)[0]
    while len(days) < k:
        days = list(dict.fromkeys(days + [1 + d for d in draw_below(rng, 28, k)]))
    days = sorted(days[:k])
    month = draw_picks(rng, "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)[0]
    paths = ["/", "/login", "/api/items", "/static/app.js", "/cart", "/search?q=x"]
    day = draw_below(rng, len(days), n)
    good = list(map("".join, zip(
        draw_picks(rng, ["10.0.%d." % a for a in range(256)], n),
        draw_picks(rng, ["%d - - [" % b for b in range(256)], n),
        map(["%02d/%s/2024:" % (d, month) for d in days].__getitem__, day),
        draw_picks(rng, ["%02d:" % h for h in range(24)], n),
        draw_picks(rng, ["%02d:" % m for m in range(60)], n),
        draw_picks(rng, ['%02d +0000] "GET ' % s for s in range(60)], n),
        draw_picks(rng, ['%s HTTP/1.1" ' % p for p in paths], n),
        draw_picks(rng, ["200 ", "200 ", "200 ", "304 ", "404 ", "500 "], n),
        map(str, map((100).__add__, draw_below(rng, 89900, n))),
    )))
    lines, odd = good[:], set()
    junk = ["-", "GET / HTTP/1.1", "[xx/Foo/2024:00:00:00] broken", ""]
    hits = draw_rows(rng, n, [0.04, 0.02, 0.02])
    for (i, kind), pick in zip(hits, draw_below(rng, 4, len(hits))):
        j = i - 1  # the day's last good line
        while kind == 0 and j >= 0 and (j in odd or day[j] != day[i]):
            j -= 1
        if kind == 0 and j >= 0:
            lines[i] = good[j]
        elif kind <= 1 and i > 0:
            lines[i] = lines[i - 1]
        else:
            lines[i] = junk[pick]
        odd.add(i)
    crlf = [i for i, _ in draw_rows(rng, n, [0.05])]
    for i in crlf:
        lines[i] += "\r"
    stamped = (x.rstrip("\r") for x in lines if "/2024:" in x and "Foo" not in x)
    first = next(stamped, None)
    day_of = lambda x: x.split("[", 1)[1][:2]
    other = first and next((x for x in stamped if day_of(x) != day_of(first)), None)
    if other:  # the same line twice for one day with another day's line in between
        lines += [first, other, first]
    if n:  # a last line that is surely written, without a final newline
        lines.append('10.9.9.9 - - [{:02d}/{}/2024:23:59:59 +0000] "GET /last HTTP/1.1" 200 1'.format(days[0], month))
    return {"access.log": "\n".join(lines)}
"""
)


@family(
    "log-split-io",
    category="optimization",
    summary="Access-log splitter with quadratic re-reading and per-line reopening (1-2 spots)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    program = rng.choice(_PROGRAMS)
    fast = FAST.format(program=program)
    base_slow = [_HELPERS, _READ_SLOW, *_WRITE_SLOW]
    slow_edits = base_slow + ([] if spec.tier == "easy" else [_LAST_SLOW])
    slow = apply_edits(fast, slow_edits, "slow")
    big = spec.iscale(30_000, 60_000)
    secret = rng.randrange(2**31)
    wrongs = {n: apply_edits(fast, _WRONG[n], n) for n in rng.sample(sorted(_WRONG), 3)}
    if spec.tier == "easy":  # reads the input once per line through readlines(): quadratic
        wrongs["readlines-per-line"] = apply_edits(
            fast,
            [
                _HELPERS,
                (
                    _READ_SLOW[0],
                    "    for index in range(count_lines(path)):\n"
                    '        with open(path, newline="") as f:\n            yield f.readlines()[index]\n',
                ),
            ],  # fmt: skip
        )
    else:  # streams the input, still re-reads each output file for its last line
        wrongs["rereads-output-files"] = apply_edits(fast, [_HELPERS, *_WRITE_SLOW, _LAST_SLOW])
    scope: dict = {}
    exec(_INPUTS, scope)
    sample = scope["make_inputs"](rng, 200)["access.log"]
    instruction = textwrap.dedent(
        f"""\
        # Make the log splitter fast

        `/app/{program}` splits an access log into one file per day
        (`python3 /app/{program} access.log out/`; a small log is `/app/access.log`; the
        docstring describes the exact behaviour). On a day's production log it takes hours.

        Make it fast: on a log of {big:,} lines it must finish within 2 seconds of CPU time
        (it will be measured on such a log). The files it writes and what it prints must stay
        **byte-for-byte identical** to what the current program produces, for every log.
        Keep the command line; only the standard library is available.
        """
    )
    return GeneratedTask(
        instruction=instruction,
        workspace={program: slow, "access.log": sample},
        tests={
            **bench_tests(
                reference=fast,
                program=program,
                inputs_code=_INPUTS,
                args=["access.log", "OUT"],
                secret=secret,
                small_sizes=[0, 9, 300],
                big_size=big,
                cpu_bar=2,
                out_dir=True,
            ),
        },
        solution={"solve.sh": solve_sh_writing({program: fast}, note="one pass, files kept open")},
        wrong_solutions={
            name: {"solve.sh": solve_sh_writing({program: src}, note=f"wrong: {name}")}
            for name, src in wrongs.items()
        },
        tags=("python", "optimization", "io", "logs"),
        reward_outcomes=outcomes.GRADED + outcomes.IO,
        verifier_timeout_sec=240.0,
    )
