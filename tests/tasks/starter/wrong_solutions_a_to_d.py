"""Wrong solutions for the starter tasks of the categories algorithms, data-querying and
debugging (see :mod:`tests.tasks.starter.pack`)."""

WRONG_SOLUTIONS_A_TO_D: dict[str, dict[str, str]] = {
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
        # hostile (issue 29): the right answers kept in a file only root may read, answers.json
        # a link to it (the checker reads as root: a followed link would score 1)
        "answers-link-to-root-file": r"""
bash /solution/solve.sh >/dev/null
mkdir -p /tmp/kept && chmod 700 /tmp/kept
mv answers.json /tmp/kept/answers.json && chmod 600 /tmp/kept/answers.json
ln -s /tmp/kept/answers.json answers.json
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
        # an attack (issue 29): the report is a FIFO (the checker would block reading it)
        "fifo-report": r"""
cat > report.py <<'PY'
import os, sys
os.mkfifo(sys.argv[2])
PY
""",
        # an attack (issue 29): the reference's report, then OUT_JSON replaced by a link to a
        # file only root may read (the checker reads the output without following links)
        "linked-report": r"""
bash /solution/solve.sh
mv report.py real_report.py
cat > report.py <<'PY'
import os, runpy, sys
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "real_report.py"),
               run_name="__main__")
os.rename(sys.argv[2], sys.argv[2] + ".real")
os.symlink(sys.argv[2] + ".real", sys.argv[2])
PY
""",
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
}
