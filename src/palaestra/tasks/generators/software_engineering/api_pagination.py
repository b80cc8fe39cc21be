"""api-pagination: add pagination, filtering, sorting and (hard) cursors to an in-process API.

The workspace is a package ``<pkg>/`` whose ``App(items).handle(method, path, query, body)``
serves ``GET /items`` (everything), ``GET /items/<id>`` and ``POST /items``, with its own tests.
The checker imports nothing from /app: it runs request scripts drawn from the task's secret (valid
and invalid parameters, ``int()``-lenient spellings like ``+5``, ties, inserts between cursor
pages) against the agent's package and a private reference package, as ``nobody``, and compares
statuses and bodies (cursor strings only by presence: they are opaque).

Difficulty knobs: easy adds ``limit``/``offset`` with strict validation and ``total``; medium
adds exact-match and range filters, ``sort=[-]field`` (ties by id) and unknown-parameter errors
with a fixed precedence; hard adds opaque ``cursor`` pagination that stays correct when items are
inserted between pages, bound to its sort order. Catalogue size grows.
"""

from __future__ import annotations

import json
import random
import textwrap

from palaestra.tasks.generators import family, solve_sh_writing
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_PKGS = ["shopfront", "inventory", "catalog_api", "warehouse"]
_NAMES = ["bolt", "nut", "gear", "lamp", "cable", "drill", "saw", "tape", "glue", "hinge"]
_CATS = ["tools", "garden", "kitchen", "office", "toys"]

_APP_OLD = '''\
"""A tiny in-process JSON API over a list of items.

``handle(method, path, query, body)`` returns ``(status, body)``; ``query`` maps parameter names to
strings, as they come from a URL."""
import re

FIELDS = {"name": str, "category": str, "status": str, "price": (int, float), "stock": int}


class App:
    def __init__(self, items):
        self.items = {item["id"]: dict(item) for item in items}

    def handle(self, method, path, query=None, body=None):
        query = query or {}
        if path == "/items":
            if method == "GET":
                return self._list(query)
            if method == "POST":
                return self._create(body or {})
            return 405, {"error": "method not allowed"}
        m = re.fullmatch(r"/items/(\\d+)", path)
        if m and method == "GET":
            item = self.items.get(int(m.group(1)))
            return (200, item) if item else (404, {"error": "not found"})
        return 404, {"error": "not found"}

    def _list(self, query):
        return 200, {"items": [self.items[i] for i in sorted(self.items)]}

    def _create(self, body):
        for key, kind in FIELDS.items():
            if not isinstance(body.get(key), kind) or isinstance(body.get(key), bool):
                return 400, {"error": f"invalid {key}"}
        new_id = max(self.items, default=0) + 1
        item = {"id": new_id, **{k: body[k] for k in FIELDS}}
        self.items[new_id] = item
        return 201, item
'''

# The reference _list (and helpers) replacing the old one; TIER is set by the generator.
_LIST_NEW = """
    def _list(self, query):
        allowed = {"limit", "offset"}
        if TIER != "easy":
            allowed |= {"sort", "category", "status"} | {p + f for p in ("min_", "max_") for f in NUMERIC}
        if TIER == "hard":
            allowed.add("cursor")
        if TIER != "easy":
            for name in sorted(query):
                if name not in allowed:
                    return 400, {"error": f"unknown parameter: {name}"}
        limit = _count(query.get("limit", "20"), 1, 100)
        if limit is None:
            return 400, {"error": f"invalid limit: {query['limit']}"}
        offset = _count(query.get("offset", "0"), 0, None)
        if offset is None:
            return 400, {"error": f"invalid offset: {query['offset']}"}
        if "cursor" in query and "offset" in query:
            return 400, {"error": "cursor and offset are exclusive"}
        sort = query.get("sort", "id")
        field = sort[1:] if sort.startswith("-") else sort
        if field not in SORTABLE:
            return 400, {"error": f"invalid sort: {sort}"}
        rows = [self.items[i] for i in sorted(self.items)]
        for name in sorted(query):
            value = query[name]
            if name in ("category", "status"):
                rows = [r for r in rows if r[name] == value]
            elif name.startswith(("min_", "max_")):
                try:
                    bound = float(value)
                except ValueError:
                    bound = None
                if bound is None or bound != bound or bound in (float("inf"), float("-inf")):
                    return 400, {"error": f"invalid {name}: {value}"}
                f = name[4:]
                rows = [r for r in rows if (r[f] >= bound if name.startswith("min_") else r[f] <= bound)]
        desc = sort.startswith("-")
        rows.sort(key=lambda r: r[field], reverse=desc)  # stable: ties stay in id order
        total = len(rows)
        body = {"total": total, "limit": limit}
        if "cursor" in query:
            after = _decode(query["cursor"], sort)
            if after is None:
                return 400, {"error": "invalid cursor"}
            value, last_id = after
            rows = [r for r in rows
                    if (r[field] < value if desc else r[field] > value)
                    or (r[field] == value and r["id"] > last_id)]
            page = rows[:limit]
            more = len(rows) > limit
        else:
            page = rows[offset:offset + limit]
            more = offset + limit < total
            body["offset"] = offset
        body["items"] = page
        if TIER == "hard":
            body["next_cursor"] = _encode(sort, page[-1][field], page[-1]["id"]) if more and page else None
        return 200, body


NUMERIC = ("price", "stock")
SORTABLE = ("id", "name", "price", "stock")


def _count(text, low, high):
    if not re.fullmatch(r"[0-9]+", text):
        return None
    n = int(text)
    if n < low or (high is not None and n > high):
        return None
    return n


def _encode(sort, value, last_id):
    raw = json.dumps([sort, value, last_id]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode(cursor, sort):
    try:
        s, value, last_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, TypeError):
        return None
    if s != sort or not isinstance(last_id, int):
        return None
    return value, last_id
"""


def _reference(tier: str) -> str:
    old_list = """
    def _list(self, query):
        return 200, {"items": [self.items[i] for i in sorted(self.items)]}
"""
    body = _APP_OLD.replace(old_list, "")
    body = body.replace(
        "import re\n", f"import base64\nimport json\nimport re\n\nTIER = {tier!r}\n", 1
    )
    marker = "    def _create(self, body):"
    head, tail = body.split(marker)
    methods, helpers = _LIST_NEW.split("\n\nNUMERIC = ")
    return head + methods.lstrip("\n") + "\n\n" + marker + tail + "\n\nNUMERIC = " + helpers


_VISIBLE_TESTS = '''\
"""The package's own tests: `cd /app && python3 -m unittest discover -s tests`."""
import unittest

from {pkg}.app import App

ITEMS = [
    {{"id": 1, "name": "bolt", "category": "tools", "status": "active", "price": 0.5, "stock": 100}},
    {{"id": 4, "name": "lamp", "category": "office", "status": "archived", "price": 12.0, "stock": 0}},
]


class AppTests(unittest.TestCase):
    def test_get_one(self):
        self.assertEqual(App(ITEMS).handle("GET", "/items/4")[1]["name"], "lamp")
        self.assertEqual(App(ITEMS).handle("GET", "/items/2")[0], 404)

    def test_create(self):
        app = App(ITEMS)
        status, item = app.handle("POST", "/items", body={{"name": "saw", "category": "tools",
                                  "status": "active", "price": 9.5, "stock": 3}})
        self.assertEqual((status, item["id"]), (201, 5))
        self.assertEqual(app.handle("POST", "/items", body={{"name": "x"}})[0], 400)


if __name__ == "__main__":
    unittest.main()
'''

#: Drives ``App`` (the agent's, in the checker; the reference's, here) through the request
#: scripts: one value a step, every case's steps in order (a harness case a step).
_DRIVE = """
def norm(body):
    if isinstance(body, dict) and "next_cursor" in body:
        body = dict(body, next_cursor=body["next_cursor"] is not None)
    return body


out = []
for case in INPUT:
    app = App([dict(i) for i in case["items"]])
    for step in case["steps"]:
        try:
            if step[0] == "req":
                status, body = app.handle("GET", "/items", dict(step[1]))
                out.append([status, norm(body)])
            elif step[0] == "walk":
                query, inserts, pages = step[1], step[2], []
                q = dict(query)
                for i in range(80):
                    status, body = app.handle("GET", "/items", q)
                    if status != 200:
                        pages.append([status, body])
                        break
                    pages.append([r["id"] for r in body["items"]])
                    for item in inserts.get(str(i), []):
                        app.handle("POST", "/items", None, dict(item))
                    if not body.get("next_cursor"):
                        break
                    q = dict(query, cursor=body["next_cursor"])
                out.append(["walk", pages])
            elif step[0] == "misuse":
                status, body = app.handle("GET", "/items", dict(step[1]))
                cursor = body.get("next_cursor") if status == 200 else None
                status, body = app.handle("GET", "/items", dict(step[2], cursor=str(cursor)))
                out.append(["misuse", status, body])
        except Exception as e:
            out.append(["crash", type(e).__name__ + ": " + str(e)])
emit(out)
"""


def _expected(tier: str, cases: list[dict]) -> list:
    """The reference's answers to the request scripts, run now (the reference is ours): the
    values the checker compares the agent's package with, as JSON carries them."""
    ns: dict = {}
    exec(compile(_reference(tier), "<reference>", "exec"), ns)
    out: list = []
    exec(compile(_DRIVE, "<drive>", "exec"), {"App": ns["App"], "INPUT": cases, "emit": out.extend})
    return json.loads(json.dumps(out))


def _items(rng, n):
    items, next_id = [], 1
    for _ in range(n):
        next_id += rng.choice([1, 1, 1, 2, 5])
        items.append({
            "id": next_id,
            "name": rng.choice(_NAMES),
            "category": rng.choice(_CATS),
            "status": rng.choice(["active", "active", "archived"]),
            "price": rng.choice([0.5, 1.25, 3.0, 9.99, 12.0, 49.5, 100.0]),
            "stock": rng.choice([0, 1, 5, 10, 25, 100]),
        })  # fmt: skip
    return items


def _cases(rng, tier, n_items, count):
    cases = []
    for _ in range(count):
        items = _items(rng, n_items)
        items[rng.randrange(len(items))]["stock"] = 5  # for the inclusive-bounds request
        steps = []
        for _ in range(10):
            q = {
                "limit": str(rng.choice([1, 3, 7, 20, 100])),
                "offset": str(rng.randrange(0, n_items + 3)),
            }
            if tier != "easy":
                if rng.random() < 0.6:
                    q["sort"] = rng.choice(["-", ""]) + rng.choice(["id", "name", "price", "stock"])
                if rng.random() < 0.4:
                    q["category"] = rng.choice(_CATS)
                if rng.random() < 0.4:
                    q["status"] = rng.choice(["active", "archived"])
                if rng.random() < 0.4:
                    q[rng.choice(["min_price", "max_price", "min_stock", "max_stock"])] = (
                        rng.choice(["1.25", "10", "25", "0", "3"])
                    )
            for k in [k for k in ("limit", "offset") if rng.random() < 0.2]:
                del q[k]
            steps.append(["req", q])
        bad = [{"limit": "0"}, {"limit": "101"}, {"limit": "100"}, {"limit": "+5"}, {"limit": " 7"},
               {"offset": "-1"}, {"offset": "1_0"}, {"limit": "abc"}, {"limit": "5", "offset": "2"}]  # fmt: skip
        if tier != "easy":
            bad += [{"sort": "color"}, {"sort": "--price"}, {"colour": "red", "limit": "x"},
                    {"min_price": "cheap"}, {"max_stock": "nan"}, {"page": "2"},
                    {"sort": "-price", "limit": "100"}, {"sort": "-name", "limit": "100"},
                    {"min_stock": "5", "max_stock": "5", "limit": "100"},
                    {"zeta": "1", "alpha": "2"}]  # fmt: skip
        for q in bad:
            steps.append(["req", q])
        if tier == "hard":
            steps += [
                ["req", {"cursor": "not-a-cursor"}],
                ["req", {"cursor": "abc", "offset": "1"}],
            ]
            for w in range(3):
                q = {
                    "limit": str(rng.choice([2, 3, 5])),
                    "sort": rng.choice(["-price", "name", "stock", "-id", "id"]),
                }
                if w == 0:  # newest first: every insert lands before the cursor
                    q["sort"] = "-id"
                if rng.random() < 0.5:
                    q["status"] = "active"
                inserts = {}
                for page in range(4):
                    inserts[str(page)] = [
                        {"name": rng.choice(_NAMES), "category": rng.choice(_CATS),
                         "status": "active", "price": rng.choice([0.5, 9.99, 100.0, 1000.0]),
                         "stock": rng.choice([0, 10, 200])}
                        for _ in range(rng.randrange(1 if page == 0 else 0, 3))
                    ]  # fmt: skip
                steps.append(["walk", q, inserts])
            steps.append(
                ["misuse", {"limit": "2", "sort": "price"}, {"limit": "2", "sort": "-price"}]
            )
        cases.append({"items": items, "steps": steps})
    return cases


@family(
    "api-pagination",
    category="software-engineering",
    summary="Add limit/offset, filters, sorting and stable cursors to an in-process items API",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    pkg = rng.choice(_PKGS)
    tier = spec.tier
    secret = rng.randrange(2**31)
    n_items = spec.iscale(12, 60)
    count = spec.iscale(2, 4)

    asks = [
        """\
- `limit` (default 20) and `offset` (default 0). Both must be written with ASCII digits only
  (no sign, spaces or underscores); `limit` must be between 1 and 100 inclusive, `offset` >= 0.
  Otherwise answer `400` with `{"error": "invalid limit: <value>"}` (or `offset`), `<value>` as
  given, checking `limit` first.
- The `200` body becomes `{"items": [...], "total": T, "limit": L, "offset": O}`: `total` counts
  every matching item (not just this page), `items` is the page."""
    ]
    if tier != "easy":
        asks.append(
            """\
- Filters: `category=<v>` and `status=<v>` (exact match), `min_price`, `max_price`, `min_stock`,
  `max_stock` (inclusive bounds, parsed with `float()`; a value that does not parse, or is NaN or
  infinite, is `400` `{"error": "invalid <param>: <value>"}`). `total` counts after filtering.
- `sort=<field>` or `sort=-<field>` (descending) for `id`, `name`, `price` or `stock` (default
  `id`); items with equal values stay in ascending `id` order in both directions. Anything else:
  `400` `{"error": "invalid sort: <value>"}`.
- Any other parameter: `400` `{"error": "unknown parameter: <name>"}`. Errors are reported one
  at a time in this order: unknown parameters (the first in sorted order), `limit`, `offset`,
  `sort`, then the filters in sorted order of their names."""
        )
    if tier == "hard":
        asks.append(
            """\
- Cursor pagination. Every `200` body of `GET /items` gets `"next_cursor"`: an opaque string
  when items remain after this page, else `null`. `cursor=<that string>` (instead of `offset`)
  returns the next `limit` items strictly after the last item of the page it came from, in the
  current order, where "after" compares (sort value, id) as the sort defines; such a body has no
  `"offset"` key, and its `total` still counts every matching item. Walking the cursors must
  return every item exactly once even when items are added between requests (a new item shows
  up if it sorts after the cursor's position). A cursor only works with the same `sort` it was
  made with (filters and `limit` may change). Errors: `cursor` together with `offset` is `400`
  `{"error": "cursor and offset are exclusive"}` (checked right after `offset`); a cursor that is
  not one we made, or was made for another sort, is `400` `{"error": "invalid cursor"}` (checked
  last)."""
        )
    instruction = textwrap.dedent(
        """\
        # Paginate `GET /items`

        `/app/{pkg}/app.py` is our in-process JSON API: `App(items).handle(method, path,
        query=None, body=None)` returns `(status, body)`, `query` being a dict of strings as
        they come from a URL. `GET /items` returns every item at once, which no longer scales.
        Change `GET /items` so that it takes these query parameters:

        {asks}

        `GET /items/<id>` and `POST /items` stay as they are (see `/app/tests/`, run with
        `cd /app && python3 -m unittest discover -s tests`). Items are dicts with `id`, `name`,
        `category`, `status`, `price` and `stock`; return them as stored. Only the standard
        library is available.
        """
    ).format(pkg=pkg, asks="\n".join(asks))

    workspace = {
        f"{pkg}/__init__.py": f'"""{pkg}: a tiny in-process items API."""\n',
        f"{pkg}/app.py": _APP_OLD,
        "tests/test_app.py": _VISIBLE_TESTS.format(pkg=pkg),
        "examples/items.json": json.dumps(_items(rng, 8), indent=2) + "\n",
    }
    right = _reference(tier)
    wrong = {
        # int() accepts "+5", " 7" and "1_0"
        "lenient-int-parsing": right.replace(
            '    if not re.fullmatch(r"[0-9]+", text):\n        return None\n    n = int(text)',
            "    try:\n        n = int(text)\n    except ValueError:\n        return None",
        ),
        # total is the size of the page
        "total-is-page-size": right.replace(
            'body["items"] = page', 'body["items"] = page\n        body["total"] = len(page)'
        ),
        # limit=100 rejected (upper bound exclusive)
        "limit-100-rejected": right.replace(
            '_count(query.get("limit", "20"), 1, 100)', '_count(query.get("limit", "20"), 1, 99)'
        ),
        # an offset past the first item is off by one
        "offset-off-by-one": right.replace(
            "page = rows[offset:offset + limit]",
            "page = rows[max(0, offset - 1):max(0, offset - 1) + limit]",
        ),
    }
    if tier != "easy":
        wrong["desc-ties-by-id-desc"] = right.replace(
            "rows.sort(key=lambda r: r[field], reverse=desc)",
            "rows.sort(key=lambda r: (r[field], r['id']), reverse=desc)",
        )
        wrong["max-exclusive"] = right.replace(
            'r[f] >= bound if name.startswith("min_") else r[f] <= bound',
            'r[f] >= bound if name.startswith("min_") else r[f] < bound',
        )
        wrong["limit-checked-before-unknown"] = right.replace(
            '        if TIER != "easy":\n            for name in sorted(query):\n                if name not in allowed:\n                    return 400, {"error": f"unknown parameter: {name}"}\n        limit = _count(query.get("limit", "20"), 1, 100)\n        if limit is None:\n            return 400, {"error": f"invalid limit: {query[\'limit\']}"}\n',
            '        limit = _count(query.get("limit", "20"), 1, 100)\n        if limit is None:\n            return 400, {"error": f"invalid limit: {query[\'limit\']}"}\n        if TIER != "easy":\n            for name in sorted(query):\n                if name not in allowed:\n                    return 400, {"error": f"unknown parameter: {name}"}\n',
        )
    if tier == "hard":
        # the cursor is an offset in disguise: inserts between pages shift it
        wrong["cursor-is-offset"] = right.replace(
            '            value, last_id = after\n            rows = [r for r in rows\n                    if (r[field] < value if desc else r[field] > value)\n                    or (r[field] == value and r["id"] > last_id)]',
            "            rows = rows[after[1]:]",
        ).replace(
            'body["next_cursor"] = _encode(sort, page[-1][field], page[-1]["id"]) if more and page else None',
            'body["next_cursor"] = _encode(sort, 0, (_decode(query["cursor"], sort)[1] if "cursor" in query else offset) + len(page)) if more and page else None',
        )
        wrong["cursor-ignores-sort"] = right.replace(
            "    if s != sort or not isinstance(last_id, int):",
            "    if not isinstance(last_id, int):",
        )
    for name, text in wrong.items():
        assert text != right, name
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=_tests(pkg, tier, secret, n_items, count),
        solution={
            "solve.sh": solve_sh_writing(
                {f"{pkg}/app.py": right}, note="validated params, stable sort, keyset cursors"
            )
        },
        wrong_solutions={
            n: {"solve.sh": solve_sh_writing({f"{pkg}/app.py": t}, note=f"wrong: {n}")}
            for n, t in wrong.items()
        },
        tags=("python", "feature", "api", "pagination"),
        verifier_timeout_sec=240.0,
    )


def _tests(pkg: str, tier: str, secret: int, n_items: int, count: int) -> dict:
    """The request scripts drawn from the task's secret, a harness case a step, with the
    reference's answers; the agent's package runs them as nobody, in a copy of /app."""
    scripts = _cases(random.Random(secret), tier, n_items, count)
    wants = iter(_expected(tier, scripts))
    cases = []
    for c, script in enumerate(scripts):
        for s, step in enumerate(script["steps"]):
            label = step[1] if step[0] != "walk" else ["walk", step[1]]
            cases.append(hs.Case(f"case {c} step {s} {label}", want=next(wants)))
    return hs.tests(
        answer=hs.python_call(f"from {pkg}.app import App\n" + _DRIVE, scripts),
        cases=cases,
        compare=hs.compare("equal"),
        limits=hs.limits(timeout=60, cpu=10),
        timeout=200,
    )
