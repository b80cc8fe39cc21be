"""Deterministic generator of the library data set (the workspace CSVs were written by it).

The hidden test's expected answers are computed from here in plain Python when its spec is
built (``palaestra.tasks.starter_harness_state``), so nothing the agent changes in /app can
influence them.
"""

import csv
import datetime as dt
import random

GENRES = ["Science Fiction", "Fantasy", "History", "Mystery", "Poetry", "Biography", "Science"]
CITIES = ["Leeds", "York", "Hull", "Bradford", "Wakefield", "Harrogate"]
WORDS = ["Silent", "Red", "Winter", "Glass", "Empire", "River", "Stars", "Garden", "Iron",
         "Shadow", "Letters", "Ocean", "Clock", "Night", "Paper", "Golden", "Last", "City"]
FIRST = ["Ada", "Ben", "Chloe", "Dev", "Ela", "Finn", "Grace", "Hugo", "Iris", "Jon", "Kemi",
         "Liam", "Maya", "Noor", "Owen", "Pia", "Quinn", "Rosa", "Sam", "Tara"]
LAST = ["Shaw", "Patel", "Okafor", "Novak", "Moreau", "Lind", "Kaur", "Ito", "Hale", "Green"]


def generate():
    rng = random.Random(1859)
    books = []
    for i in range(1, 121):
        title = f"The {rng.choice(WORDS)} {rng.choice(WORDS)}"
        books.append({"id": i, "title": title, "author": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
                      "genre": rng.choice(GENRES), "year": rng.randint(1950, 2023)})
    # two editions of one popular title: counted per book row they are not the top book
    books[9]["title"] = books[10]["title"] = "The Glass Empire"
    books[9]["genre"] = books[10]["genre"] = "Science Fiction"
    members = []
    for i in range(1, 71):
        joined = dt.date(2021, 1, 1) + dt.timedelta(days=rng.randint(0, 700))
        members.append({"id": i, "name": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
                        "joined_on": joined.isoformat(), "city": rng.choice(CITIES)})
    members.append({"id": 71, "name": "Zed Quayle", "joined_on": "2024-03-01",
                    "city": "Selby"})  # a city with members but no late returns
    idle = set(rng.sample(range(1, 71), 9))
    active = [m for m in members if m["id"] not in idle and m["id"] != 71]
    weights = [6 if b["id"] == 42 else 4 if b["id"] in (10, 11) else 1 for b in books]
    loans = []
    start = dt.date(2022, 6, 1)
    for i in range(1, 701):
        loaned = start + dt.timedelta(days=rng.randint(0, 640))
        due = loaned + dt.timedelta(days=21)
        r = rng.random()
        if loaned > dt.date(2024, 1, 20) and r < 0.5 or r < 0.04:
            returned = ""
        elif r < 0.8:
            returned = (loaned + dt.timedelta(days=rng.randint(1, 21))).isoformat()
        else:
            returned = (loaned + dt.timedelta(days=rng.randint(22, 60))).isoformat()
        loans.append({"id": i, "book_id": rng.choices(books, weights)[0]["id"],
                      "member_id": rng.choice(active)["id"], "loaned_on": loaned.isoformat(),
                      "due_on": due.isoformat(), "returned_on": returned})
    return books, members, loans


def write_csvs(directory):
    books, members, loans = generate()
    for name, rows in (("books", books), ("members", members), ("loans", loans)):
        with open(f"{directory}/{name}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


def answers():
    books, members, loans = generate()
    days = lambda a, b: (dt.date.fromisoformat(b) - dt.date.fromisoformat(a)).days  # noqa: E731
    counts = {}
    for ln in loans:
        counts[ln["book_id"]] = counts.get(ln["book_id"], 0) + 1
    top = max(counts.values())
    top_ids = [b for b, c in counts.items() if c == top]
    assert len(top_ids) == 1, "the data must have a unique most borrowed book"
    title = {b["id"]: b["title"] for b in books}
    scifi = {b["id"] for b in books if b["genre"] == "Science Fiction"}
    returned = [ln for ln in loans if ln["returned_on"]]
    borrowers = {ln["member_id"] for ln in loans}
    city = {m["id"]: m["city"] for m in members}
    late = {c: 0 for c in city.values()}
    for ln in returned:
        if ln["returned_on"] > ln["due_on"]:
            late[city[ln["member_id"]]] += 1
    return {
        "open_loans": sum(1 for ln in loans if not ln["returned_on"]),
        "most_borrowed_title": title[top_ids[0]],
        "scifi_borrowers_2023": len({ln["member_id"] for ln in loans if ln["book_id"] in scifi
                                     and ln["loaned_on"].startswith("2023-")}),
        "avg_loan_days": round(sum(days(ln["loaned_on"], ln["returned_on"]) for ln in returned)
                               / len(returned), 2),
        "never_borrowed": sorted(m["id"] for m in members if m["id"] not in borrowers),
        "late_returns_by_city": late,
    }


if __name__ == "__main__":
    import json
    import sys
    write_csvs(sys.argv[1])
    print(json.dumps(answers(), indent=1))
