"""shipment-reconcile: a correct but quadratic shipments-vs-invoices reconciliation to speed up.

The program joins carrier shipments with invoices by tracking number and prints per-carrier
totals, unmatched invoices, double billings and skipped rows. Its slow spots are linear scans
inside loops: the tracking lookup (every tier), deduplicating shipment rows with ``any(...)``
and the billed-list membership tests (medium adds one of them, hard both). Difficulty knobs:
the number of slow spots (fixing only some of them stays too slow) and the input size. The
output must stay byte-identical on fresh secret inputs; the large one runs under a CPU bar.

The reference's output is made when the task is generated (see ``_bench``): csv, dicts,
sets and integer cents print the same on any Python 3.
"""

from __future__ import annotations

import textwrap

from palaestra.tasks.generators import family, solve_sh_writing
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.optimization._bench import DRAWS, apply_edits, bench_tests

_PROGRAMS = ["reconcile.py", "carrier_audit.py", "match_invoices.py", "freight_check.py"]
_CARRIERS = ["DHL", "UPS", "FedEx", "GLS", "DPD", "PostNL", "Hermes", "Colissimo", "USPS"]

FAST = textwrap.dedent(
    '''\
    """Reconcile carrier shipments against invoices.

        python3 PROGRAM SHIPMENTS_CSV INVOICES_CSV

    shipments: tracking,carrier,weight_g   invoices: invoice_id,tracking,amount_cents
    Cells are stripped of surrounding blanks; rows with the wrong number of cells, and
    invoices whose amount is not an integer, are skipped (and counted). A tracking number
    that appears in several shipment rows belongs to the carrier of its first row.

    Output: a per-carrier table (carriers sorted by name: shipments, shipments billed at
    least once, invoiced amount, shipments never billed), then UNMATCHED lines (invoices for
    an unknown tracking number, in input order), DUPLICATE lines (invoices for a tracking
    number already billed, in input order) and the SKIPPED count.
    """

    import csv
    import sys


    def read_rows(path):
        rows, skipped = [], 0
        with open(path, newline="") as f:
            reader = csv.reader(f)
            next(reader, None)
            for row in reader:
                if len(row) != 3:
                    skipped += 1
                    continue
                rows.append([cell.strip() for cell in row])
        return rows, skipped


    def fmt(cents):
        sign = "-" if cents < 0 else ""
        return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


    def main(ship_path, inv_path):
        ship_rows, skipped = read_rows(ship_path)
        inv_rows, more = read_rows(inv_path)
        skipped += more
        carrier_of = {}
        for tracking, carrier, _weight in ship_rows:
            if tracking not in carrier_of:
                carrier_of[tracking] = carrier
        billed = set()
        unmatched, duplicates, invoiced = [], [], {}
        for inv_id, tracking, amount in inv_rows:
            if not amount.lstrip("-").isdigit():
                skipped += 1
                continue
            carrier = carrier_of.get(tracking)
            if carrier is None:
                unmatched.append(inv_id)
                continue
            if tracking in billed:
                duplicates.append((tracking, inv_id))
            billed.add(tracking)
            invoiced[carrier] = invoiced.get(carrier, 0) + int(amount)
        shipped, billed_n = {}, {}
        for tracking, carrier in carrier_of.items():
            shipped[carrier] = shipped.get(carrier, 0) + 1
            if tracking in billed:
                billed_n[carrier] = billed_n.get(carrier, 0) + 1
        out = ["carrier\\tshipments\\tbilled\\tinvoiced\\tunbilled"]
        for carrier in sorted(shipped):
            n, b = shipped[carrier], billed_n.get(carrier, 0)
            out.append(f"{carrier}\\t{n}\\t{b}\\t{fmt(invoiced.get(carrier, 0))}\\t{n - b}")
        out += [f"UNMATCHED {inv_id}" for inv_id in unmatched]
        out += [f"DUPLICATE {tracking} {inv_id}" for tracking, inv_id in duplicates]
        out.append(f"SKIPPED {skipped}")
        sys.stdout.write("\\n".join(out) + "\\n")


    if __name__ == "__main__":
        if len(sys.argv) != 3:
            sys.exit(__doc__)
        main(sys.argv[1], sys.argv[2])
    '''
)

# the slow spots: (fast code, slow code) edits of FAST
_SLOW_SPOTS = {
    "lookup": (
        (
            "        carrier = carrier_of.get(tracking)\n",
            "        carrier = None\n"
            "        for known, owner in carrier_of.items():\n"
            "            if known == tracking:\n"
            "                carrier = owner\n"
            "                break\n",
        ),
    ),
    "dedupe": (
        (
            "    carrier_of = {}\n"
            "    for tracking, carrier, _weight in ship_rows:\n"
            "        if tracking not in carrier_of:\n"
            "            carrier_of[tracking] = carrier\n",
            "    shipments = []\n"
            "    for tracking, carrier, _weight in ship_rows:\n"
            "        if not any(known == tracking for known, _ in shipments):\n"
            "            shipments.append((tracking, carrier))\n"
            "    carrier_of = dict(shipments)\n",
        ),
    ),
    "billed-list": (
        ("    billed = set()\n", "    billed = []\n"),
        ("billed.add(tracking)", "billed.append(tracking)"),
    ),
}
# fast but wrong: output differences a rewrite easily introduces
_WRONG = {
    "last-shipment-row-wins": (
        (
            "        if tracking not in carrier_of:\n            carrier_of[tracking] = carrier\n",
            "        carrier_of[tracking] = carrier\n",
        ),
    ),
    "duplicates-sorted": (
        ("for tracking, inv_id in duplicates]", "for tracking, inv_id in sorted(duplicates)]"),
    ),  # fmt: skip
    "credit-notes-skipped": (('if not amount.lstrip("-").isdigit():', "if not amount.isdigit():"),),
    "billed-counts-invoices": (
        (
            "        billed.add(tracking)\n",
            "        billed.add(tracking)\n        billed_n[carrier] = billed_n.get(carrier, 0) + 1\n",
        ),  # fmt: skip
        (
            "        if tracking in billed:\n            billed_n[carrier] = billed_n.get(carrier, 0) + 1\n",
            "",
        ),  # fmt: skip
    ),
}


_INPUTS = (
    DRAWS
    + r"""
import re


def make_inputs(rng, n):
    # n shipment rows (4% repeating an earlier tracking number, 5% with blanks around the
    # cells, 1% without the weight) and n + n // 5 invoices (5% for one of the last 200
    # trackings, 80% for any, 15% for an unknown one; 5% of the amounts may be negative,
    # 1% are not integers, 1% of the rows have an extra cell).
    carriers, k = [], 3 + draw_below(rng, 4, 1)[0]
    while len(carriers) < k:
        carriers = list(dict.fromkeys(carriers + draw_picks(rng, CARRIERS, k)))
    carriers = carriers[:k]
    prefix = draw_picks(rng, ["TRK", "1Z", "JD"], n)
    digits = bytes.maketrans(bytes(range(10)), b"0123456789")
    digits = draw_below(rng, 10, 9 * n).translate(digits)  # 9 a row
    ts = list(map(str.__add__, prefix, re.findall(".{9}", digits.decode())))
    repeats = [i for i, _ in draw_rows(rng, n, [0.04]) if i]
    trackings, at = [], 0  # the new ones, in order
    for i in repeats:
        trackings += ts[at:i]
        at = i + 1
    trackings += ts[at:]
    for rank, (i, w) in enumerate(zip(repeats, draw_words(rng, len(repeats)))):
        ts[i] = trackings[(i - rank) * w >> 32]
    carrier = draw_picks(rng, carriers, n)
    weight = list(map(str, map((50).__add__, draw_below(rng, 29950, n))))
    ships = flat_rows([ts, ",", carrier, ",", weight, "\n"], n)
    padded = dict(draw_rows(rng, n, [0.05]))
    short = dict(draw_rows(rng, n, [0.01]))
    for i in sorted(set(padded) | set(short)):
        cells = [ts[i], carrier[i], weight[i]]
        if i in padded:
            cells = [" " + c + " " for c in cells]
        if i in short:
            cells = cells[:2]
        set_row(ships, 6, i, ",".join(cells) + "\n")
    m = n + n // 5
    kind = bytes([0] + [1] * 16 + [2] * 239)  # of 20: 1 recent, 16 any, 3 unknown
    kind = draw_below(rng, 20, m).translate(kind) if n else bytes([2] * m)
    sources = [iter(draw_picks(rng, trackings[-200:], kind.count(0))),
               iter(draw_picks(rng, trackings, kind.count(1))),
               iter(map("TRK%09d".__mod__, draw_below(rng, 10**9, kind.count(2))))]
    t = list(map(next, map(sources.__getitem__, kind)))
    amount = list(map(str, map((100).__add__, draw_below(rng, 89900, m))))
    signed = [i for i, _ in draw_rows(rng, m, [0.05])]  # may be negative
    for i, a in zip(signed, draw_below(rng, 95000, len(signed))):
        amount[i] = str(a - 5000)
    odd = draw_rows(rng, m, [0.01])
    for (i, _), text in zip(odd, draw_picks(rng, ["12.50", "n/a", ""], len(odd))):
        amount[i] = text
    ids = list(map("INV%d,".__mod__, range(100000, 100000 + m)))
    invs = flat_rows([ids, t, ",", amount, "\n"], m)
    for i, _ in draw_rows(rng, m, [0.01]):
        invs[5 * i + 4] = ",extra\n"
    return {"shipments.csv": "tracking,carrier,weight_g\n" + "".join(ships),
            "invoices.csv": "invoice_id,tracking,amount_cents\n" + "".join(invs)}
"""
)


@family(
    "shipment-reconcile",
    category="optimization",
    summary="Quadratic shipments/invoices join to make fast (1-3 slow spots) under a CPU bar",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    program = rng.choice(_PROGRAMS)
    spots = ["lookup"] + {"easy": [], "medium": [rng.choice(["dedupe", "billed-list"])],
                          "hard": ["dedupe", "billed-list"]}[spec.tier]  # fmt: skip
    slow = apply_edits(FAST, [e for spot in spots for e in _SLOW_SPOTS[spot]])
    big = spec.iscale(20_000, 40_000)
    secret = rng.randrange(2**31)
    scope: dict = {"CARRIERS": _CARRIERS}
    exec(_INPUTS, scope)
    sample = scope["make_inputs"](rng, 400)
    wrong_names = rng.sample(sorted(_WRONG), 3)
    wrongs = {name: apply_edits(FAST, _WRONG[name], name) for name in wrong_names}
    if len(spots) > 1:  # fixes every slow spot but one
        left = rng.choice(spots[1:])
        wrongs[f"leaves-{left}-slow"] = apply_edits(FAST, _SLOW_SPOTS[left], left)
    else:  # builds the lookup table inside the invoice loop: still quadratic
        rebuilt = "{t: c for t, c, _ in reversed(ship_rows)}.get(tracking)"
        wrongs["table-built-per-invoice"] = apply_edits(
            FAST, [("carrier_of.get(tracking)", rebuilt)]
        )
    instruction = textwrap.dedent(
        f"""\
        # Speed up the shipment reconciliation

        Finance runs `/app/{program}` every night to check carrier invoices against our
        shipments (`python3 /app/{program} shipments.csv invoices.csv > report.txt`; small
        sample exports are in `/app/data/`). It is correct but far too slow on real exports,
        which have tens of thousands of rows.

        Make it fast: on an export of {big:,} shipments and about {big * 6 // 5:,} invoices it
        must finish within 2 seconds of CPU time (it will be measured on such an input). Its
        output must stay **byte-for-byte identical** to what the current program prints, for
        every input: same lines, same order, same formatting, same treatment of odd rows (its
        docstring describes them). Keep the command line; only the standard library is
        available.
        """
    )
    tests = {
        **bench_tests(
            reference=FAST,
            program=program,
            inputs_code=_INPUTS,
            constants=f"CARRIERS = {_CARRIERS!r}\n",
            args=["shipments.csv", "invoices.csv"],
            secret=secret,
            small_sizes=[0, 8, 150],
            big_size=big,
            cpu_bar=2,
        ),
    }
    return GeneratedTask(
        instruction=instruction,
        workspace={
            program: slow,
            "data/shipments.csv": sample["shipments.csv"],
            "data/invoices.csv": sample["invoices.csv"],
        },
        tests=tests,
        solution={"solve.sh": solve_sh_writing({program: FAST}, note="dict and set lookups")},
        wrong_solutions={
            name: {"solve.sh": solve_sh_writing({program: src}, note=f"wrong: {name}")}
            for name, src in wrongs.items()
        },
        tags=("python", "optimization", "join", "csv"),
        verifier_timeout_sec=240.0,
    )
