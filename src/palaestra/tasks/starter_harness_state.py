"""The hidden tests of the starter tasks whose answer is what the agent left, nothing of it
run (library-loans' answers.json, archive-logs' folders), as declarative harness specs: a
``state`` answer looks at each case's path without following links (a regular file only,
capped; a FIFO never blocks), and a comparison of the task's own ``tests/`` module judges it
against the expected values fixed here, when the spec is built.
:mod:`palaestra.tasks.starter_harness` lists them with the others and writes them."""

from __future__ import annotations

import json

from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.starter_harness_calls import PACK, pack_module, without_runtime


def library_loans() -> dict[str, str | bytes]:
    """/app/answers.json scored key by key against ``library_data.answers()`` (the data
    generator, run here): one check a question; reward their fraction, as before."""
    task = "data-querying-easy-library-loans"
    want = pack_module(task, "library_data").answers()
    files = hs.tests(
        answer=hs.state(),
        cases=[hs.Case("answers.json", want=want, path="/app/answers.json")],
        compare=hs.compare("function", module="loans_check", fn="check"),
        kind="assert",
        modules={"loans_check.py": (PACK / task / "tests" / "loans_check.py").read_text()},
        timeout=110,
        reward="partial",
    )
    return without_runtime(files)


def _target(name: str) -> str:
    """Where the instruction files ``name`` under /app/archive."""
    import datetime as dt
    import re

    m = re.fullmatch(
        r"(?P<svc>[a-z0-9]+(?:-[a-z0-9]+)*)-(?P<d>\d{2})-(?P<m>\d{2})-(?P<y>\d{4})\.log", name
    )
    if m:
        try:
            dt.date(int(m["y"]), int(m["m"]), int(m["d"]))
        except ValueError:
            return f"unsorted/{name}"
        return f"{m['svc']}/{m['y']}/{m['m']}/{m['svc']}-{m['y']}-{m['m']}-{m['d']}.log"
    return f"unsorted/{name}"


def archive_logs() -> dict[str, str | bytes]:
    """/app/archive holds exactly the filed files (the layout computed here from the original
    file list, ``tests/manifest.json``: names and SHA-256), /app/incoming no file: two checks,
    reward 1 only when both hold, as before."""
    task = "file-operations-easy-archive-logs"
    tests = PACK / task / "tests"
    manifest = json.loads((tests / "manifest.json").read_text())
    expected = {_target(name): digest for name, digest in manifest.items()}
    files = hs.tests(
        answer=hs.state(),
        cases=[
            hs.Case(
                "archive layout",
                want={"path": "/app/archive", "files": expected},
                path="/app/archive",
            ),
            hs.Case(
                "incoming emptied",
                want={"path": "/app/incoming", "empty": True},
                path="/app/incoming",
            ),
        ],
        compare=hs.compare("function", module="archive_check", fn="check"),
        kind="assert",
        modules={"archive_check.py": (tests / "archive_check.py").read_text()},
        timeout=110,
    )
    return without_runtime(files)


#: Task id -> the builder of its ``tests/`` harness files.
BUILDERS = {
    "data-querying-easy-library-loans": library_loans,
    "file-operations-easy-archive-logs": archive_logs,
}
