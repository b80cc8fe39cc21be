"""The hidden tests of the starter tasks that run the agent's program, as declarative harness
specs (:mod:`palaestra.tasks.generators.harness_spec`): the optimization tasks, the
clickstream report.

A task's ``tests/`` in the pack holds ``test.sh``, ``harness.bin`` (its spec: the cases, their
expected values, computed here from the task's ``tests/reference*.py`` when the spec is built,
the comparison and the limits) and the modules the spec names (input makers, a comparison).
The harness and checker runtime is not in the pack: :mod:`palaestra.tasks.pack_cache` adds the
generators' files when the pack is loaded. This module is the specs' one source of truth:
``tests/tasks/starter/test_harness_files.py`` checks that the committed files are what it
builds, and

    python -m palaestra.tasks.starter_harness          # rewrite them after a change

The large inputs travel as the seeds the task's input module (``tests/gen_*.py``) makes them
from, with their SHA-256: a checker whose Python makes other data runs the reference on it
first, before any agent code runs.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType

from palaestra.tasks import (
    starter_harness_calls,
    starter_harness_packages,
    starter_harness_state,
    starter_harness_trees,
)
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.starter_harness_calls import PACK, without_runtime

#: Above this many characters, an expected output travels as its digest.
_SHIP_OUTPUT = 100_000
_OUT_SPEC = hs.compare("output")


def _module(task: str, name: str) -> ModuleType:
    """The task's ``tests/<name>.py`` (an input maker), loaded from the pack."""
    path = PACK / task / "tests" / f"{name}.py"
    mod = ModuleType(name)
    mod.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)
    return mod


def _reference_output(task: str, argv: list[str], files: Mapping[str, str]) -> str:
    """The stdout of the task's ``tests/reference.py`` on ``files``, run on this interpreter."""
    with tempfile.TemporaryDirectory(prefix="palaestra-starter-") as tmp:
        for name, text in files.items():
            Path(tmp, name).write_text(text)
        args = [a.replace("{in}", tmp) for a in argv]
        k = Path(tmp, "k")
        args = [k.read_text() if a == "{k}" else a for a in args]
        run = subprocess.run(
            [sys.executable, "-I", "-B", str(PACK / task / "tests" / "reference.py"), *args],
            cwd=tmp,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            capture_output=True,
            timeout=600,
        )
    if run.returncode != 0:
        raise RuntimeError(f"{task}: the reference failed: {run.stderr.decode()[-2000:]}")
    return run.stdout.decode("utf-8", "surrogateescape")


def _want(stdout: str) -> dict:
    if len(stdout) <= _SHIP_OUTPUT:
        return {"stdout": stdout, "files": {}}
    return {
        "stdout_sha256": hs.digest({"": stdout}),
        "stdout_lines": len(stdout.splitlines()),
        "files_sha256": {},
    }


def _tests(
    task: str,
    *,
    program: str,
    argv: list[str],
    small: list[tuple[str, dict[str, str]]],
    big: list[tuple[str, str, int, list[object], int]],
    maker: str,
) -> dict[str, str | bytes]:
    """``tests/`` of an optimization task: ``small`` cases (label, files) shipped as data,
    ``big`` ones (label, maker function, seed, its args, CPU bar or None) made again in the
    checker;
    the answer is ``program`` in /app, run as ``argv`` (``{app}``, ``{in}``, and ``{k}`` for
    the case's ``k`` file)."""
    cases = [
        hs.Case(label, files=files, want=_want(_reference_output(task, argv, files)))
        for label, files in small
    ]
    module = _module(task, maker)
    for label, fn, seed, args, bar in big:
        files = getattr(module, fn)(random.Random(seed), *args)
        want = _want(_reference_output(task, argv, files))
        made = hs.made(maker, fn, seed, args, files)
        label = label if bar is None else f"{label} within {bar} s of CPU"
        cases.append(hs.Case(label, make=made, cpu=bar, want=want))
    reference = (PACK / task / "tests" / "reference.py").read_text()
    answer = ["python3", "-B", "{app}/" + program, *argv]
    if "{k}" in argv:  # the window travels in the case's "k" file, which a shell reads
        words = ['"$(cat "$1/k")"' if a == "{k}" else a.replace("{in}", '"$1"') for a in argv]
        line = " ".join(["exec python3 -B", f'"$0/{program}"', *words])
        answer = ["/bin/sh", "-c", line, "{app}", "{in}"]
    files = hs.tests(
        answer=hs.program(answer, compile=["/app/" + program], require="/app/" + program),
        cases=cases,
        compare=_OUT_SPEC,
        limits=hs.limits(timeout=120, cpu=60),
        kind="io",
        reference={"files": {program: reference}},
        modules={f"{maker}.py": (PACK / task / "tests" / f"{maker}.py").read_text()},
        timeout=280,  # the checker's alarm: the original programs run every case on one CPU
    )
    return without_runtime(files)


def order_report() -> dict[str, str | bytes]:
    task = "optimization-easy-order-report"
    return _tests(
        task,
        program="report.py",
        argv=["{in}/orders.csv", "{in}/customers.csv"],
        small=[],
        big=[
            ("small export (400 customers, 3000 orders)", "make", 11, [400, 3000], None),
            ("large export (20000 customers, 80000 orders)", "make", 12345, [20000, 80000], 4),
        ],
        maker="gen_data",
    )


def moving_median() -> dict[str, str | bytes]:
    task = "optimization-medium-moving-median"
    gen = _module(task, "gen_trace")
    rng = random.Random(60606)
    edge = [
        ("k=1", "5\n-3\n\n# c\n7\n", 1),
        ("k=n", "4\n1\n3\n2\n", 4),
        ("k>n", "4\n1\n3\n", 4),
        ("even negatives", "-3\n-4\n-10\n7\n+5\n-0\n", 2),
        ("even k=4", "1\n2\n3\n4\n5\n100\n-100\n6\n", 4),
        ("huge values", f"{10**12 + 1}\n{10**12 + 2}\n{-(10**12)}\n{10**12 + 7}\n", 2),
        ("random small odd", gen.trace(rng, 500, 1000), 7),
        ("random small even", gen.trace(rng, 500, 1000), 10),
    ]
    return _tests(
        task,
        program="smooth.py",
        argv=["{in}/trace.txt", "{k}"],
        small=[(label, {"trace.txt": text, "k": str(k)}) for label, text, k in edge],
        big=[
            ("large odd (200000 values, k=2001)", "make", 60607, [200_000, 100_000, 2001], 4),
            ("large even (150000 values, k=1000)", "make", 60608, [150_000, 100_000, 1000], 4),
        ],
        maker="gen_trace",
    )


def access_log() -> dict[str, str | bytes]:
    task = "optimization-hard-access-log-report"
    return _tests(
        task,
        program="analyze.py",
        argv=["{in}/access.log"],
        small=[("only malformed lines", {"access.log": "garbage line\n\n"})],
        big=[
            ("3000 lines", "make", 5, [3000, 400], None),
            ("8000 lines", "make", 6, [8000, 900], None),
            ("150000 lines", "make", 424242, [150_000, 50_000], 4),
        ],
        maker="gen_log",
    )


def clickstream_report() -> dict[str, str | bytes]:
    """Three warehouses (the sample's size, the hand-made edge cases, a large hidden one): the
    report the program writes to ``{in}/report.json`` against the reference's, number by
    number (``tests/report_compare.py``)."""
    task = "data-querying-hard-clickstream-report"
    gen = _module(task, "gen_events")
    tests = PACK / task / "tests"
    argv = ["{in}/warehouse.db", "{in}/report.json"]

    def want(files: Mapping[str, bytes]) -> dict:
        with tempfile.TemporaryDirectory(prefix="palaestra-starter-") as tmp:
            Path(tmp, "warehouse.db").write_bytes(files["warehouse.db"])
            args = [a.replace("{in}", tmp) for a in argv]
            subprocess.run(
                [sys.executable, "-I", "-B", str(tests / "reference_report.py"), *args],
                check=True,
                timeout=600,
            )
            return {"stdout": "", "files": {"report.json": Path(args[1]).read_text()}}

    edge = gen.edge_warehouse()
    cases = [hs.Case("edge", files=edge, want=want(edge))]
    for label, seed, size in (("sample", 5, (30, 600, 8)), ("large", 31337, (400, 40_000, 28))):
        files = gen.warehouse(random.Random(seed), seed, *size)
        made = hs.made("gen_events", "warehouse", seed, [seed, *size], files)
        cases.append(hs.Case(label, make=made, want=want(files)))
    files = hs.tests(
        answer=hs.program(
            ["python3", "-I", "{app}/report.py", *argv],
            out_dir=".",
            compile=["/app/report.py"],
            require="/app/report.py",
        ),
        cases=cases,
        compare=hs.compare("function", module="report_compare", fn="check"),
        limits=hs.limits(timeout=20),
        kind="io",
        reference={"files": {"report.py": (tests / "reference_report.py").read_text()}},
        modules={
            name: (tests / name).read_text() for name in ("gen_events.py", "report_compare.py")
        },
        timeout=110,
    )
    return without_runtime(files)


#: Task id -> the builder of its ``tests/`` harness files.
BUILDERS: dict[str, Callable[[], dict[str, str | bytes]]] = {
    "optimization-easy-order-report": order_report,
    "optimization-medium-moving-median": moving_median,
    "optimization-hard-access-log-report": access_log,
    "data-querying-hard-clickstream-report": clickstream_report,
    **starter_harness_calls.BUILDERS,
    **starter_harness_packages.BUILDERS,
    **starter_harness_trees.BUILDERS,
    **starter_harness_state.BUILDERS,
}


def write(task: str) -> list[str]:
    """Write ``task``'s built files into its ``tests/``; the names written."""
    out = PACK / task / "tests"
    files = BUILDERS[task]()
    for name, content in files.items():
        path = out / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        path.chmod(0o755 if name.endswith(".sh") else 0o644)
    return sorted(files)


if __name__ == "__main__":
    for task_id in sys.argv[1:] or BUILDERS:  # the tasks named, or all
        print(task_id, ", ".join(write(task_id)))
