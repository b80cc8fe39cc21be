"""Shared machinery of the optimization families: a slow-but-correct program to speed up.

The hidden test regenerates inputs from the task's secret seed (a few small edge-case inputs and
one large one), runs the correct fast program from ``tests/reference.json`` on each (as
``nobody``, no bar) to get the expected output, then runs the agent's program on the same inputs
(the large one under a CPU-time bar, ``cpu_seconds=``) and compares outputs byte for byte.
Families supply the input generator (``make_inputs(rng, size) -> {file name: text}``), the
program's argument list and the bar.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from palaestra.tasks.generators.debugging._kit import HIDDEN_PRELUDE


def reference_json(files: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(files.items())), indent=1, sort_keys=True) + "\n"


def hidden_test(
    *,
    program: str,
    inputs_code: str,
    args: list[str],
    secret: int,
    small_sizes: list[int],
    big_size: int,
    cpu_bar: int,
    out_dir: bool = False,
    constants: str = "",
) -> str:
    """The hidden test. ``args`` name the input files (and ``OUT`` for an output directory,
    whose files are compared too when ``out_dir``)."""
    return (
        HIDDEN_PRELUDE
        + constants
        + inputs_code
        + f"""
PROGRAM, ARGS, SECRET = {program!r}, {args!r}, {secret}
SMALL, BIG, BAR, OUT_DIR = {small_sizes!r}, {big_size}, {cpu_bar}, {out_dir!r}


def run(root, files, bar):
    work = copy_tree_for_child(tempfile.mkdtemp(prefix="in-"), prefix="in-")
    for name, text in files.items():
        path = os.path.join(work, name)
        with open(path, "w") as f:
            f.write(text)
        os.chown(path, 65534, 65534)
    out = os.path.join(work, "OUT")
    argv = [os.path.join(work, a) for a in ARGS]
    res = run_command(["python3", "-B", os.path.join(root, PROGRAM)] + argv, cwd=root,
                      timeout=120, cpu_seconds=bar)
    produced = {{}}
    if OUT_DIR and os.path.isdir(out):
        for name in sorted(os.listdir(out)):
            with open(os.path.join(out, name), "rb") as f:
                produced[name] = f.read().decode("utf-8", "replace")
    return res, produced


def first_diff(want, got):
    wl, gl = want.splitlines(), got.splitlines()
    for i in range(max(len(wl), len(gl))):
        if wl[i:i + 1] != gl[i:i + 1]:
            return "line {{}}: expected {{!r}}, got {{!r}}".format(i + 1, wl[i:i + 1], gl[i:i + 1])
    return "outputs differ"


ck = Checker(kind="io")
ck.compile_python(os.path.join("/app", PROGRAM))
ref = reference_dir()
rng = random.Random(SECRET)
cases = [("edge-case input {{}} (size {{}})".format(k, n), make_inputs(rng, n), None)
         for k, n in enumerate(SMALL)]
cases.append(("large input (size {{}}) within {{}}s of CPU".format(BIG, BAR), make_inputs(rng, BIG), BAR))
for label, files, bar in cases:
    want, want_files = run(ref, files, None)
    if not want.ok:
        raise SystemExit("reference failed on {{}}: {{}}".format(label, want.error))
    got, got_files = run("/app/", files, bar)
    if not got.ok:
        ck.error(label, got.error)
        continue
    ok = got.stdout == want.stdout
    detail = "" if ok else "stdout " + first_diff(want.stdout, got.stdout)
    if ok and got_files != want_files:
        ok = False
        names = sorted(set(want_files) | set(got_files))
        bad = [n for n in names if want_files.get(n) != got_files.get(n)][0]
        detail = "output file {{}}: {{}}".format(
            bad, first_diff(want_files.get(bad) or "", got_files.get(bad) or "")
            if bad in want_files and bad in got_files else "missing or unexpected")
    ck.check(label, ok, detail)
ck.finish()
"""
    )


def apply_edits(source: str, edits: Sequence[tuple[str, str]], what: str = "") -> str:
    """``source`` with each ``(old, new)`` edit applied; ``old`` must occur exactly once."""
    for old, new in edits:
        if source.count(old) != 1:
            raise AssertionError(f"edit {what!r}: {old!r} occurs {source.count(old)}x")
        source = source.replace(old, new)
    return source
