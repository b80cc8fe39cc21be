"""The inventory exports (random RFC 4180 files from the test's fixed seed: quoted commas,
doubled quotes, line breaks inside fields, blank lines), their expected items, summaries and
command-line reports, and the API's comparison (the harness's ``function`` comparison)."""

import csv
import io
import random

SEED = 5150


WORDS = ["Bolt", "Nut", "Hinge", "Hook", "Drill bit", "Sander", "Glue", "Tape", "Cable"]


def random_export(rng):
    rows = []
    for k in range(rng.randint(1, 40)):
        name = rng.choice(WORDS)
        r = rng.random()
        if r < 0.25:
            name += f", M{rng.randint(2, 12)}"
        elif r < 0.35:
            name += f' "{rng.choice(["pro", "eco", "xl"])}"'
        elif r < 0.42:
            name += "\nsecond line"
        elif r < 0.5:
            name += f", {rng.randint(1, 9)}\" x {rng.randint(1, 9)}\""
        category = rng.choice(["Fasteners", "Tools", "Adhesives", "Electrical, misc", "Paint"])
        rows.append([f"S-{k:03d}", name, category, str(rng.randint(0, 999)),
                     f"{rng.randint(0, 99)}.{rng.randint(0, 99):02d}"])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["sku", "name", "category", "quantity", "unit_price"])
    for row in rows:
        w.writerow(row)
        if rng.random() < 0.05:
            buf.write("\n")  # a blank line
    return buf.getvalue(), rows


def reference_summary(rows):
    out = {}
    for _, _, cat, q, p in rows:
        n, tq, tv = out.get(cat, (0, 0, 0.0))
        out[cat] = (n + 1, tq + int(q), tv + int(q) * float(p))
    return out


def reference_format(summary):
    lines = [f"{'category':<20}{'items':>8}{'quantity':>10}{'value':>14}"]
    tn = tq = 0
    tv = 0.0
    for cat in sorted(summary):
        n, q, v = summary[cat]
        lines.append(f"{cat:<20}{n:>8}{q:>10}{v:>14.2f}")
        tn, tq, tv = tn + n, tq + q, tv + v
    lines.append(f"{'TOTAL':<20}{tn:>8}{tq:>10}{tv:>14.2f}")
    return "\n".join(lines) + "\n"


def exports():
    """The 60 exports: (text, rows)."""
    rng = random.Random(SEED)
    return [random_export(rng) for _ in range(60)]


def cases():
    """The API call's input: each export's text."""
    return [text for text, _ in exports()]


def expected(made):
    """Each export's items and summary, as the child reports them."""
    return [
        {"items": [[s, n, c, int(q), float(p)] for s, n, c, q, p in rows],
         "summary": {c: list(v) for c, v in reference_summary(rows).items()}}
        for _, rows in exports()
    ]


def report(k):
    """The command line's report on export ``k``."""
    return reference_format(reference_summary(exports()[k][1]))


def check(ck, label, want, got, options):
    """One check an export: the items equal, the summary's counts equal and values within
    1e-6."""
    if not isinstance(got, dict) or not isinstance(got.get("items"), list):
        ck.check(label, False, f"got {str(got)[:200]}")
        return
    want_items, items = want["items"], got["items"]
    if items != want_items:
        bad = next(i for i, (a, b) in enumerate(zip(want_items + [None] * 99,
                                                      items + [None] * 99)) if a != b)
        ck.check(label, False, f"item {bad}: expected {want_items[bad:bad + 1]}, "
                 f"got {items[bad:bad + 1]}")
        return
    summary, want_summary = got.get("summary"), want["summary"]
    try:
        ok = isinstance(summary, dict) and set(summary) == set(want_summary) and all(
            summary[c][:2] == want_summary[c][:2]
            and abs(summary[c][2] - want_summary[c][2]) <= 1e-6 for c in want_summary)
    except (TypeError, IndexError):
        ok = False
    ck.check(label, ok, "" if ok else f"summary {str(summary)[:300]} != {want_summary}")
