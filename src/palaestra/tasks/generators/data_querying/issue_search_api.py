"""issue-search-api: implement the query API of an issue tracker: a small search language over a
list of records (filters, sorting, limits), checked on records and queries drawn from a secret.

Easy: ``field:value`` (case-insensitive, list fields by membership), bare words in titles,
``sort:``/``limit:`` with id as the final tie-break. Medium adds numeric and date comparisons
(``points>=8``, ``created<2024-03-01``), ``-`` negation and ``field:none`` for missing values
(sorted last). Hard adds quoted phrases, ``OR`` between AND-groups, and multi-key sorts.
"""

from __future__ import annotations

import json
import random

from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_NAMES = [
    ("tracker_query.py", "search"),
    ("issue_search.py", "run_query"),
    ("find_issues.py", "find_issues"),
    ("backlog_api.py", "query_issues"),
]

_RIGHT = r'''"""Search API of the issue tracker."""

import re

MEDIUM, HARD = FLAGS
FIELDS = ("id", "title", "status", "priority", "assignee", "labels", "created", "points")
_TERM = re.compile(r"^([a-z]+)(>=|<=|>|<|:)(.*)$", re.S)


def _tokens(q):
    out, i = [], 0
    while i < len(q):
        if q[i].isspace():
            i += 1
            continue
        j, neg = i, False
        if HARD and q.startswith('-"', j):
            neg, j = True, j + 1
        if HARD and q[j] == '"':
            end = q.find('"', j + 1)
            end = len(q) if end == -1 else end
            out.append(("phrase", neg, q[j + 1 : end]))
            i = end + 1
            continue
        end = i
        while end < len(q) and not q[end].isspace():
            end += 1
        out.append(("word", False, q[i:end]))
        i = end
    return out


def _term(text):
    neg = MEDIUM and text.startswith("-") and len(text) > 1
    body = text[1:] if neg else text
    m = _TERM.match(body)
    if m and m.group(1) in FIELDS and (m.group(2) == ":" or MEDIUM):
        return (neg, m.group(1), m.group(2), m.group(3))
    return (neg, None, "contains", body)


def _match(rec, field, op, value):
    if field is None:
        return value.lower() in rec["title"].lower()
    v = rec.get(field)
    if op == ":":
        if MEDIUM and value.lower() == "none":
            return v is None
        if v is None:
            return False
        if isinstance(v, list):
            return any(x.lower() == value.lower() for x in v)
        if isinstance(v, int):
            return value.lstrip("-").isdigit() and v == int(value)
        return v.lower() == value.lower()
    if v is None or isinstance(v, list):
        return False
    if isinstance(v, int):
        try:
            value = int(value)
        except ValueError:
            return False
    return {">": v > value, ">=": v >= value, "<": v < value, "<=": v <= value}[op]


def FN(records, query):
    groups, sort, limit = [[]], [("id", False)], None
    for kind, neg, text in _tokens(query):
        if kind == "phrase":
            groups[-1].append((neg, None, "contains", text))
        elif HARD and text == "OR":
            groups.append([])
        elif text.startswith("sort:") and len(text) > 5:
            sort = [(k.lstrip("-"), k.startswith("-")) for k in text[5:].split(",")]
            if not HARD:
                sort = sort[:1]
        elif text.startswith("limit:") and text[6:].isdigit():
            limit = int(text[6:])
        else:
            groups[-1].append(_term(text))
    hits = [
        r for r in records
        if any(all(_match(r, f, op, v) != neg for neg, f, op, v in g) for g in groups)
    ]
    hits.sort(key=lambda r: r["id"])
    for field, desc in reversed(sort):
        present = [r for r in hits if r.get(field) is not None]
        present.sort(key=lambda r: r[field], reverse=desc)
        hits = present + [r for r in hits if r.get(field) is None]
    return [r["id"] for r in (hits if limit is None else hits[:limit])]
'''

_CASE_SENSITIVE = _RIGHT.replace(
    "            return any(x.lower() == value.lower() for x in v)",
    "            return value in v",
).replace("        return v.lower() == value.lower()", "        return v == value")
_LIMIT_FIRST = _RIGHT.replace(
    """    hits.sort(key=lambda r: r["id"])""",
    """    if limit is not None:
        hits, limit = hits[:limit], None
    hits.sort(key=lambda r: r["id"])""",
)
_INPUT_ORDER_TIES = _RIGHT.replace('    hits.sort(key=lambda r: r["id"])\n', "")
_TEXT_COMPARE = _RIGHT.replace(
    """    if isinstance(v, int):
        try:
            value = int(value)
        except ValueError:
            return False
    return {""",
    """    v = str(v)
    return {""",
)
_NONE_FIRST = _RIGHT.replace(
    "        hits = present + [r for r in hits if r.get(field) is None]",
    "        hits = [r for r in hits if r.get(field) is None] + present",
)
_OR_TIGHTER = _RIGHT.replace(
    """    hits = [
        r for r in records
        if any(all(_match(r, f, op, v) != neg for neg, f, op, v in g) for g in groups)
    ]""",
    """    # a b OR c read as a AND (b OR c)
    def ok(r):
        first = groups[0]
        rest = groups[1:]
        if not rest:
            return all(_match(r, f, op, v) != neg for neg, f, op, v in first)
        head, tail = first[:-1], [first[-1:]] + rest
        return all(_match(r, f, op, v) != neg for neg, f, op, v in head) and any(
            all(_match(r, f, op, v) != neg for neg, f, op, v in g) for g in tail)

    hits = [r for r in records if ok(r)]""",
)
_PHRASE_WORDS = _RIGHT.replace(
    """            groups[-1].append((neg, None, "contains", text))""",
    """            groups[-1].extend((neg, None, "contains", w) for w in text.split())""",
)


def _variant(body: str, fn: str, tier: str) -> str:
    flags = (tier != "easy", tier == "hard")
    return body.replace("FLAGS", repr(flags)).replace("def FN(", f"def {fn}(")


_TITLE_WORDS = ["login", "page", "crash", "export", "csv", "timeout", "dark mode", "billing",
                "invoice", "search", "slow", "upload", "avatar", "email", "reset", "password",
                "api", "rate limit", "mobile", "sync"]  # fmt: skip


@family(
    "issue-search-api",
    category="data-querying",
    summary="A search query language over issue records: filters, sort and limit; comparisons, "
    "negation, missing values (medium); phrases, OR groups, multi-key sort (hard)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    module, fn = rng.choice(_NAMES)
    tier = spec.tier
    n_records = spec.iscale(40, 160)
    n_queries = spec.iscale(40, 90)
    secret = rng.randrange(2**31)
    ns: dict = {}
    exec(compile(_variant(_RIGHT, fn, tier), "<reference>", "exec"), ns)
    sample = [
        {"id": 7, "title": "Login page crash on Safari", "status": "open", "priority": 1,
         "assignee": "mira", "labels": ["bug", "web"], "created": "2024-02-11", "points": 5},
        {"id": 3, "title": "Export to CSV is slow", "status": "closed", "priority": 3,
         "assignee": None, "labels": ["perf"], "created": "2024-01-30", "points": 8},
        {"id": 12, "title": "Dark mode for settings page", "status": "open", "priority": 3,
         "assignee": "Omar", "labels": [], "created": "2024-03-02", "points": 13},
    ]  # fmt: skip
    examples = ["status:OPEN", "page sort:-priority", "labels:bug limit:1"]
    if tier != "easy":
        examples += [
            "points>=8 -status:closed",
            "assignee:none",
            "created<2024-02-01 sort:assignee",
        ]
    if tier == "hard":
        examples += [
            '"settings page" OR labels:perf',
            "labels:perf OR status:open sort:priority,-points",
        ]
    ex_lines = "\n".join(
        f">>> {fn}(issues, {json.dumps(q)})\n{ns[fn](sample, q)}" for q in examples
    )
    rules = [
        "The query is a list of whitespace-separated terms. A record matches when it matches "
        "**every** filter term (no filter term: every record matches).",
        "`field:value` — `field` is one of `id`, `title`, `status`, `priority`, `assignee`, "
        "`labels`, `created`, `points`. Text fields compare equal ignoring case "
        "(`status:OPEN` matches `open`); integer fields compare as integers; for `labels` (a "
        "list) the value must equal one of the labels, ignoring case. A record whose field is "
        "`null` matches no `field:value` term.",
        "A term that is not of that form (including one whose field is not in the list above) "
        "is a bare word: it matches records whose `title` contains it, ignoring case.",
        "`sort:field` sorts ascending, `sort:-field` descending (default: by `id`). Records that "
        "compare equal keep `id` order (ascending), whatever the direction. `limit:N` keeps the "
        "first N records after sorting. `sort:` and `limit:` are not filters; if one appears "
        "twice, the last one counts.",
        "Return the list of the `id`s of the matching records, in order.",
    ]
    if tier != "easy":
        rules[2:2] = [
            "Comparisons `field>value`, `field>=value`, `field<value`, `field<=value`: integer "
            "fields compare as numbers (`points>=8` is true for 13), text fields such as "
            "`created` (`YYYY-MM-DD`) compare as strings; a `null` field never matches.",
            "`-term` negates any filter term (`-status:closed`, `-crash`, `-points>3`; a "
            "negated comparison matches records with a `null` field).",
            "`field:none` matches records whose field is `null` (`assignee:none`).",
        ]
        rules.append(
            "When sorting, records whose sort field is `null` come last in both directions."
        )
    if tier == "hard":
        rules += [
            'A double-quoted phrase (`"dark mode"`, negated as `-"dark mode"`) is one bare '
            "word, spaces included.",
            "`OR` (upper case, a term of its own) separates groups of terms: a record matches "
            "when it matches every filter term of **at least one** group (AND binds tighter: "
            "`a b OR c` is `(a AND b) OR c`).",
            "`sort:` takes a comma-separated list of keys, each with an optional `-` "
            "(`sort:-priority,created`): by the first key, then the next for equal values, and "
            "`id` last; `null`s come last for each key.",
        ]
    sample_json = "\n".join(json.dumps(r) for r in sample)
    instruction = f"""\
# Issue search API

The issue tracker needs its search endpoint. Implement `{fn}(records, query)` in
`/app/{module}` (it raises `NotImplementedError` now). `records` is a list of issues like the
ones in `/app/sample_issues.json` (`id` unique int, `title` text, `status` text, `priority` int,
`assignee` text or `null`, `labels` list of text, `created` `YYYY-MM-DD`, `points` int);
`query` is a search string:

{chr(10).join("- " + r for r in rules)}

With `issues` these three records (the first three of `/app/sample_issues.json`):

```json
{sample_json}
```

```python
{ex_lines}
```

Do not modify `records`. Only the standard library is available; keep the module path and the
function name.
"""
    issues = [r for r in _records(rng, 30) if r["id"] not in (3, 7, 12)]
    stub = f'"""Search API of the issue tracker."""\n\n\ndef {fn}(records, query):\n    raise NotImplementedError\n'
    wrong = {
        "case-sensitive-match": _CASE_SENSITIVE,
        "limit-before-sort": _LIMIT_FIRST,
        "ties-in-input-order": _INPUT_ORDER_TIES,
    }
    if tier != "easy":
        wrong["numbers-compared-as-text"] = _TEXT_COMPARE
        wrong["nulls-sorted-first"] = _NONE_FIRST
    if tier == "hard":
        wrong["or-binds-tighter"] = _OR_TIGHTER
        wrong["phrase-split-into-words"] = _PHRASE_WORDS
    return hs.task(
        instruction=instruction,
        workspace={
            module: stub,
            "sample_issues.json": json.dumps(sample + issues, indent=1) + "\n",
        },
        tests=_tests(
            module, fn, _variant(_RIGHT, "reference", tier), tier, n_records, n_queries, secret
        ),
        answer_path=module,
        reference=_variant(_RIGHT, fn, tier),
        wrongs={name: _variant(src, fn, tier) for name, src in wrong.items()},
        note="tokenizer, AND/OR groups, stable sorts",
        tags=("python", "parsing", "query-language"),
    )


_RECORDS = r"""
STATUSES = ["open", "closed", "in_progress", "blocked"]
PEOPLE = ["mira", "omar", "Jun", "ada", "Li", "sven"]
LABELS = ["bug", "perf", "ui", "backend", "security", "docs", "Web"]


def make_records(rng, n):
    ids = rng.sample(range(1, 10 * n), n)
    out = []
    for i in ids:
        words = rng.sample(TITLE_WORDS, rng.randint(2, 4))
        title = " ".join(w.capitalize() if rng.random() < 0.3 else w for w in words)
        out.append({
            "id": i, "title": title, "status": rng.choice(STATUSES),
            "priority": rng.randint(1, 4),
            "assignee": rng.choice(PEOPLE) if rng.random() < 0.75 else None,
            "labels": rng.sample(LABELS, rng.randint(0, 3)),
            "created": "2024-%02d-%02d" % (rng.randint(1, 6), rng.randint(1, 28)),
            "points": rng.choice([1, 2, 3, 5, 8, 13, 21, 40, 100]),
        })
    return out
"""


def _records(rng, n: int) -> list[dict]:
    ns: dict = {"TITLE_WORDS": _TITLE_WORDS}
    exec(compile(_RECORDS, "<records>", "exec"), ns)
    return ns["make_records"](rng, n)


#: Run when the task is generated: the test's queries, drawn from the task's secret.
_QUERIES = r"""
def make_queries(rng, records, n_queries, MEDIUM, HARD):
    def case(s):
        return "".join(c.upper() if rng.random() < 0.4 else c.lower() for c in s)

    def filter_term():
        r = rng.choice(records)
        kind = rng.randrange(9 if MEDIUM else 5)
        if kind == 0:
            term = "status:" + case(r["status"])
        elif kind == 1:
            term = "assignee:" + case(r["assignee"] or rng.choice(PEOPLE))
        elif kind == 2:
            term = "labels:" + case(rng.choice(r["labels"] or LABELS))
        elif kind == 3:
            term = case(rng.choice(r["title"].split()))
        elif kind == 4:
            term = rng.choice(["priority:", "points:"]) + str(r[rng.choice(["priority", "points"])])
        elif kind == 5:
            term = "points" + rng.choice([">", ">=", "<", "<="]) + str(rng.choice([2, 5, 9, 13, 40]))
        elif kind == 6:
            term = "created" + rng.choice([">", "<=", ">="]) + r["created"]
        elif kind == 7:
            term = rng.choice(["assignee:none", "assignee:NONE"])
        else:
            term = "priority" + rng.choice([">", "<"]) + str(rng.randint(1, 4))
        if HARD and rng.random() < 0.2:
            words = r["title"].split()
            k = rng.randrange(len(words) - 1) if len(words) > 1 else 0
            term = '"' + case(" ".join(words[k : k + 2])) + '"'
        if MEDIUM and rng.random() < 0.2:
            term = "-" + term
        return term

    def query():
        groups = []
        for _ in range(rng.choice([1, 1, 2, 3]) if HARD else 1):
            groups.append(" ".join(filter_term() for _ in range(rng.randint(0 if not HARD else 1, 3))))
        q = " OR ".join(g for g in groups if g) if HARD else groups[0]
        if rng.random() < 0.7:
            keys = ["priority", "points", "created", "status"] + (["assignee"] if MEDIUM else [])
            chosen = rng.sample(keys, rng.randint(1, 3) if HARD else 1)
            q += " sort:" + ",".join(("-" if rng.random() < 0.5 else "") + k for k in chosen)
        if rng.random() < 0.5:
            q += " limit:" + str(rng.randint(1, 12))
        return q.strip()

    queries = ["", "limit:3", "sort:-priority", "sort:points limit:5", "status:" + case("open"),
               "labels:" + case("web"), "sort:priority limit:4", "sort:-points limit:6"]
    if MEDIUM:
        queries += ["points>=9", "points<13 sort:-points", "-status:open sort:assignee",
                    "assignee:none sort:-priority", "sort:assignee limit:40", "sort:-assignee",
                    "-points>5"]
    if HARD:
        queries += ['"' + " ".join(records[0]["title"].split()[:2]) + '"',
                    "status:open priority:1 OR status:blocked", "labels:bug OR labels:ui sort:-points",
                    "sort:-priority,status,-created", "sort:assignee,-points limit:9",
                    '-"' + records[1]["title"].split()[0] + '" OR priority:4']
    while len(queries) < n_queries:
        queries.append(query())
    return queries
"""

#: The child that calls the agent's function on every query (``INPUT``: records, queries):
#: one value a query, then whether the records are unmodified.
_CHILD = """
import copy
from {module} import {fn}
records, queries = INPUT
before = copy.deepcopy(records)
emit([{fn}(records, q) for q in queries] + [records == before])
"""


def _tests(module, fn, reference, tier, n_records, n_queries, secret) -> dict:
    """The function on records and queries drawn from ``secret``; the reference's answers (run
    now) are the expected values."""
    ns: dict = {"TITLE_WORDS": _TITLE_WORDS}
    exec(compile(_RECORDS + _QUERIES, "<queries>", "exec"), ns)
    exec(compile(reference, "<reference>", "exec"), ns)
    rng = random.Random(secret)
    records = ns["make_records"](rng, n_records)
    rng.shuffle(records)
    queries = ns["make_queries"](rng, records, n_queries, tier != "easy", tier == "hard")
    cases = [hs.Case(f"query {q!r}", want=ns["reference"](records, q)) for q in queries]
    cases.append(hs.Case("records not modified", want=True))
    return hs.tests(
        answer=hs.python_call(_CHILD.format(module=module[:-3], fn=fn), [records, queries]),
        cases=cases,
        compare=hs.compare("equal"),
        limits=hs.limits(timeout=60),
    )
