"""orders-pipeline's hidden test: the secret exports and field values, the correct pipeline's
results on them (run when the task is generated) and the checker that runs the agent's.

The pipeline is csv, integer cents, ``datetime.date`` and sorting: the same on any Python 3
(``date.fromisoformat`` accepts more since 3.11, but only ``YYYY-MM-DD`` reaches it here or
is among the values tried). The exports ship as data: ``random.choice`` and ``randrange``
sequences may differ between Pythons.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from palaestra.tasks.generators.base import precomputed
from palaestra.tasks.generators.debugging._kit import (
    CALL_DRIVER,
    HIDDEN_PRELUDE,
    host_run_module,
    host_run_python,
)

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
DRIVER_DATES = CALL_DRIVER.replace("emit(out)", "emit([[k, str(v)] for k, v in out])")
OUTPUTS = ("summary.csv", "rejects.csv")


def precomputed_cases(
    pkg: str, correct: dict[str, str], export: Callable, regions: list[str], secret: int, n: int
) -> bytes:
    rng = random.Random(secret)
    dates = [f"{rng.randrange(1, 29):02d}/{rng.randrange(1, 13):02d}/2024" for _ in range(20)]
    dates += [f"2024-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}" for _ in range(10)]
    dates += ["31/04/2024", "2024-02-30", "1/2/2024", " 2024-05-06 ", "x"]
    amounts = [f"{rng.randrange(0, 99999)}.{rng.randrange(100):02d}" for _ in range(20)]
    amounts += ["$" + a for a in amounts[:5]]
    amounts += ["$12,345.6", "7", " 8.5 ", "-3.00", "0.00", "1.234", "", "$", "abc", "1,0"]
    calls = [[pkg + ".parse", "parse_date", [d]] for d in dates]
    calls += [[pkg + ".parse", "parse_cents", [a]] for a in amounts]
    groups = [["parse_date", len(dates)], ["parse_cents", len(amounts)]]
    want_calls = host_run_python(correct, DRIVER_DATES, calls, {})
    runs = []
    for _ in range(2):
        body = export(rng, regions, n).splitlines()
        region = rng.choice(regions)
        corners = [c.format(r=region) for c in CORNERS]
        text = "\n".join(body[:1] + corners + body[1:]) + "\n"
        read = [f"out/{name}" for name in OUTPUTS]
        _, _, files = host_run_module(
            correct, pkg, ["orders.csv", "out"], {"orders.csv": text}, read
        )
        runs.append([text, {name: files[f"out/{name}"] for name in OUTPUTS}])
    return precomputed({"calls": calls, "groups": groups, "want_calls": want_calls, "runs": runs})


def hidden(pkg: str) -> str:
    return (
        HIDDEN_PRELUDE
        + "\nfrom palaestra_check import precomputed\n"
        + f"PKG = {pkg!r}\nDRIVER_DATES = {DRIVER_DATES!r}\n"
        + r"""

def run_pipeline(cwd, text):
    work = copy_tree_for_child(make_private_dir("in-"), prefix="in-")
    src = os.path.join(work, "orders.csv")
    with open(src, "w") as f:
        f.write(text)
    os.chown(src, 65534, 65534)
    out = os.path.join(work, "out")
    res = run_command(["python3", "-B", "-m", PKG, src, out], cwd=cwd, timeout=30)
    files = {}
    for name in ("summary.csv", "rejects.csv"):
        text = read_regular(os.path.join(out, name), 8 << 20)  # never through a link
        # as open() in text mode reads it: universal newlines
        files[name] = None if text is None else text.replace("\r\n", "\n").replace("\r", "\n")
    return res, files


data = precomputed()
ck = Checker()
got = run_python(DRIVER_DATES, data["calls"], cwd="/app", timeout=30)
if not got.ok:
    ck.check("the parsing functions run", False, got.error)
else:
    compare_groups(ck, data["groups"], got.value, data["want_calls"])

for k, (text, want_files) in enumerate(data["runs"]):
    res, got_files = run_pipeline("/app", text)
    if not res.ok:
        ck.check("pipeline run {} succeeds".format(k), False, res.error)
        continue
    for name in ("summary.csv", "rejects.csv"):
        w, g = want_files[name], got_files[name]
        detail = ""
        if w != g and g is not None:
            wl, gl = w.splitlines(), g.splitlines()
            diff = [i for i in range(max(len(wl), len(gl))) if wl[i:i + 1] != gl[i:i + 1]]
            i = diff[0]
            detail = "line {}: expected {!r}, got {!r}".format(i + 1, wl[i:i + 1], gl[i:i + 1])
        ck.check("run {}: {} matches".format(k, name), w == g, detail or "missing")
ck.finish()
"""
    )
