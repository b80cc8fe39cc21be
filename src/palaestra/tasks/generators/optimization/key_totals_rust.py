"""key-totals-rust: a Rust report that finds each key's running entry by a linear scan of all
keys seen so far (quadratic), to be made fast under a CPU-time bar.

The program reads ``key,tag,amount`` lines and prints one line per key in first-seen order: the
count and total of its amounts; from medium on also the largest amount, on hard also the number
of distinct tags. Malformed lines are skipped and cells are trimmed. Difficulty knobs: the input
size and the columns. The hidden test (``harness_spec``) builds the agent's ``main.rs`` with
``rustc -O`` as ``nobody`` and checks its output against what a Python reference printed, at
generation time, on fresh secret inputs (edge cases without a bar, one large input under it,
made again in the checker from its seed).
"""

from __future__ import annotations

import random
import textwrap

from palaestra.tasks import outcomes
from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators._toolchains import RUST
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.optimization._bench import apply_edits

_WHAT = [("account", "channel"), ("sku", "store"), ("host", "service"), ("player", "level")]

_SLOW = """\
// Totals per {key}: reads `{key},{tag},amount` lines on standard input and prints, for each
// {key} in the order it first appears: {columns} (tab-separated). Cells are trimmed; lines
// without three cells or with a non-integer amount are skipped.
use std::io::{{self, BufRead, BufWriter, Write}};

struct Stats {{
    key: String,
    count: u64,
    total: i64,
{fields}}}

fn main() {{
    let mut order: Vec<Stats> = Vec::new();
    for line in io::stdin().lock().lines() {{
        let line = line.expect("read error");
        let cells: Vec<&str> = line.split(',').map(|c| c.trim()).collect();
        if cells.len() != 3 {{
            continue;
        }}
        let amount: i64 = match cells[2].parse() {{
            Ok(v) => v,
            Err(_) => continue,
        }};
        let i = match order.iter().position(|s| s.key == cells[0]) {{
            Some(i) => i,
            None => {{
                order.push(Stats {{ key: cells[0].to_string(), count: 0, total: 0{init} }});
                order.len() - 1
            }}
        }};
        let s = &mut order[i];
        s.count += 1;
        s.total += amount;
{update}    }}
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    for s in &order {{
        writeln!(out, "{{}}\\t{{}}\\t{{}}{fmt}", s.key, s.count, s.total{args}).unwrap();
    }}
}}
"""

_FAST = [
    (
        "    let mut order: Vec<Stats> = Vec::new();\n",
        "    let mut order: Vec<Stats> = Vec::new();\n"
        "    let mut index: std::collections::HashMap<String, usize> = Default::default();\n",
    ),
    (
        "match order.iter().position(|s| s.key == cells[0]) {",
        "match index.get(cells[0]).copied() {",
    ),
    (
        "            None => {\n",
        "            None => {\n                index.insert(cells[0].to_string(), order.len());\n",
    ),
]

_TIERS = {
    "easy": ("", "", "", "", "", "count, total"),
    "medium": (
        "    max: i64,\n",
        ", max: i64::MIN",
        "        s.max = s.max.max(amount);\n",
        "\\t{}",
        ", s.max",
        "count, total, largest amount",
    ),
    "hard": (
        "    max: i64,\n    tags: Vec<String>,\n",
        ", max: i64::MIN, tags: Vec::new()",
        "        s.max = s.max.max(amount);\n"
        "        if !s.tags.iter().any(|t| t == cells[1]) {\n"
        "            s.tags.push(cells[1].to_string());\n        }\n",
        "\\t{}\\t{}",
        ", s.max, s.tags.len()",
        "count, total, largest amount, number of distinct tags",
    ),
}

# Python, run when the task is generated and shipped as tests/rust_inputs.py: the inputs
# (the large one is made again in the checker) and the reference report.
_CASES = r"""
TIER = {params}


def make_input(rng, n):
    n_keys = max(1, n // 2)
    keys = ["k{{:06d}}".format(i) for i in rng.sample(range(10 * n_keys), n_keys)]
    tags = ["web", "app", "api", "pos", "mail"]
    amounts = range(-3 * 10**9, 3 * 10**9)
    lines = []
    for key, tag, amount, r in zip(rng.choices(keys, k=n), rng.choices(tags, k=n),
                                   rng.choices(amounts, k=n), [rng.random() for _ in range(n)]):
        if r >= 0.08:
            lines.append("{{}},{{}},{{}}".format(key, tag, amount))
        elif r < 0.02:  # a non-integer amount
            lines.append("{{}},{{}},12.5".format(key, tag))
        elif r < 0.04:  # two cells
            lines.append("{{}},{{}}".format(key, tag))
        else:  # padded cells
            lines.append(" {{}} , {{}} , {{}} ".format(key, tag, amount))
    return "\n".join(lines) + "\n"


def expected(stdin):
    stats = {{}}
    for line in stdin.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 3:
            continue
        try:
            amount = int(cells[2])
        except ValueError:
            continue
        s = stats.setdefault(cells[0], [0, 0, None, set()])
        s[0] += 1
        s[1] += amount
        s[2] = amount if s[2] is None else max(s[2], amount)
        s[3].add(cells[1])
    out = []
    for key, (count, total, top, tags) in stats.items():
        cols = [key, str(count), str(total)]
        if TIER != "easy":
            cols.append(str(top))
        if TIER == "hard":
            cols.append(str(len(tags)))
        out.append("\t".join(cols))
    return "\n".join(out) + "\n"
"""


@family(
    "key-totals-rust",
    category="optimization",
    summary="Rust: per-key totals found by a linear scan of the keys (quadratic) under a CPU bar",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    key, tag = rng.choice(_WHAT)
    fields, init, update, fmt, args, columns = _TIERS[spec.tier]
    slow = _SLOW.format(
        key=key, tag=tag, columns=columns, fields=fields, init=init, update=update, fmt=fmt,
        args=args,
    )  # fmt: skip
    fast = apply_edits(slow, _FAST)
    big = spec.iscale(60_000, 100_000)
    cases = _CASES.format(params=repr(spec.tier))
    wrongs = {
        # still a linear scan, from the other end
        "still-quadratic": apply_edits(slow, [(".iter().position(", ".iter().rposition(")]),
        # the report sorted by key, not in first-seen order
        "sorted-by-key": apply_edits(
            fast,
            [
                (
                    "    for s in &order {",
                    "    order.sort_by(|a, b| a.key.cmp(&b.key));\n    for s in &order {",
                )
            ],
        ),
        # a non-integer amount counted as 0
        "malformed-as-zero": apply_edits(fast, [("Err(_) => continue,", "Err(_) => 0,")]),
        # cells not trimmed: " k1 " is a different key
        "cells-untrimmed": apply_edits(
            fast, [("line.split(',').map(|c| c.trim())", "line.split(',')")]
        ),
    }
    scope: dict = {}
    exec(cases, scope)
    sample = scope["make_input"](rng, 300)
    instruction = textwrap.dedent(
        f"""\
        # Speed up the per-{key} totals

        `/app/main.rs` reads `{key},{tag},amount` lines on standard input and prints a line of
        totals per {key} (its header comment says exactly what). It is correct but slow: every
        line scans all the {key}s seen so far.

        Make it fast: on {big:,} lines it must finish within 1 second of CPU time (it will be
        measured on such input). Its output must stay **byte-for-byte identical** to what the
        current program prints, for every input. It is built with `{RUST.build_line}` (in /app,
        Rust from the distribution, no crates: the standard library only) and run as
        `./prog < input.csv`; a sample input is `/app/sample.csv`.
        """
    )
    return hs.task(
        instruction=instruction,
        workspace={"main.rs": slow, "sample.csv": sample},
        tests=_tests(scope, cases, rng.randrange(2**31), big),
        answer_path=RUST.source,
        reference=fast,
        wrongs=wrongs,
        note="a key -> index map",
        tags=("rust", "optimization", "hashing"),
        verifier_timeout_sec=420.0,
        reward_outcomes=outcomes.GRADED + outcomes.IO,
        packages=RUST.packages,
    )


def _tests(scope: dict, module: str, secret: int, big: int) -> dict[str, str | bytes]:
    """Edge cases without a bar, then ``big`` lines under a 1 s bar (made again in the
    checker from its seed: its expected output travels as a digest)."""
    make_input, expected = scope["make_input"], scope["expected"]
    rng = random.Random(secret)
    cases = [hs.Case("an empty input", stdin="", want={"lines": []})]
    for k, n in enumerate([1, 7, 400]):
        text = make_input(rng, n)
        want = {"lines": hs.lines(expected(text))}
        cases.append(hs.Case(f"input {k + 1} ({n} lines)", stdin=text, want=want))
    seed = rng.getrandbits(31)
    text = make_input(random.Random(seed), big)
    report = hs.lines(expected(text))
    want = {"lines_sha256": hs.digest({"": "\n".join(report)}), "count": len(report)}
    made = hs.made("rust_inputs", "make_input", seed, [big], text)
    cases.append(hs.Case(f"{big} lines within 1s of CPU", make=made, cpu=1, want=want))
    return hs.tests(
        answer=hs.program(RUST.run, build=RUST.build, build_env=dict(RUST.env)),
        cases=cases,
        compare=hs.compare("lines"),
        kind="io",
        reference={"module": "rust_inputs", "fn": "expected"},
        modules={"rust_inputs.py": module},
        timeout=400,
    )
