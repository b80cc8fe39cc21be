"""Shared machinery of the optimization families: a slow-but-correct program to speed up.

The hidden test runs the agent's program on a few small edge-case inputs and one large one
(under a CPU-time bar, ``cpu_seconds=``) and compares its stdout (and the files it writes)
byte for byte with what the correct fast program printed on the same inputs. Families supply
the input generator (``make_inputs(rng, size) -> {file name: text}``), the program's argument
list and the bar.

The reference's work is done once, when the task is generated (:func:`bench_tests`): its
outputs on every input are the cases of the task's declarative hidden test
(``generators.harness_spec``, run by ``palaestra_harness.py``), so a verification runs only the
agent's program, once a case in a fresh directory holding only that case's inputs. The
reference program runs on the host's Python then, the agent's program on the sandbox's: the
families' programs are pure functions of their ASCII inputs through parts of the standard
library that do not change between Python 3 versions (each family's docstring says why for its
own), and ``tests/test_optimization.py`` runs them on both.

The small inputs travel as data. The large one travels as data when it compresses small enough
(``ship_big``); otherwise as the seed it is made from (``tests/bench_inputs.py`` makes it), and
the checker makes it again and checks it against its SHA-256: should another Python make other
data from the seed, the checker runs the reference (from a read-only copy of root's) on what it
made, before the agent's program runs, instead of trusting expected outputs made for other
data. A large output travels as SHA-256 digests (its line count for the message).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from palaestra.tasks.generators import harness_spec as hs

#: Above this many characters of output (stdout and files), the expected output of the large
#: input travels as digests.
_SHIP_OUTPUT = 200_000


#: Bulk random draws for the families' ``make_inputs`` (put before their code, which the
#: hidden test runs too, to make the large input again): the large inputs have 10^4-10^5 rows,
#: and drawing them cell by cell cost the checker 0.1-0.4 s of CPU at every verification.
#: Everything comes from ``Random.getrandbits``, whose sequence for a seed is the same on every
#: Python 3 (``choice``/``randrange``/``sample`` may change between versions).
DRAWS = r'''
from array import array as _array
import sys as _sys


def draw_bytes(rng, n):
    """n random bytes."""
    return rng.getrandbits(8 * n).to_bytes(n, "little") if n > 0 else b""


def draw_words(rng, n):
    """n random ints in range(2**32)."""
    words = _array("I" if _array("I").itemsize == 4 else "L", draw_bytes(rng, 4 * n))
    if _sys.byteorder == "big":
        words.byteswap()
    return words


def draw_below(rng, m, n):
    """n ints uniform in range(m): bytes (exact: rejection) for m <= 256, else the top of
    32-bit words (off by at most m / 2**32)."""
    if n <= 0:
        return b""
    if m > 256:
        return list(map((32).__rrshift__, map(m.__mul__, draw_words(rng, n))))
    keep = 256 // m * m
    table, drop = bytes(b % m for b in range(256)), bytes(range(keep, 256))
    out = b""
    while len(out) < n:
        more = n - len(out)
        out += draw_bytes(rng, more + more * (256 - keep) // keep + 8).translate(table, drop)
    return out[:n]


def draw_picks(rng, seq, n):
    """n items of seq, each uniform."""
    return list(map(seq.__getitem__, draw_below(rng, len(seq), n)))


def draw_rows(rng, n, rates):
    """(row index, kind) for the rows that get special treatment: a row is of kind k with
    probability rates[k] (their total at most 1), of none with the rest."""
    total = sum(rates)
    cut = min(256, int(total * 256) + 1)  # a byte below cut makes a row a candidate...
    flags = draw_bytes(rng, n).translate(bytes(int(b < cut) for b in range(256)))
    rows, i = [], flags.find(1)
    while i >= 0:
        rows.append(i)
        i = flags.find(1, i + 1)
    bounds, acc = [], 0.0  # ...and a word below its bound one of kind k
    for rate in rates:
        acc += rate
        bounds.append(round(acc * 256 / cut * 2**32))
    hits = []
    for i, w in zip(rows, draw_words(rng, len(rows))):
        for k, bound in enumerate(bounds):
            if w < bound:
                hits.append((i, k))
                break
    return hits


def flat_rows(columns, n):
    """The cells of n rows in one list, row by row (a str column is the same in every row):
    ``"".join`` of it is the text; :func:`set_row` replaces one row."""
    width = len(columns)
    flat = [""] * (width * n)
    for j, col in enumerate(columns):
        flat[j::width] = [col] * n if isinstance(col, str) else col
    return flat


def row_text(flat, width, i):
    return "".join(flat[width * i : width * i + width])


def set_row(flat, width, i, text):
    flat[width * i : width * i + width] = [text] + [""] * (width - 1)
'''


def run_reference(source: str, args: Sequence[str], files: Mapping[str, str]):
    """(stdout, {output file: text}) of the reference program on ``files``, run on this
    interpreter as the checker runs the agent's program (an ``OUT`` directory beside them)."""
    with tempfile.TemporaryDirectory(prefix="palaestra-bench-") as tmp:
        root = Path(tmp)
        (root / "prog.py").write_text(source)
        for name, text in files.items():
            (root / name).write_bytes(text.encode())
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": tmp,
            "TMPDIR": tmp,  # what the reference makes with tempfile goes with the directory
        }
        run = subprocess.run(
            [sys.executable, "-I", "-B", str(root / "prog.py"), *(str(root / a) for a in args)],
            cwd=tmp, env=env, capture_output=True, timeout=300,
        )  # fmt: skip
        if run.returncode != 0:
            raise RuntimeError(f"reference failed: {run.stderr.decode()[-2000:]}")
        out = root / "OUT"
        written = {}
        if out.is_dir():
            for path in sorted(out.iterdir()):
                written[path.name] = path.read_bytes().decode("utf-8", "replace")
        return run.stdout.decode("utf-8", "replace"), written


def _expected(stdout: str, files: dict[str, str], ship: bool) -> dict:
    if ship:
        return {"stdout": stdout, "files": files}
    return {
        "stdout_sha256": hs.digest({"": stdout}),
        "stdout_lines": len(stdout.splitlines()),
        "files_sha256": {name: hs.digest({"": text}) for name, text in files.items()},
    }


def bench_tests(
    *,
    program: str,
    reference: str,
    inputs_code: str,
    args: list[str],
    secret: int,
    small_sizes: list[int],
    big_size: int,
    cpu_bar: int,
    out_dir: bool = False,
    constants: str = "",
    ship_big: bool = False,
    timeout: int = 200,
) -> dict[str, str | bytes]:
    """The task's ``tests/``: the inputs made from ``secret``, the reference program's output
    on each (run now), as the harness's cases. ``args`` name the input files (and ``OUT`` for
    an output directory, whose files are compared too when ``out_dir``)."""
    module = constants + inputs_code  # tests/bench_inputs.py: makes the large input again
    scope: dict = {}
    exec(module, scope)
    make_inputs = scope["make_inputs"]
    rng = random.Random(secret)
    cases = []
    for k, n in enumerate(small_sizes):
        files = make_inputs(rng, n)
        want = _expected(*run_reference(reference, args, files), True)
        cases.append(hs.Case(f"edge-case input {k} (size {n})", files=files, want=want))
    big_seed = rng.getrandbits(31)
    files = make_inputs(random.Random(big_seed), big_size)
    stdout, written = run_reference(reference, args, files)
    size = len(stdout) + sum(len(t) for t in written.values())
    made = hs.made("bench_inputs", "make_inputs", big_seed, [big_size], files)
    cases.append(
        hs.Case(
            f"large input (size {big_size}) within {cpu_bar}s of CPU",
            files=files if ship_big else None,
            make=None if ship_big else made,
            cpu=cpu_bar,
            want=_expected(stdout, written, size <= _SHIP_OUTPUT),
        )
    )
    argv = ["python3", "-B", "{app}/" + program, *("{in}/" + a for a in args)]
    return hs.tests(
        answer=hs.program(argv, compile=["/app/" + program], out_dir="OUT" if out_dir else None),
        cases=cases,
        compare=hs.compare("output"),
        limits=hs.limits(timeout=120),
        kind="io",
        reference={"files": {program: reference}},
        modules={"bench_inputs.py": module},
        timeout=timeout,
    )


def apply_edits(source: str, edits: Sequence[tuple[str, str]], what: str = "") -> str:
    """``source`` with each ``(old, new)`` edit applied; ``old`` must occur exactly once."""
    for old, new in edits:
        if source.count(old) != 1:
            raise AssertionError(f"edit {what!r}: {old!r} occurs {source.count(old)}x")
        source = source.replace(old, new)
    return source
