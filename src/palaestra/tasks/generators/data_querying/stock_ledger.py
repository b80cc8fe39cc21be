"""stock-ledger: stock per SKU from a directory of movement exports (a script the checker runs on
ledgers made from a per-task secret); the example of a family written on the declarative
hidden test (``harness_spec``): its test is the cases below, the reference's reports made now.

Easy: sum the movements of every file (SKUs are case-sensitive, returns are negative). Medium:
also the SKUs whose running stock went below zero, in time order across files (ties by move
id). Hard: also rows exported twice (same move id, counted once) and malformed rows, skipped
and counted.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_RIGHT = '''\
"""Stock per SKU: python3 ledger.py LEDGER_DIR prints a JSON report."""
import csv, json, os, sys

TIER = "TIER_VALUE"


def report(root):
    moves, seen, skipped = [], set(), 0
    for name in sorted(os.listdir(root)):
        if not name.endswith(".csv"):
            continue
        with open(os.path.join(root, name), newline="") as f:
            for row in csv.DictReader(f):
                try:
                    move = (row["at"], int(row["move_id"]), row["sku"], int(row["qty"]))
                except (TypeError, ValueError):
                    skipped += 1
                    continue
                if move[1] in seen and TIER == "hard":
                    continue
                seen.add(move[1])
                moves.append(move)
    stock, negative = {}, set()
    for _, _, sku, qty in sorted(moves):
        stock[sku] = stock.get(sku, 0) + qty
        if stock[sku] < 0:
            negative.add(sku)
    out = {"stock": dict(sorted(stock.items()))}
    if TIER != "easy":
        out["went_negative"] = sorted(negative)
    if TIER == "hard":
        out["skipped"] = skipped
    return out


if __name__ == "__main__":
    print(json.dumps(report(sys.argv[1])))
'''

#: plausible first drafts: (tiers, old, new) edits of the reference
_WRONGS = {
    "first-file-only": ("emh", "sorted(os.listdir(root))", "sorted(os.listdir(root))[:1]"),
    "sku-case-folded": (
        "emh",
        "stock[sku] = stock.get(sku, 0)",
        "sku = sku.upper()\n        stock[sku] = stock.get(sku, 0)",
    ),
    "returns-ignored": (
        "emh",
        "        stock[sku] = stock.get",
        "        qty = max(qty, 0)\n        stock[sku] = stock.get",
    ),
    "file-order-running": ("mh", "in sorted(moves):", "in moves:"),
    "duplicates-counted": ("h", 'and TIER == "hard"', "and False"),
    "bad-rows-as-zero": ("h", 'int(row["qty"]))', 'int(row["qty"] or 0))'),
}


def _ledger(rng, tier: str, n: int) -> dict[str, str]:
    """``{ledger/<file>: csv}``: n moves over a few SKUs (two differing in case only) in three
    exports whose times interleave; hard: rows exported twice and malformed ones."""
    skus = ["AB-1", "ab-1", "CX-7", "Q-42", "ZZ-9"]
    rows = []
    for move_id in rng.sample(range(1000, 9999), n):
        at = f"2024-05-{rng.randint(1, 3):02d}T{rng.randint(0, 23):02d}:{rng.choice([0, 30]):02d}"
        rows.append([str(move_id), rng.choice(skus), str(rng.randint(-9, 12)), at])
    if tier == "hard":
        bad = [[str(rng.randint(1, 999)), "AB-1", qty, "2024-05-01T00:00"] for qty in ("n/a", "")]
        rows += rng.sample(rows, n // 8) + bad
    rng.shuffle(rows)
    header = "move_id,sku,qty,at\n"
    files = {"ledger/README.txt": "not a ledger\n"}
    for k, name in enumerate(["north", "south", "west"]):
        files[f"ledger/{name}.csv"] = header + "".join(",".join(r) + "\n" for r in rows[k::3])
    return files


@family(
    "stock-ledger",
    category="data-querying",
    summary="Stock per SKU over movement exports: "
    "time order across files, duplicates and malformed rows (the harness_spec example)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng, tier = spec.rng, spec.tier
    right = _RIGHT.replace("TIER_VALUE", tier)
    scope: dict = {}
    exec(right.replace('if __name__ == "__main__":', "if False:"), scope)

    def case(label: str, files: dict[str, str]) -> hs.Case:  # the reference's report, now
        return hs.Case(label, files=files, want=_report(scope["report"], files))

    n = spec.iscale(20, 400)
    cases = [case(f"ledger {k + 1}", _ledger(rng, tier, n + 7 * k)) for k in range(3)]
    keys = ("stock", "went_negative", "skipped")[: {"easy": 1, "medium": 2, "hard": 3}[tier]]
    instruction = (
        "# Stock per SKU\n\nWrite `/app/ledger.py` so that `python3 /app/ledger.py LEDGER_DIR` "
        f"prints one JSON object with the keys {', '.join(f'`{k}`' for k in keys)}. "
        "`LEDGER_DIR` holds CSV exports (`*.csv`, header `move_id,sku,qty,at`; other files are "
        "not ledgers); `/app/ledger/` is a sample.\n\n- `stock`: every SKU's total `qty` (SKUs "
        "are case-sensitive; negative quantities are returns).\n"
        + (
            "- `went_negative`: sorted SKUs whose running stock dropped below 0, taking the "
            "moves of all files in `at` order (ties by `move_id`).\n"
            if tier != "easy"
            else ""
        )
        + (
            "- a move exported twice (same `move_id`) counts once; rows whose `move_id` or "
            "`qty` is not an integer are skipped, and `skipped` is their number.\n"
            if tier == "hard"
            else ""
        )
    )
    return hs.task(
        instruction=instruction,
        workspace=_ledger(rng, tier, 12),
        tests=hs.tests(
            answer=hs.program(
                ["python3", "{app}/ledger.py", "{in}/ledger"], require="/app/ledger.py"
            ),
            cases=cases,
            compare=hs.compare(
                "json_keys",
                parse_label="{label}: JSON",
                key_label="{label}: {key}",
                object_label="{label}: an object",
            ),
            limits=hs.limits(timeout=30, cpu=5),
            kind="io",
        ),
        answer_path="ledger.py",
        reference=right,
        wrongs={
            name: right.replace(old, new)
            for name, (tiers, old, new) in _WRONGS.items()
            if tier[0] in tiers
        },
        note="time order, duplicates once",
        tags=("python", "csv", "json", "aggregation"),
    )


def _report(report, files: dict[str, str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in files.items():
            (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / rel).write_text(text)
        return json.loads(json.dumps(report(str(Path(tmp) / "ledger"))))
