"""Generator of clickstream warehouses (hidden from the agent; the workspace dump came from it).

build(path, seed, n_users, n_events) writes a SQLite database with the quirks the task
describes: duplicated event rows, mixed timestamp formats and offsets, alias chains,
unresolvable user references, and FX rates with gaps.
"""

import datetime as dt
import random
import sqlite3

SCHEMA = """
CREATE TABLE users (user_id TEXT PRIMARY KEY, country TEXT NOT NULL, signup_ts TEXT NOT NULL);
CREATE TABLE user_aliases (alias_id TEXT PRIMARY KEY, target_id TEXT NOT NULL);
CREATE TABLE events (event_id TEXT NOT NULL, user_ref TEXT NOT NULL, ts TEXT NOT NULL,
                     type TEXT NOT NULL, amount TEXT, currency TEXT);
CREATE TABLE fx_rates (day TEXT NOT NULL, currency TEXT NOT NULL, rate_to_eur REAL NOT NULL,
                       PRIMARY KEY (day, currency));
"""
COUNTRIES = ["DE", "FR", "GB", "US", "IN", "BR", "JP"]
CURRENCY = {"DE": "EUR", "FR": "EUR", "GB": "GBP", "US": "USD", "IN": "USD", "BR": "USD",
            "JP": "USD"}
OFFSETS = [0, 60, 120, -300, -240, 330, 540, -180]
START = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)


def fmt(rng, t):
    """Render an aware UTC datetime in one of the formats found in the warehouse."""
    style = rng.random()
    if style < 0.3:
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")
    if style < 0.5:
        return t.strftime("%Y-%m-%d %H:%M:%S")
    off = dt.timedelta(minutes=rng.choice(OFFSETS))
    local = (t + off).replace(tzinfo=dt.timezone(off))
    return local.isoformat(timespec="seconds")


def build(path, seed, n_users=40, n_events=900, days=10):
    rng = random.Random(seed)
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    users = []
    for i in range(n_users):
        uid = f"u{seed % 97:02d}{i:04d}"
        country = COUNTRIES[i % len(COUNTRIES)] if i < len(COUNTRIES) else rng.choice(COUNTRIES)
        users.append((uid, country, (START - dt.timedelta(days=rng.randint(1, 300))).isoformat()))
    users.append((f"u{seed % 97:02d}idle", "CA", START.isoformat()))  # no events, own country
    con.executemany("INSERT INTO users VALUES (?, ?, ?)", users)
    aliases = []
    refs = {u[0]: [u[0]] for u in users}
    for k, u in enumerate(rng.sample(users[:-1], n_users // 3)):
        a1 = f"dev-{seed}-{k}a"
        aliases.append((a1, u[0]))
        refs[u[0]].append(a1)
        if k % 3 == 0:  # a chain: alias -> alias -> user
            a2 = f"dev-{seed}-{k}b"
            aliases.append((a2, a1))
            refs[u[0]].append(a2)
    rng.shuffle(aliases)
    con.executemany("INSERT INTO user_aliases VALUES (?, ?)", aliases)
    rates = []
    for d in range(-3, days + 1):
        day = (START + dt.timedelta(days=d)).date()
        if day.weekday() >= 5 and d > -3:
            continue  # no rates at weekends: use the latest earlier day
        rates.append((day.isoformat(), "USD", round(0.9 + rng.random() * 0.05, 4)))
        rates.append((day.isoformat(), "GBP", round(1.15 + rng.random() * 0.05, 4)))
    con.executemany("INSERT INTO fx_rates VALUES (?, ?, ?)", rates)
    events = []
    eid = 0
    active = users[:-1]
    while len(events) < n_events:
        uid, country, _ = rng.choice(active)
        t = START + dt.timedelta(seconds=rng.randint(0, days * 86400 - 7200))
        # a visit: a burst of events, gaps mostly short, sometimes right at the 30 min limit
        for _ in range(rng.randint(1, 9)):
            eid += 1
            kind = rng.choices(["view", "add_to_cart", "purchase", "login", "search"],
                               [10, 5, 3, 2, 3])[0]
            amount = currency = None
            if kind == "purchase":
                currency = CURRENCY[country]
                amount = f"{rng.randint(1, 300)}.{rng.randint(0, 99):02d}"
            events.append((f"e{seed}-{eid:06d}", rng.choice(refs[uid]), fmt(rng, t), kind,
                           amount, currency))
            if rng.random() < 0.05:
                events.append(events[-1])  # the collector retried: same event twice
            gap = rng.choices([rng.randint(0, 900), 1800, 1801, rng.randint(1802, 9000)],
                              [12, 1, 1, 2])[0]
            t += dt.timedelta(seconds=gap)
    for k in range(5):  # events from devices nobody can resolve
        events.append((f"e{seed}-x{k}", f"ghost-{k}", fmt(rng, START), "view", None, None))
    rng.shuffle(events)
    con.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)", events)
    con.commit()
    con.close()


def warehouse(rng, seed, n_users, n_events, days):
    """{"warehouse.db": the database's bytes}, as :func:`build` makes it from ``seed`` (the
    hidden test's checker makes the generated warehouses again with this; ``rng`` is
    ``random.Random(seed)``, which :func:`build` starts from too)."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "warehouse.db")
        build(path, seed, n_users=n_users, n_events=n_events, days=days)
        with open(path, "rb") as f:
            return {"warehouse.db": f.read()}


#: The hand-made edge-case warehouse (alias chains, offsets, 30-minute boundaries, FX gaps).
EDGE_ROWS = {
    "users": [("A", "DE", "2024-01-01"), ("B", "US", "2024-01-01"), ("C", "GB", "2024-01-01"),
              ("D", "JP", "2024-01-01")],
    "user_aliases": [("a3", "a2"), ("a1", "A"), ("a2", "a1"), ("b1", "B")],
    "fx_rates": [("2024-03-01", "USD", 0.9), ("2024-03-04", "USD", 0.8),
                 ("2024-03-01", "GBP", 1.2)],
    "events": [
        ("e01", "A", "2024-03-01T10:00:00Z", "view", None, None),
        ("e02", "a1", "2024-03-01T11:30:00+01:00", "add_to_cart", None, None),  # +1800 s
        ("e03", "a3", "2024-03-01 11:00:00", "purchase", "10.00", "EUR"),        # +1800 s
        ("e04", "A", "2024-03-01T11:30:01Z", "view", None, None),                # +1801 s
        ("e04", "A", "2024-03-01T11:30:01Z", "view", None, None),
        ("e05", "b1", "2024-03-02T23:50:00-05:00", "add_to_cart", None, None),
        ("e06", "B", "2024-03-03T05:00:00Z", "view", None, None),
        ("e07", "b1", "2024-03-03T05:10:00Z", "purchase", "100.00", "USD"),    # Sunday rate
        ("e08", "B", "2024-03-04T00:30:00+05:30", "purchase", "50.00", "USD"),  # UTC 03-03
        ("e10b", "C", "2024-03-01T12:00:00Z", "add_to_cart", None, None),
        ("e10a", "C", "2024-03-01T12:00:00Z", "view", None, None),  # same time: id decides
        ("e11", "C", "2024-03-01T12:20:00Z", "purchase", "20.00", "GBP"),
        ("e12", "nobody", "2024-03-01T12:00:00Z", "view", None, None),
        ("e13", "C", "2024-03-02T00:10:00+02:00", "search", None, None),  # UTC 03-01 22:10
    ],
}


def edge_warehouse():
    """{"warehouse.db": the edge-case database's bytes}."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "warehouse.db")
        con = sqlite3.connect(path)
        con.executescript(SCHEMA)
        for table, rows in EDGE_ROWS.items():
            marks = ", ".join("?" * len(rows[0]))
            con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        con.commit()
        con.close()
        with open(path, "rb") as f:
            return {"warehouse.db": f.read()}


def dump(db, out):
    con = sqlite3.connect(db)
    with open(out, "w") as f:
        for line in con.iterdump():
            f.write(line + "\n")


if __name__ == "__main__":
    import sys
    build(sys.argv[1], int(sys.argv[2]))
    if len(sys.argv) > 3:
        dump(sys.argv[1], sys.argv[3])
