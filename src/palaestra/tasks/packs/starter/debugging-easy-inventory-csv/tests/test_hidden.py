"""Hidden tests: random RFC 4180 exports (quoted commas, doubled quotes, line breaks inside
fields, blank lines) through the API (in a child process) and through the CLI."""

import csv
import io
import json
import os
import random
import subprocess
import sys
import tempfile

CHILD = r'''
import json, sys
sys.path.insert(0, "/app")
from inventory import load_items, summarize
out = []
for path in json.load(open(sys.argv[1])):
    items = load_items(path)
    out.append({"items": [[i.sku, i.name, i.category, i.quantity, i.unit_price] for i in items],
                "summary": {k: list(v) for k, v in summarize(items).items()}})
json.dump(out, open(sys.argv[2], "w"))
'''

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


def main():
    rng = random.Random(5150)
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        os.chown(d, 65534, 65534)  # the agent's code runs as nobody
        paths, expected = [], []
        for k in range(60):
            text, rows = random_export(rng)
            path = os.path.join(d, f"export_{k}.csv")
            with open(path, "w", newline="") as f:
                f.write(text)
            paths.append(path)
            expected.append(rows)
        inp, outp = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        with open(inp, "w") as f:
            json.dump(paths, f)
        proc = subprocess.run([sys.executable, "-I", "-c", CHILD, inp, outp], cwd="/app", user=65534, group=65534, extra_groups=[],
                              capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            print("FAIL: load_items/summarize raised:\n" + proc.stderr[-2000:])
            return 1
        with open(outp) as f:
            results = json.load(f)
        for k, (rows, got) in enumerate(zip(expected, results)):
            want_items = [[s, n, c, int(q), float(p)] for s, n, c, q, p in rows]
            want_summary = {c: list(v) for c, v in reference_summary(rows).items()}
            if got["items"] != want_items:
                failures += 1
                bad = next(i for i, (a, b) in enumerate(zip(want_items + [None] * 99,
                                                              got["items"] + [None] * 99)) if a != b)
                print(f"FAIL export {k}: item {bad}: expected {want_items[bad:bad + 1]}, "
                      f"got {got['items'][bad:bad + 1]}")
            elif set(got["summary"]) != set(want_summary) or any(
                    got["summary"][c][:2] != want_summary[c][:2]
                    or abs(got["summary"][c][2] - want_summary[c][2]) > 1e-6 for c in want_summary):
                failures += 1
                print(f"FAIL export {k}: summary {got['summary']} != {want_summary}")
        for k in (0, 1, 2, 3, 4):  # and the command line
            proc = subprocess.run([sys.executable, "-E", "-s", "-m", "inventory", "summary", paths[k]],
                                  cwd="/app", user=65534, group=65534, extra_groups=[], capture_output=True, text=True, timeout=30)
            want = reference_format(reference_summary(expected[k]))
            if proc.returncode != 0 or proc.stdout != want:
                failures += 1
                print(f"FAIL cli on export {k}: rc={proc.returncode}\n{proc.stdout}{proc.stderr[-800:]}"
                      f"\nexpected:\n{want}")
    print("all checks passed" if not failures else f"{failures} checks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
