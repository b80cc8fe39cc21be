"""report-string-building: a paginated text-report renderer that builds its output by naive
string concatenation.

The program renders tickets as headings plus word-wrapped descriptions with page headers. Its
writer appends to a string attribute (``self.buf += ...``, which CPython cannot do in place:
quadratic), and from medium on it also finds the current line number by counting the newlines
of everything written so far. Difficulty knobs: the number of slow spots (fixing one is not
enough on medium/hard), the report size, and the layout constants. Output must stay
byte-identical on fresh secret ticket exports; the large one runs under a CPU bar.

The reference's output is made when the task is generated (see ``_bench``): splitting and
joining ASCII text prints the same on any Python 3.
"""

from __future__ import annotations

import textwrap

from palaestra.tasks.generators import family, solve_sh_writing
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.optimization._bench import DRAWS, apply_edits, bench_tests

_PROGRAMS = ["render_report.py", "ticket_report.py", "print_backlog.py", "backlog_pdf.py"]

FAST = '''\
"""Render the ticket report.

    python3 {program} TICKETS_TSV > report.txt

Each input line is id<TAB>status<TAB>owner<TAB>description; lines with fewer than four fields
are skipped. A ticket renders as a heading "#<id> [<status>] <owner>", its description
wrapped to WIDTH columns behind a 4-space indent, and a blank line. Wrapping: words are
separated by runs of blanks and joined by one space; a word longer than the room of a whole
line is cut into pieces of exactly that room (each on its own line).

Whenever the number of lines written so far is a multiple of PAGE_LINES (so also at the
start), a page header "== page N ==" is written first; it counts as a line. The report ends
with "tickets: T, lines: L" (L counts every line before it).
"""

import sys

WIDTH = {width}
PAGE_LINES = {page_lines}
INDENT = "    "


class Writer:
    def __init__(self):
        self.parts = []
        self.lines = 0
        self.page = 0

    def line(self, text):
        if self.lines % PAGE_LINES == 0:
            self.page += 1
            self._emit(f"== page {{self.page}} ==")
        self._emit(text)

    def _emit(self, text):
        self.parts.append(text + "\\n")
        self.lines += 1

    def text(self):
        return "".join(self.parts)


def wrap(words, room):
    lines, current = [], ""
    for word in words:
        while len(word) > room:
            if current:
                lines.append(current)
                current = ""
            lines.append(word[:room])
            word = word[room:]
        if not word:
            continue
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= room:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def main(path):
    out = Writer()
    tickets = 0
    with open(path) as f:
        for raw in f:
            fields = raw.rstrip("\\n").split("\\t")
            if len(fields) < 4:
                continue
            tid, status, owner, description = fields[0], fields[1], fields[2], fields[3]
            tickets += 1
            out.line(f"#{{tid}} [{{status}}] {{owner}}")
            for text in wrap(description.split(), WIDTH - len(INDENT)):
                out.line(INDENT + text)
            out.line("")
    sys.stdout.write(out.text() + f"tickets: {{tickets}}, lines: {{out.lines}}\\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
'''

_SLOW_SPOTS = {
    "string-buffer": (
        ("        self.parts = []\n", '        self.buf = ""\n'),
        ('        self.parts.append(text + "\\n")\n', '        self.buf += text + "\\n"\n'),
        ('        return "".join(self.parts)\n', "        return self.buf\n"),
    ),
    "line-count": (
        (
            "        if self.lines % PAGE_LINES == 0:",
            '        if self.text().count("\\n") % PAGE_LINES == 0:',
        ),  # fmt: skip
    ),
}
_WRONG = {
    "wraps-one-short": (
        ("len(current) + 1 + len(word) <= room", "len(current) + 1 + len(word) < room"),
    ),  # fmt: skip
    "long-words-not-cut": (("        while len(word) > room:", "        while False:"),),
    "headers-not-counted": (
        (
            '            self._emit(f"== page {self.page} ==")\n',
            '            self.parts.append(f"== page {self.page} ==\\n")\n',
        ),
    ),
    "no-header-at-start": (
        ("if self.lines % PAGE_LINES == 0:", "if self.lines and self.lines % PAGE_LINES == 0:"),
    ),  # fmt: skip
}

_INPUTS = (
    DRAWS
    + r"""

def make_inputs(rng, n):
    # n tickets: 5% without a description, 45% with 1-11 words, 50% with 12-79; 2% of the
    # words overlong tracker links (40-159 characters), 10% of the blanks runs of 2-4;
    # 1% of the lines without the description field.
    words = ["the", "a", "login", "page", "fails", "when", "user", "clicks", "save", "after",
             "timeout", "error", "500", "on", "mobile", "safari", "cannot", "reproduce",
             "steps", "to", "expected", "actual", "invoice", "export", "is", "empty", "x"]
    owners = ["ana", "bo", "chen", "dev-team", "ops", "unassigned"]
    size, few, many = draw_below(rng, 20, n), draw_below(rng, 11, n), draw_below(rng, 68, n)
    counts = [0 if s == 0 else 1 + a if s < 10 else 12 + b for s, a, b in zip(size, few, many)]
    total = sum(counts)
    blanks = [" "] * 27 + ["  ", "   ", "    "]
    flat = flat_rows([draw_picks(rng, words, total), draw_picks(rng, blanks, total)], total)
    links = draw_rows(rng, total, [0.02])
    lengths = [40 + k for k in draw_below(rng, 120, len(links))]
    alphabet = bytes.maketrans(bytes(range(10)), b"abcdef0123")
    chars = draw_below(rng, 10, sum(lengths)).translate(alphabet).decode()
    at = 0
    for (i, _), k in zip(links, lengths):
        flat[2 * i] = "https://tracker.example/" + chars[at:at + k]
        at += k
    descs, at = [], 0
    for k in counts:
        descs.append("".join(flat[at:at + 2 * k]))
        at += 2 * k
    columns = [list(map(str, range(1000, 1000 + n))), "\t",
               draw_picks(rng, ["open", "closed", "wip", "blocked"], n), "\t",
               draw_picks(rng, owners, n), "\t", descs, "\n"]
    lines = flat_rows(columns, n)
    for i, _ in draw_rows(rng, n, [0.01]):
        set_row(lines, 8, i, "".join(lines[8 * i : 8 * i + 5]) + "\n")
    text = "".join(lines)  # each line ends in a newline
    return {"tickets.tsv": text}
"""
)


def _source(program: str, width: int, page_lines: int) -> str:
    return FAST.format(program=program, width=width, page_lines=page_lines)


@family(
    "report-string-building",
    category="optimization",
    summary="Paginated report built by quadratic string concatenation (1-2 spots) under a CPU bar",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    program = rng.choice(_PROGRAMS)
    fast = _source(program, rng.choice([48, 60, 72, 80]), rng.choice([40, 50, 60, 66]))
    spots = ["string-buffer"] + ([] if spec.tier == "easy" else ["line-count"])
    slow = apply_edits(fast, [e for s in spots for e in _SLOW_SPOTS[s]])
    big = spec.iscale(8_000, 16_000)
    secret = rng.randrange(2**31)
    wrongs = {n: apply_edits(fast, _WRONG[n], n) for n in rng.sample(sorted(_WRONG), 3)}
    if len(spots) > 1:  # fixes the buffer, still counts newlines of everything so far
        wrongs["still-counts-lines"] = apply_edits(fast, _SLOW_SPOTS["line-count"])
    else:  # joins the parts after every line: still quadratic
        wrongs["joins-every-line"] = apply_edits(
            fast,
            [
                (
                    '        self.parts.append(text + "\\n")\n',
                    '        self.parts.append(text + "\\n")\n        self.parts = ["".join(self.parts)]\n',
                )
            ],  # fmt: skip
        )
    scope: dict = {}
    exec(_INPUTS, scope)
    sample = scope["make_inputs"](rng, 60)["tickets.tsv"]
    instruction = textwrap.dedent(
        f"""\
        # Speed up the ticket report

        `/app/{program}` renders our backlog as a paginated text report
        (`python3 /app/{program} tickets.tsv > report.txt`; a small export is in
        `/app/tickets.tsv`; the docstring describes the layout). With the full backlog it
        takes minutes.

        Make it fast: for an export of {big:,} tickets it must finish within 2 seconds of
        CPU time (it will be measured on such an export). The report must stay
        **byte-for-byte identical** to what the current program prints, for every export.
        Keep the command line; only the standard library is available.
        """
    )
    return GeneratedTask(
        instruction=instruction,
        workspace={program: slow, "tickets.tsv": sample},
        tests={
            **bench_tests(
                reference=fast,
                program=program,
                inputs_code=_INPUTS,
                args=["tickets.tsv"],
                secret=secret,
                small_sizes=[0, 5, 120],
                big_size=big,
                cpu_bar=2,
            ),
        },
        solution={"solve.sh": solve_sh_writing({program: fast}, note="list of parts, joined once")},
        wrong_solutions={
            name: {"solve.sh": solve_sh_writing({program: src}, note=f"wrong: {name}")}
            for name, src in wrongs.items()
        },
        tags=("python", "optimization", "strings"),
        verifier_timeout_sec=240.0,
    )
