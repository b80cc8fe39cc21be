"""orders-pipeline's hidden test: the secret exports and field values, and the correct
pipeline's results on them (run when the task is generated), as the declarative harness's
data: the parsing functions called, then the command line run on each export.

The pipeline is csv, integer cents, ``datetime.date`` and sorting: the same on any Python 3
(``date.fromisoformat`` accepts more since 3.11, but only ``YYYY-MM-DD`` reaches it here or
is among the values tried).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import Files
from palaestra.tasks.generators.debugging._kit import CALLS_DRIVER, call_part, host_run_module

#: The fixed corner cases every export gets, then random rows.
CORNERS = [
    "A1,ann@x.test,{r},2024-01-05,10.00,paid", "A1,ann@x.test,{r},2024-01-05,12.50,paid",
    "A2,Ann@X.test,{r},2024-01-07,$7.5,paid", "A3, ann@x.test ,{r},2024-01-09,0.01,Refunded",
    "A4,bo@x.test,{r},13/01/2024,0.02,paid", "A5,bo@x.test,{r},03/02/2024,0.02, refunded ",
    "A6,cy@x.test,{r},2024-02-03,-4.00,paid", "A7,cy@x.test,{r},2024-02-04,0.00,paid",
    'A8,di@x.test,{r},2024-02-05,"$1,234.5",paid', "A9,di@x.test,{r},2024-02-06,0.01,paid",
    "A10,di@x.test,{r},2024-02-07,0.01,paid", "A11,ed@x.test,{r},2024-02-08,,paid",
    "A12, ANN@x.test ,{r},2024-01-20,5.00,paid", "A9,eve@x.test,{r},2024-02-06,0.05,paid",
]  # fmt: skip
#: Dates are compared as text: a result is [status, str(value)].
DRIVER_DATES = CALLS_DRIVER.replace(
    "out.append(results)", "out.append([[k, str(v)] for k, v in results])"
)
OUTPUTS = ("summary.csv", "rejects.csv")


def orders_tests(
    pkg: str, correct: dict[str, str], export: Callable, regions: list[str], secret: int, n: int
) -> Files:
    """``tests/``: the pipeline run on two exports (one check an output file, read as text
    mode reads it), and ``parse_date`` / ``parse_cents`` called on odd values."""
    rng = random.Random(secret)
    dates = [f"{rng.randrange(1, 29):02d}/{rng.randrange(1, 13):02d}/2024" for _ in range(20)]
    dates += [f"2024-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}" for _ in range(10)]
    dates += ["31/04/2024", "2024-02-30", "1/2/2024", " 2024-05-06 ", "x"]
    amounts = [f"{rng.randrange(0, 99999)}.{rng.randrange(100):02d}" for _ in range(20)]
    amounts += ["$" + a for a in amounts[:5]]
    amounts += ["$12,345.6", "7", " 8.5 ", "-3.00", "0.00", "1.234", "", "$", "abc", "1,0"]
    calls = [
        (f"{fn} ({len(values)} cases)", [[pkg + ".parse", fn, [v]] for v in values])
        for fn, values in (("parse_date", dates), ("parse_cents", amounts))
    ]
    part = call_part(correct, DRIVER_DATES, calls, timeout=30)
    runs = []
    for k in range(2):
        body = export(rng, regions, n).splitlines()
        region = rng.choice(regions)
        corners = [c.format(r=region) for c in CORNERS]
        text = "\n".join(body[:1] + corners + body[1:]) + "\n"
        read = [f"out/{name}" for name in OUTPUTS]
        _, _, files = host_run_module(
            correct, pkg, ["orders.csv", "out"], {"orders.csv": text}, read
        )
        want = {"files": {name: files[f"out/{name}"] for name in OUTPUTS}}
        runs.append(hs.Case(f"run {k}", files={"orders.csv": text}, want=want))
    return hs.tests(
        answer=hs.program(
            ["python3", "-B", "-m", pkg, "{in}/orders.csv", "{in}/out"], out_dir="out"
        ),
        cases=runs,
        compare=hs.compare("files", newlines="universal", file_label="{label}: {name} matches"),
        limits=hs.limits(timeout=30),
        also=[part],
        timeout=100,
    )
