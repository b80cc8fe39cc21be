"""Validation of the built-in starter pack, end to end through palaestra.

Every task runs as a real episode: the Harbor loader reads it, ``CodeEnv`` puts it in a local
bubblewrap sandbox, the bash scaffold runs the policy's commands, the Harbor verifier scores it:

* ``nop`` (submit at once) scores 0 on every task;
* ``oracle`` (the reference solution, through the LLM boundary) scores 1;
* ``wrong:<name>``: plausible but wrong solutions (below) do not get full reward.

It also checks every ``task.toml`` and that the 18 (category, difficulty) pairs appear once each.
"""

from __future__ import annotations

import base64
import io
import tarfile
import tomllib
from pathlib import Path

import pytest

from palaestra import CodeEnv
from palaestra.env.registry import PACKS_DIR, load_tasks
from palaestra.env.sandbox_spec import local_plan
from palaestra.llm import NopPolicy, OraclePolicy, ScriptedPolicy
from palaestra.run import rollout
from tests.conftest import SUBMIT_ACTION, bash_action

PACK_DIR = PACKS_DIR / "starter"
CATEGORIES = [
    "algorithms",
    "data-querying",
    "debugging",
    "file-operations",
    "optimization",
    "software-engineering",
]
DIFFICULTIES = ["easy", "medium", "hard"]
ALLOWED_DOCKERFILE_INSTRUCTIONS = {"FROM", "WORKDIR", "COPY", "ENV"}

TASK_DIRS = sorted(p.parent for p in PACK_DIR.glob("*/task.toml"))
TASK_IDS = [p.name for p in TASK_DIRS]

# --------------------------------------------------------------------------------------------
# Wrong solutions: each is a bash script run as the agent (cwd /app, no /tests; /solution is
# mounted so that a near-miss can be written as "the reference plus one bug"). Each must apply
# cleanly (exit 0). Tasks whose verifier gives partial credit (reward.json with a fraction)
# only have to score below 1 for a wrong solution; every other task must score exactly 0.
# --------------------------------------------------------------------------------------------

PARTIAL_CREDIT = {
    "data-querying-easy-library-loans",
    "data-querying-medium-sales-queries",
    "file-operations-medium-dedupe-tree",
}

WRONG_SOLUTIONS: dict[str, dict[str, str]] = {
    "algorithms-easy-merge-intervals": {
        # assumes the input is already sorted
        "no-sort": r"""
cat > intervals.py <<'PY'
def merge_intervals(intervals):
    merged = []
    for s, e in intervals:
        if s > e:
            raise ValueError("bad interval")
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged
PY
""",
        # treats touching intervals ([1,3],[3,5]) as separate
        "strict-overlap": r"""
cat > intervals.py <<'PY'
def merge_intervals(intervals):
    pairs = sorted((s, e) for s, e in intervals)
    if any(s > e for s, e in pairs):
        raise ValueError("bad interval")
    merged = []
    for s, e in pairs:
        if merged and s < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged
PY
""",
    },
    "algorithms-medium-toll-budget-route": {
        # fastest route ignoring tolls, rejected afterwards if it is over budget
        "ignore-tolls": r"""
cat > routing.py <<'PY'
import heapq
def fastest_route(n, roads, src, dst, budget):
    if src == dst:
        return (0, [])
    adj = [[] for _ in range(n)]
    for i, (u, v, m, t) in enumerate(roads):
        adj[u].append((v, m, t, i))
    best, prev, heap = {src: 0}, {}, [(0, src)]
    while heap:
        d, u = heapq.heappop(heap)
        if d != best[u]:
            continue
        for v, m, t, i in adj[u]:
            if d + m < best.get(v, float("inf")):
                best[v] = d + m
                prev[v] = (u, i)
                heapq.heappush(heap, (d + m, v))
    if dst not in best:
        return None
    path, at = [], dst
    while at != src:
        at, i = prev[at]
        path.append(i)
    path.reverse()
    if sum(roads[i][3] for i in path) > budget:
        return None
    return (best[dst], path)
PY
""",
        # one label per city (the first, fastest arrival) instead of one per (city, toll)
        "one-label-per-city": r"""
cat > routing.py <<'PY'
import heapq
def fastest_route(n, roads, src, dst, budget):
    if src == dst:
        return (0, [])
    adj = [[] for _ in range(n)]
    for i, (u, v, m, t) in enumerate(roads):
        adj[u].append((v, m, t, i))
    done = set()
    heap = [(0, 0, src, [])]
    while heap:
        d, spent, u, path = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        if u == dst:
            return (d, path)
        for v, m, t, i in adj[u]:
            if spent + t <= budget and v not in done:
                heapq.heappush(heap, (d + m, spent + t, v, path + [i]))
    return None
PY
""",
    },
    "algorithms-hard-exact-calculator": {
        # the reference, but it tokenizes the whole input up front: a bad character is reported
        # even when an unexpected token comes before it
        "eager-lexer": r"""
bash /solution/solve.sh
python3 - <<'PY'
p = "calc.py"
s = open(p).read()
s = s.replace("        self.lex = _Lexer(text)\n",
              "        self.lex = _Lexer(text)\n        probe = _Lexer(text)\n"
              "        while probe.next()[0] != 'end':\n            pass\n", 1)
open(p, "w").write(s)
PY
""",
        # the reference, but decimal literals go through float
        "float-literals": r"""
bash /solution/solve.sh
sed -i 's/return ("num", Fraction(s\[start:j\]), start)/return ("num", Fraction(float(s[start:j])), start)/' calc.py
grep -q 'Fraction(float(' calc.py
""",
        # the reference, but unary minus binds tighter than ^ (-2^2 == 4)
        "unary-over-power": r"""
bash /solution/solve.sh
python3 - <<'PY'
p = "calc.py"
s = open(p).read()
s = s.replace('return ("neg", self.unary()) if tok[1] == "-" else self.unary()',
              'inner = self.unary()\n'
              '            if tok[1] == "-" and inner[0] == "pow":\n'
              '                return ("pow", ("neg", inner[1]), inner[2], inner[3])\n'
              '            return ("neg", inner) if tok[1] == "-" else inner', 1)
open(p, "w").write(s)
PY
grep -q 'inner = self.unary()' calc.py
""",
    },
    "data-querying-easy-library-loans": {
        # groups by title (editions merged), averages over all loans, drops cities without
        # late returns, counts loans instead of members
        "naive-queries": r"""
python3 load_db.py
python3 - <<'PY'
import json, sqlite3
con = sqlite3.connect("library.db")
one = lambda q: con.execute(q).fetchone()[0]
json.dump({
    "open_loans": one("SELECT COUNT(*) FROM loans WHERE returned_on IS NULL"),
    "most_borrowed_title": one("SELECT b.title FROM loans l JOIN books b ON b.id = l.book_id "
                               "GROUP BY b.title ORDER BY COUNT(*) DESC LIMIT 1"),
    "scifi_borrowers_2023": one("SELECT COUNT(*) FROM loans l JOIN books b ON b.id = l.book_id "
                                "WHERE b.genre = 'Science Fiction' AND l.loaned_on LIKE '2023%'"),
    "avg_loan_days": round(one("SELECT AVG(julianday(COALESCE(returned_on, '2024-03-01')) "
                               "- julianday(loaned_on)) FROM loans"), 2),
    "never_borrowed": [r[0] for r in con.execute(
        "SELECT id FROM members WHERE id NOT IN (SELECT member_id FROM loans) ORDER BY id")],
    "late_returns_by_city": dict(con.execute(
        "SELECT m.city, COUNT(*) FROM loans l JOIN members m ON m.id = l.member_id "
        "WHERE l.returned_on > l.due_on GROUP BY m.city").fetchall()),
}, open("answers.json", "w"))
PY
""",
    },
    "data-querying-medium-sales-queries": {
        # plausible first drafts: inner joins drop empty regions/categories, COUNT(*) after the
        # item join counts items, list price instead of the item price, refunded sales count,
        # MIN(date) joined back duplicates same-day first orders
        "first-drafts": r"""
mkdir -p queries && cd queries
R="i.quantity * i.unit_price_cents * (100 - COALESCE(i.discount_pct, 0)) / 100.0"
cat > q1.sql <<SQL
SELECT r.name AS region, ROUND(SUM($R) / 100.0, 2) AS revenue
FROM regions r JOIN customers c ON c.region_id = r.id
JOIN orders o ON o.customer_id = c.id AND o.status = 'paid'
JOIN order_items i ON i.order_id = o.id
GROUP BY r.id ORDER BY revenue DESC, region;
SQL
cat > q2.sql <<SQL
SELECT c.id, c.name, COUNT(*) AS orders FROM orders o JOIN customers c ON c.id = o.customer_id
WHERE o.status = 'paid' AND o.order_date LIKE '2024%' GROUP BY c.id ORDER BY orders DESC LIMIT 5;
SQL
cat > q3.sql <<SQL
SELECT substr(o.order_date, 1, 7) AS month, COUNT(*) AS orders, ROUND(SUM($R) / 100.0, 2)
FROM orders o JOIN order_items i ON i.order_id = o.id
WHERE o.status = 'paid' AND o.order_date LIKE '2024%' GROUP BY month ORDER BY month;
SQL
cat > q4.sql <<SQL
SELECT p.id, p.name FROM products p WHERE p.id NOT IN (SELECT product_id FROM order_items)
ORDER BY p.id;
SQL
cat > q5.sql <<SQL
WITH rev AS (SELECT p.category, SUM(i.quantity * p.list_price_cents) AS cents
             FROM products p JOIN order_items i ON i.product_id = p.id GROUP BY p.category)
SELECT category, ROUND(cents / 100.0, 2) AS revenue,
       ROUND(100.0 * cents / (SELECT SUM(cents) FROM rev), 1) AS share_pct
FROM rev ORDER BY revenue DESC, category;
SQL
cat > q6.sql <<SQL
WITH firsts AS (SELECT customer_id, MIN(order_date) AS d FROM orders WHERE status = 'paid'
                GROUP BY customer_id)
SELECT f.customer_id, f.d, ROUND(COALESCE(SUM($R), 0) / 100.0, 2)
FROM firsts f JOIN orders o ON o.customer_id = f.customer_id AND o.order_date = f.d
 AND o.status = 'paid'
LEFT JOIN order_items i ON i.order_id = o.id
GROUP BY f.customer_id ORDER BY f.customer_id;
SQL
""",
        # the reference answers, hard-coded from the visible database
        "hard-coded-results": r"""
python3 make_db.py
bash /solution/solve.sh
python3 - <<'PY'
import sqlite3
con = sqlite3.connect("sales.db")
for i in range(1, 7):
    path = f"queries/q{i}.sql"
    rows = con.execute(open(path).read()).fetchall()
    values = ", ".join("(" + ", ".join(repr(v) for v in r) + ")" for r in rows)
    open(path, "w").write(f"SELECT * FROM (VALUES {values})" if rows else "SELECT 1 WHERE 0")
PY
""",
    },
    "data-querying-hard-clickstream-report": {
        # the reference, but only one level of aliases is followed
        "one-alias-level": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("report.py").read()
s = s.replace("WHERE c.depth < 1000", "WHERE c.depth < 1")
open("report.py", "w").write(s)
PY
grep -q "c.depth < 1$" report.py
""",
        # the reference, but a gap of exactly 30 minutes starts a new session
        "gap-inclusive": r"""
bash /solution/solve.sh
sed -i 's/t - prev_t > 1800/t - prev_t >= 1800/' report.py
grep -q '>= 1800' report.py
""",
        # the reference, but purchases use the rate of the local (not UTC) calendar date
        "local-date-fx": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("report.py").read()
s = s.replace("SELECT r.user_id, CAST(strftime('%s', e.ts) AS INTEGER) AS epoch, e.event_id,",
              "SELECT r.user_id, CAST(strftime('%s', e.ts) AS INTEGER) AS epoch, substr(e.ts, 1, 10) AS event_id,")
s = s.replace("eur = to_eur(amount, cur, day)", "eur = to_eur(amount, cur, _eid)")
open("report.py", "w").write(s)
PY
grep -q 'to_eur(amount, cur, _eid)' report.py
""",
    },
    "debugging-easy-inventory-csv": {
        # silences the crash by skipping rows that do not split into 5 fields
        "skip-bad-rows": r"""
python3 - <<'PY'
p = "inventory/loader.py"
s = open(p).read()
s = s.replace("        items.append(parse_row(line.split(\",\")))",
              "        fields = line.split(\",\")\n        if len(fields) != 5:\n"
              "            continue\n        items.append(parse_row(fields))")
open(p, "w").write(s)
PY
grep -q "len(fields) != 5" inventory/loader.py
python3 -m inventory summary items.csv
""",
        # handles quoted commas with a regex, but not doubled quotes or line breaks
        "regex-split": r"""
python3 - <<'PY'
p = "inventory/loader.py"
s = open(p).read()
s = s.replace("from dataclasses import dataclass", "import re\nfrom dataclasses import dataclass")
s = s.replace("parse_row(line.split(\",\"))",
              "parse_row([f.strip('\"') for f in re.findall(r'(\"[^\"]*\"|[^,]*)(?:,|$)', line)][:5])")
open(p, "w").write(s)
PY
grep -q "re.findall" inventory/loader.py
""",
    },
    "debugging-medium-expense-splitter": {
        # fixes the rounding and the remainder but not the shared default participants list
        "misses-shared-list": r"""
sed -i 's/return int(float(text.strip().replace(",", "")) \* 100)/return round(float(text.strip().replace(",", "")) * 100)/' splitter/money.py
python3 - <<'PY'
p = "splitter/split.py"
s = open(p).read()
s = s.replace("    share = amount // n\n    return [share] * n",
              "    share, extra = divmod(amount, n)\n"
              "    return [share + 1 if i < extra else share for i in range(n)]")
open(p, "w").write(s)
PY
grep -q divmod splitter/split.py
""",
        # the reference, but the extra cents go to the last participants
        "remainder-to-last": r"""
bash /solution/solve.sh
sed -i 's/share + 1 if i < extra else share/share + 1 if i >= n - extra else share/' splitter/split.py
grep -q 'i >= n - extra' splitter/split.py
""",
    },
    "debugging-hard-kvstore-recovery": {
        # the reference without the truncation of a torn tail (fixes 3 of the 4 causes)
        "no-tail-truncation": r"""
bash /solution/solve.sh
python3 - <<'PY'
p = "kvstore/log.py"
s = open(p).read()
s = s.replace("            os.truncate(self.path, offset)", "            pass")
open(p, "w").write(s)
PY
""",
        # the reference, but compaction reopens nothing (the stale-handle bug stays)
        "stale-handle-after-compact": r"""
bash /solution/solve.sh
python3 - <<'PY'
p = "kvstore/store.py"
s = open(p).read()
s = s.replace("        self._log.close()\n        try:\n", "        try:\n")
s = s.replace("            self._log.open()  # append to the new file, not the replaced one",
              "            pass")
open(p, "w").write(s)
PY
""",
        # hides the Unicode problem by encoding keys and values as ASCII escapes
        "ascii-escape-workaround": r"""
bash /solution/solve.sh
python3 - <<'PY'
p = "kvstore/record.py"
s = open(p).read()
s = s.replace('kb, vb = key.encode("utf-8"), value.encode("utf-8")',
              'kb, vb = key.encode("unicode_escape"), value.encode("unicode_escape")')
s = s.replace('return op, kb.decode("utf-8"), vb.decode("utf-8"), end',
              'return op, kb.decode("unicode_escape"), vb.decode("unicode_escape"), end')
open(p, "w").write(s)
PY
""",
    },
    "file-operations-easy-archive-logs": {
        # files every name that matches the pattern, without checking that the date exists
        "no-date-check": r"""
mkdir -p archive/unsorted
for path in incoming/*; do
  name=$(basename "$path")
  if [[ $name =~ ^([a-z0-9]+(-[a-z0-9]+)*)-([0-9]{2})-([0-9]{2})-([0-9]{4})\.log$ ]]; then
    s=${BASH_REMATCH[1]} d=${BASH_REMATCH[3]} m=${BASH_REMATCH[4]} y=${BASH_REMATCH[5]}
    mkdir -p "archive/$s/$y/$m" && mv "$path" "archive/$s/$y/$m/$s-$y-$m-$d.log"
  else
    mv "$path" archive/unsorted/
  fi
done
""",
        # splits the service at the first dash, so auth-api files are misfiled
        "first-dash-service": r"""
python3 - <<'PY'
import datetime, os, shutil
os.makedirs("archive/unsorted", exist_ok=True)
for name in os.listdir("incoming"):
    dest = f"archive/unsorted/{name}"
    parts = name[:-4].split("-") if name.endswith(".log") else []
    if len(parts) >= 4 and all(p.isdigit() for p in parts[-3:]):
        svc, rest = parts[0], parts[-3:]
        d, m, y = rest
        try:
            datetime.date(int(y), int(m), int(d))
            if len(d) == 2 and len(m) == 2 and len(y) == 4 and svc.islower():
                dest = f"archive/{svc}/{y}/{m}/{svc}-{y}-{m}-{d}.log"
        except ValueError:
            pass
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.move(f"incoming/{name}", dest)
PY
""",
        # right layout, but copies instead of moving
        "copy-not-move": r"""
sed 's/mv -n --/cp --/' /solution/solve.sh | bash
""",
    },
    "file-operations-medium-dedupe-tree": {
        # the reference, but the keeper is the first path in os.walk order, links are absolute
        "walk-order-absolute-links": r"""
bash /solution/solve.sh >/dev/null 2>&1 || true
rm -rf shared && mkdir shared
python3 - <<'PY'
s = open("dedupe.py").read()
s = s.replace("keeper = min(group)", "keeper = group[0]")
s = s.replace("target = os.path.relpath(keep, os.path.dirname(dup))",
              "target = os.path.abspath(keep)")
open("dedupe.py", "w").write(s)
PY
""",
        # groups by file name and size instead of content
        "name-and-size": r"""
cat > dedupe.py <<'PY'
import os, sys
root = sys.argv[1]
seen = {}
for dirpath, dirs, files in sorted(os.walk(root)):
    for name in sorted(files):
        full = os.path.join(dirpath, name)
        if os.path.islink(full) or os.path.getsize(full) == 0:
            continue
        key = (name, os.path.getsize(full))
        if key in seen:
            os.remove(full)
            os.symlink(os.path.relpath(seen[key], dirpath), full)
            print(f"{os.path.relpath(full, root)}\t{os.path.relpath(seen[key], root)}")
        else:
            seen[key] = full
PY
python3 dedupe.py shared
""",
    },
    "file-operations-hard-snapshot-backup": {
        # the reference, but directory modes are applied before the files are written and the
        # manifest is written as UTF-8 text (breaks on non-UTF-8 names)
        "utf8-manifest": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("snap.py").read()
s = s.replace('json.dump({"entries": entries}, f)', 'json.dump({"entries": entries}, f, ensure_ascii=False)')
s = s.replace('encoding="ascii"', 'encoding="utf-8"')
open("snap.py", "w").write(s)
PY
""",
        # the reference, but file mtimes are not restored
        "no-mtime": r"""
bash /solution/solve.sh
sed -i 's/            os.utime(target, ns=(e\["mtime_ns"\], e\["mtime_ns"\]))/            pass/' snap.py
grep -q '^            pass$' snap.py
""",
        # the reference, but symlinks to directories are skipped
        "drops-dir-links": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("snap.py").read()
s = s.replace(" + [d for d in dirnames\n                                         if os.path.islink(os.path.join(dirpath, d))]", "")
open("snap.py", "w").write(s)
PY
""",
        # the reference, but every stored file gets a fresh object (no deduplication)
        "no-dedup": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("snap.py").read()
s = s.replace("        digest = h.hexdigest()\n",
              "        digest = h.hexdigest() + '-' + os.path.basename(tmp)[-8:]\n")
s = s.replace("        if os.path.exists(final):\n", "        if False:\n")
open("snap.py", "w").write(s)
PY
grep -q "if False:" snap.py
""",
    },
    "optimization-easy-order-report": {
        # fast, but a plain dict keeps the LAST row of a duplicated customer id
        "dict-keeps-last": r"""
bash /solution/solve.sh
sed -i 's/        first_index.setdefault(customer\["id"\], idx)  # the first row wins, as before/        first_index[customer["id"]] = idx/' report.py
grep -q 'first_index\[customer\["id"\]\] = idx' report.py
""",
        # a cosmetic speed-up that keeps the quadratic scan
        "still-quadratic": r"""
python3 - <<'PY'
s = open("report.py").read()
s = s.replace('            if customer["id"] == order["customer_id"]:',
              '            if customer["id"] is cid or customer["id"] == cid:')
s = s.replace('        match = None\n', '        match = None\n        cid = order["customer_id"]\n')
open("report.py", "w").write(s)
PY
grep -q 'is cid' report.py
""",
    },
    "optimization-medium-moving-median": {
        # fixes the quadratic list building but still sorts every window
        "sort-each-window": r"""
sed -i 's/            values = values + \[int(line)\]/            values.append(int(line))/' smooth.py
grep -q 'values.append' smooth.py
""",
        # fast (bisect window), but the median comes from statistics.median: "4.0", not "4"
        "statistics-median": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("smooth.py").read()
s = s.replace("import bisect\n", "import bisect\nimport statistics\n")
s = s.replace("out.append(format_half(window[k // 2 - 1] + window[k // 2]))",
              "out.append(str(statistics.median(window[k // 2 - 1:k // 2 + 1])))")
open("smooth.py", "w").write(s)
PY
grep -q 'statistics.median' smooth.py
""",
    },
    "optimization-hard-access-log-report": {
        # fixes three of the four hotspots; the first-appearance list scan stays
        "misses-client-list": r"""
bash /solution/solve.sh
sed -i 's/        if req.ip not in seen:/        if req.ip not in clients:/' analyze.py
grep -q 'if req.ip not in clients:' analyze.py
""",
        # fast, but sessions are computed on requests sorted by time, not in file order
        "time-sorted-sessions": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("analyze.py").read()
s = s.replace("    for req in requests:\n        prev = last_seen.get(req.ip)",
              "    for req in sorted(requests, key=lambda r: r.ts):\n"
              "        prev = last_seen.get(req.ip)")
open("analyze.py", "w").write(s)
PY
grep -q 'sorted(requests, key=lambda r: r.ts)' analyze.py
""",
    },
    "software-engineering-easy-env-overrides": {
        # the reference, but the bool branch never runs: bools fall into the int branch
        # (bool is a subclass of int), as when ints are checked first
        "int-before-bool": r"""
bash /solution/solve.sh
sed -i 's/    if isinstance(current, bool):/    if isinstance(current, bool) and False:/' appconfig/loader.py
grep -q 'isinstance(current, bool) and False' appconfig/loader.py
""",
        # the reference, but section and key are matched case-sensitively after lower-casing
        # the variable (misses sections written with capitals in the file)
        "lowercase-only": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("appconfig/loader.py").read()
s = s.replace("    sections = {s.lower(): s for s in config}", "    sections = {s: s for s in config}")
open("appconfig/loader.py", "w").write(s)
PY
grep -q 'sections = {s: s for s in config}' appconfig/loader.py
""",
    },
    "software-engineering-medium-todo-due-dates": {
        # the reference, but new ids are still max(id) + 1 (ids reused after a removal)
        "reuses-ids": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("todo/store.py").read()
s = s.replace('    task_id = data["next_id"]',
              '    task_id = max((t["id"] for t in data["tasks"]), default=0) + 1')
open("todo/store.py", "w").write(s)
PY
grep -q 'max((t\["id"\] for t in data\["tasks"\])' todo/store.py
""",
        # the reference, but tasks without a due date sort first
        "undated-first": r"""
bash /solution/solve.sh
sed -i 's/"due": lambda t: (t\["due"\] is None, t\["due"\] or "", t\["id"\])/"due": lambda t: (t["due"] or "", t["id"])/' todo/cli.py
grep -q '"due": lambda t: (t\["due"\] or "", t\["id"\])' todo/cli.py
""",
        # the reference, but list migrates (rewrites) a version-1 file
        "list-writes-file": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("todo/cli.py").read()
s = s.replace('    tasks = store.load()["tasks"]\n', '    data = store.load()\n    store.save(data)\n    tasks = data["tasks"]\n')
open("todo/cli.py", "w").write(s)
PY
grep -q 'store.save(data)\n    tasks' todo/cli.py || grep -q 'tasks = data\["tasks"\]' todo/cli.py
""",
    },
    "software-engineering-hard-template-blocks": {
        # the reference, but single quotes are not escaped (html.escape(quote=False))
        "no-quote-escaping": r"""
bash /solution/solve.sh
sed -i 's/else html.escape(text))/else html.escape(text, quote=False))/' minitpl/engine.py
grep -q 'quote=False' minitpl/engine.py
""",
        # the reference, but loop variables are written into the enclosing scope (they leak
        # out of the loop and clobber outer names)
        "leaky-loop-scope": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("minitpl/engine.py").read()
s = s.replace('                scopes.append({name: item, "loop": loop})\n',
              '                scopes[-1].update({name: item, "loop": loop})\n')
s = s.replace('                _render(body, scopes, out)\n                scopes.pop()\n',
              '                _render(body, scopes, out)\n')
open("minitpl/engine.py", "w").write(s)
PY
grep -q 'scopes\[-1\].update' minitpl/engine.py
""",
        # the reference, but an unclosed block is reported at the end of the template
        "unclosed-at-eof": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("minitpl/engine.py").read()
s = s.replace('raise TemplateSyntaxError(f"unclosed {stack[-1][0]}", stack[-1][1])',
              'raise TemplateSyntaxError(f"unclosed {stack[-1][0]}", source.count(chr(10)) + 1)')
open("minitpl/engine.py", "w").write(s)
PY
grep -q 'source.count(chr(10)) + 1' minitpl/engine.py
""",
    },
}


# --------------------------------------------------------------------------------------------
# Episodes
# --------------------------------------------------------------------------------------------

TASKS = load_tasks("starter")


def with_solution(script: str, task_id: str) -> str:
    """A command that unpacks the task's solution/ to /solution, then runs ``script``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(PACK_DIR / task_id / "solution", arcname=".")
    packed = base64.b64encode(buf.getvalue()).decode()
    return (
        "mkdir -p /solution && base64 -d <<'EOF_SOLUTION' | tar -xz -C /solution\n"
        f"{packed}\nEOF_SOLUTION\nset -e\n{script}"
    )


async def run_episode(task_id: str, policy) -> tuple[float, dict]:
    async with CodeEnv(TASKS) as env:
        episode = await rollout(env, policy, options={"task_id": task_id})
    info = episode.info
    log = f"status={info['status']} error={info['error']}\n{info['verifier']['output'][-4000:]}"
    assert info["status"] != "error", log
    return episode.reward, info


SCENARIOS = (
    [(t, "nop") for t in TASK_IDS]
    + [(t, "oracle") for t in TASK_IDS]
    + [(t, f"wrong:{name}") for t in TASK_IDS for name in WRONG_SOLUTIONS.get(t, {})]
)


@pytest.mark.parametrize(("task_id", "scenario"), SCENARIOS, ids=[f"{t}-{s}" for t, s in SCENARIOS])
async def test_scenario(task_id: str, scenario: str) -> None:
    if scenario == "nop":
        reward, info = await run_episode(task_id, NopPolicy())
        assert reward == 0, f"the untouched workspace must score 0, got {reward}"
    elif scenario == "oracle":
        reward, info = await run_episode(task_id, OraclePolicy(TASKS))
        assert reward == 1, f"the reference solution must score 1, got {reward}: {info['verifier']}"
    else:
        script = WRONG_SOLUTIONS[task_id][scenario.removeprefix("wrong:")]
        policy = ScriptedPolicy([bash_action(with_solution(script, task_id)), SUBMIT_ACTION])
        reward, info = await run_episode(task_id, policy)
        applied = info["trajectory"][0]
        # a solution (reference or deliberately wrong) that does not even apply proves nothing
        assert applied["exit_code"] == 0, f"the wrong solution failed to apply: {applied}"
        if task_id in PARTIAL_CREDIT:
            assert reward < 1, f"a wrong solution must not get full credit, got {reward}"
        else:
            assert reward == 0, f"a wrong solution must score 0, got {reward}"


# --------------------------------------------------------------------------------------------
# Static checks
# --------------------------------------------------------------------------------------------


def load_toml(task_dir: Path) -> dict:
    with open(task_dir / "task.toml", "rb") as f:
        return tomllib.load(f)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_task_layout_and_metadata(task_id: str) -> None:
    task_dir = PACK_DIR / task_id
    cfg = load_toml(task_dir)
    meta = cfg["metadata"]
    assert cfg["version"] == "1.0"
    assert meta["category"] in CATEGORIES
    assert meta["difficulty"] in DIFFICULTIES
    assert meta["author_name"] == "palaestra"
    assert isinstance(meta["tags"], list) and meta["tags"]
    assert all(isinstance(t, str) and t for t in meta["tags"])
    assert task_id.startswith(f"{meta['category']}-{meta['difficulty']}-"), task_id
    assert 0 < cfg["verifier"]["timeout_sec"] <= 120
    assert cfg["agent"]["timeout_sec"] > 0
    env = cfg["environment"]
    assert env["cpus"] >= 1 and env["memory_mb"] >= 512 and env["storage_mb"] > 0
    for rel in ("instruction.md", "environment/Dockerfile", "tests/test.sh", "solution/solve.sh"):
        assert (task_dir / rel).is_file(), f"{task_id}: {rel} is missing"
    assert len((task_dir / "instruction.md").read_text().strip()) > 200
    for line in (task_dir / "environment" / "Dockerfile").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            assert line.split()[0].upper() in ALLOWED_DOCKERFILE_INSTRUCTIONS, line
    task = TASKS.get(task_id)  # what the Harbor loader makes of it
    assert (task.category, task.difficulty) == (meta["category"], meta["difficulty"])
    assert task.network == task.verifier_network == "none", "starter tasks run offline"
    assert local_plan(task).workdir == "/app" and local_plan(task).files


def test_pack_covers_every_category_and_tier_once() -> None:
    pairs = [
        (load_toml(d)["metadata"]["category"], load_toml(d)["metadata"]["difficulty"])
        for d in TASK_DIRS
    ]
    assert sorted(pairs) == sorted((c, t) for c in CATEGORIES for t in DIFFICULTIES)
    for task_id in WRONG_SOLUTIONS:
        assert task_id in TASK_IDS, f"wrong solutions for an unknown task {task_id}"
    assert set(TASK_IDS) <= set(WRONG_SOLUTIONS), "every task needs at least one wrong solution"
    assert PARTIAL_CREDIT <= set(TASK_IDS)


def test_pack_is_small() -> None:
    total = sum(p.stat().st_size for p in PACK_DIR.rglob("*") if p.is_file())
    assert total < 1_000_000, f"the starter pack is {total} bytes"
