"""Reference implementation of the clickstream report, in plain Python (no SQL logic)."""

import datetime as dt
import sqlite3
from decimal import Decimal


def parse_ts(text):
    t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t.astimezone(dt.UTC)


def build_report(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    users = dict(con.execute("SELECT user_id, country FROM users"))
    alias = dict(con.execute("SELECT alias_id, target_id FROM user_aliases"))

    def resolve(ref):
        seen = set()
        while ref not in users:
            if ref in seen or ref not in alias:
                return None
            seen.add(ref)
            ref = alias[ref]
        return ref

    rates = {}
    for day, cur, rate in con.execute("SELECT day, currency, rate_to_eur FROM fx_rates"):
        rates.setdefault(cur, []).append((day, rate))
    for cur in rates:
        rates[cur].sort()

    def to_eur(amount, cur, day):
        if cur == "EUR":
            return float(amount)
        best = None
        for d, r in rates[cur]:
            if d <= day:
                best = r
        return float(amount) * best

    seen_ids = set()
    per_user = {u: [] for u in users}
    for eid, ref, ts, kind, amount, cur in con.execute(
            "SELECT event_id, user_ref, ts, type, amount, currency FROM events ORDER BY rowid"):
        if eid in seen_ids:
            continue
        seen_ids.add(eid)
        uid = resolve(ref)
        if uid is None:
            continue
        per_user[uid].append((parse_ts(ts), eid, kind, amount, cur))
    n_events = 0
    durations = []
    funnel = {"view": 0, "add_to_cart": 0, "purchase": 0}
    dau = {}
    country_rev = {c: 0.0 for c in users.values()}
    report_users = {}
    for uid, evs in per_user.items():
        evs.sort(key=lambda e: (e[0], e[1]))
        n_events += len(evs)
        sessions = []
        for e in evs:
            if not sessions or (e[0] - sessions[-1][-1][0]).total_seconds() > 1800:
                sessions.append([])
            sessions[-1].append(e)
            dau.setdefault(e[0].date().isoformat(), set()).add(uid)
        revenue, purchases = 0.0, 0
        for s in sessions:
            durations.append((s[-1][0] - s[0][0]).total_seconds())
            stage = 0
            for e in s:
                if stage == 0 and e[2] == "view":
                    stage = 1
                elif stage == 1 and e[2] == "add_to_cart":
                    stage = 2
                elif stage == 2 and e[2] == "purchase":
                    stage = 3
            for k, name in enumerate(("view", "add_to_cart", "purchase"), 1):
                funnel[name] += stage >= k
            for e in s:
                if e[2] == "purchase":
                    purchases += 1
                    revenue += to_eur(Decimal(e[3]), e[4], e[0].date().isoformat())
        country_rev[users[uid]] += revenue
        report_users[uid] = {"sessions": len(sessions), "purchases": purchases,
                             "revenue_eur": round(revenue, 2)}
    durations.sort()
    n = len(durations)
    median = 0 if n == 0 else (durations[n // 2] if n % 2 else
                               (durations[n // 2 - 1] + durations[n // 2]) / 2)
    return {
        "events": n_events,
        "sessions": n,
        "median_session_seconds": median,
        "funnel": funnel,
        "daily_active_users": {d: len(u) for d, u in sorted(dau.items())},
        "revenue_eur_by_country": {c: round(v, 2) for c, v in sorted(country_rev.items())},
        "users": report_users,
    }


if __name__ == "__main__":  # as the task's report.py is run: WAREHOUSE_DB OUT_JSON
    import json
    import sys

    with open(sys.argv[2], "w") as f:
        json.dump(build_report(sys.argv[1]), f)
