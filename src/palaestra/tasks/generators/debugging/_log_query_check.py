"""log-query-cli's hidden test: the secret logs and command lines and the correct tool's
results on them (run when the task is generated), as the declarative harness's data: ``main``
called on each command line, the one usage error's words made by the reference in the checker,
and the command line run twice for its exit status."""

from __future__ import annotations

import random

from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import Files
from palaestra.tasks.generators.debugging._kit import host_run_module, host_run_python

WORDS = ["timeout", "retry", "connection", "quota", "disk", "token", "replica", "latency"]


def log_lines(rng, comps: list[str], n: int, start: int) -> list[str]:
    """n random records from `start` (seconds), with equal timestamps, odd lines and blanks."""
    levels = ["DEBUG", "INFO", "INFO", "INFO", "WARNING", "ERROR", "CRITICAL"]
    t, lines = start, []
    for _ in range(n):
        t += rng.choice([0, 0, 1, 1, 2, 5])
        word = rng.choice(WORDS)
        word = rng.choice([word, word.upper(), word.capitalize()])
        msg = rng.choice(["{} on shard {}", "{} after {} ms", "user {1} hit {0}", "{} ok ({})"])
        lines.append(f"2024-05-{1 + t // 86400:02d}T{t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d} {rng.choice(levels)} {rng.choice(comps)}: {msg.format(word, rng.randrange(1000))}")  # fmt: skip
        r = rng.random()
        if r < 0.04:
            lines.append("")
        elif r < 0.07:
            lines.append(rng.choice(["Traceback (most recent call last):", "  at line 3",
                                     "2024-05-01 TRACE x: y"]))  # fmt: skip
    return lines


def sample_log(rng, comps: list[str], n: int) -> str:
    return "\n".join(log_lines(rng, comps, n, 3600 * 9)) + "\n"


def driver(tool: str) -> str:
    """Runs ``main(argv)`` for each command line of ``INPUT`` (``[logs, argvs]``, a log's name
    standing for its path): [exit status, stdout, stderr] each."""
    return f"""
import contextlib, io, os, tempfile
from {tool}.cli import main
logs, argvs = INPUT
where = tempfile.mkdtemp()
for name, text in logs.items():
    with open(os.path.join(where, name), "w") as f:
        f.write(text)
out = []
for argv in argvs:
    argv = [os.path.join(where, a) if a in logs else a for a in argv]
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
"""


def cases(comps: list[str], secret: int, n: int) -> tuple[dict[str, str], list[list[str]]]:
    """The secret log files (name: text) and the command lines over them (naming them)."""
    rng = random.Random(secret)
    texts = [log_lines(rng, comps, n, 3600 * 8 + rng.randrange(600)) for _ in range(3)]
    # equal timestamps across files, in the opposite order of their components
    tie = [ln for ln in texts[0] if ln[:4] == "2024"][n // 2][:19]
    texts[0].append(tie + " INFO zz-last: tie in the first file")
    texts[1].append(tie + " INFO aa-first: tie in the second file")
    texts[0].sort(key=lambda ln: ln[:19] if ln[:4] == "2024" else "")
    texts[1].sort(key=lambda ln: ln[:19] if ln[:4] == "2024" else "")
    fixed = [("ERROR", "zeta"), ("ERROR", "zeta"), ("INFO", "alpha"), ("INFO", "alpha"),
             ("DEBUG", "mid")]  # fmt: skip
    texts.append([f"2024-05-01T00:00:0{i} {lvl} {c}: x" for i, (lvl, c) in enumerate(fixed)])
    logs = {f"part{k}.log": "\n".join(lines) + "\n" for k, lines in enumerate(texts)}
    files = list(logs)
    stamps = sorted(ln[:19] for t in texts[:3] for ln in t if ln[:4] == "2024")

    def some():
        return rng.choice(stamps)

    word = rng.choice(WORDS)
    mixed = "".join(rng.choice([c.upper(), c]) for c in word)
    argvs = [
        files[:1], files[:3], [files[3], "--by", "component"], [files[3], "--by", "level"],
        files[:3] + ["--by", "component"], files[:3] + ["--by", "level", "--level", "info"],
        files[:3] + ["--level", "warning"], files[:3] + ["--level", "ERROR", "--count"],
        files[:3] + ["--level", rng.choice(["Info", "critical", "WARNING"])],
        files[:3] + ["--grep", word.capitalize()], files[:3] + ["--grep", word.upper()[:4], "-i"],
        files[:3] + ["--grep", mixed, "-i", "--count"],
        files[:3] + ["--grep", "no-such-text-" + str(rng.randrange(99))],
        files[:3] + ["--grep", "no-such-text", "--count"],
        files[:3] + ["--until", stamps[0]], files[:3] + ["--tail", "0"],
        files[:3] + ["--tail", str(rng.randrange(1, 9))],
        files[:1] + ["--tail", "3", "--level", "warning"],
        files[:3] + ["--until", some()], files[:3] + ["--since", some()],
        files[:3] + ["--since", tie, "--until", tie], [files[1], files[0], "--since", tie],
        files[:3] + ["--count", "--by", "level"],
    ]  # fmt: skip
    for _ in range(8):
        a, b = sorted([some(), some()])
        argvs.append(files[:3] + ["--since", a, "--until", b, "--count"])
        argvs.append(rng.sample(files[:3], rng.randrange(1, 4)) + ["--since", a, "--until", b])
    return logs, argvs


def log_tests(tool: str, correct: dict[str, str], comps, secret: int, n: int) -> Files:
    """``tests/``: the correct tool's results, run now: the tool is ASCII parsing, sorting and
    printing, the same on any Python 3, except argparse's usage errors (exit status 2), whose
    words vary: those the reference makes in the checker, first (``by_reference``)."""
    logs, argvs = cases(comps, secret, n)
    code = driver(tool)
    want = host_run_python(correct, code, [logs, argvs], {})
    usage = [k for k, w in enumerate(want) if w[0] == 2]
    ok = [k for k in range(len(argvs)) if k not in usage]

    def label(k: int) -> str:
        return f"{k}: {' '.join(argvs[k])}"

    def command(argv: list[str], first: bool) -> dict:
        status, stdout, _ = host_run_module(correct, tool, argv, logs)
        return hs.part(
            answer=hs.program(
                ["python3", "-B", "-m", tool, *(f"{{in}}/{a}" if a in logs else a for a in argv)],
                compile=[f"/app/{tool}"] if first else (),
                status=True,
            ),
            cases=[
                hs.Case(
                    f"python3 -m {tool} {' '.join(argv[3:])}",
                    files=logs,
                    want={"stdout": stdout, "files": {}, "status": status},
                )
            ],
            compare=hs.compare("output"),
        )

    usage_errors = hs.part(
        answer=hs.python_call(code, [logs, [argvs[k] for k in usage]]),
        cases=[hs.Case(label(k), by_reference=True) for k in usage],
        compare=hs.compare("equal"),
        reference={"files": correct},
    )
    commands = [argvs[1] + ["--level", "error"], argvs[1] + ["--grep", "no-such-text"]]
    return hs.tests(
        answer=hs.python_call(code, [logs, [argvs[k] for k in ok]]),
        cases=[hs.Case(label(k), want=want[k]) for k in ok],
        compare=hs.compare("equal"),
        kind="io",
        also=[
            *([usage_errors] if usage else []),
            *(command(a, i == 0) for i, a in enumerate(commands)),
        ],
        timeout=100,
    )
