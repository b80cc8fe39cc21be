"""access-log-report: aggregate JSON-lines access logs into a per-endpoint report (script
written by the agent, run by the checker on freshly generated logs).

Easy: plain ``.jsonl`` files, endpoints with query strings to strip, error rate (5xx only) and a
nearest-rank p95 latency. Medium adds rotated ``.jsonl.gz`` files, files to ignore, and numeric
path segments collapsed to ``:id``. Hard adds malformed lines to skip and count, timestamps with
UTC offsets, and request counts per UTC hour.
"""

from __future__ import annotations

import json

from palaestra.tasks import outcomes
from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

# Log generator: the workspace's visible logs and the hidden test's (made at generation time).
_GEN = r'''
import datetime as _dt
import gzip as _gzip
import json as _json
import random as _random

RESOURCES = ["orders", "users", "invoices", "carts", "items", "sessions", "reports", "tokens"]


def make_logs(seed, tier, n_lines):
    """{file name: bytes} of a log directory."""
    rng = _random.Random(seed)
    services = rng.sample(["api", "web", "billing", "search", "auth"], 3)
    endpoints = []
    for res in rng.sample(RESOURCES, 5):
        endpoints.append(("GET", f"/v1/{res}"))
        endpoints.append((rng.choice(["GET", "DELETE", "PUT"]), f"/v1/{res}/ID"))
        endpoints.append(("POST", f"/v1/{res}"))
    weights = [rng.randint(1, 30) for _ in endpoints]
    slow = {e: rng.choice([20, 80, 300]) for e in endpoints}
    start = _dt.datetime(2024, rng.randint(1, 12), rng.randint(1, 28), tzinfo=_dt.timezone.utc)
    files, lines_of = {}, {}
    for i in range(n_lines):
        method, tpl = rng.choices(endpoints, weights)[0]
        path = tpl
        if "ID" in tpl:
            sub = str(rng.randint(1, 99999)) if tier != "easy" else rng.choice(
                ["export", "summary", "stats"])
            path = tpl.replace("ID", sub)
        if rng.random() < 0.3:
            path += "?" + rng.choice(["page=2", "expand=items", "sort=-date&limit=50", "q=a%20b"])
        r = rng.random()
        if r < 0.06:
            status = 500 + rng.randrange(4)
        elif r < 0.16:
            status = 400 + rng.choice([0, 1, 3, 4, 29])
        else:
            status = rng.choice([200, 200, 201, 204, 304])
        latency = int(rng.expovariate(1 / slow[(method, tpl)])) + 1
        t = start + _dt.timedelta(seconds=rng.randrange(3 * 86400))
        offset = _dt.timedelta(hours=rng.choice([-5, 0, 1, 2, 9])) if tier == "hard" \
            else _dt.timedelta(0)
        local = t.astimezone(_dt.timezone(offset))
        ts = local.isoformat().replace("+00:00", "Z") if offset == _dt.timedelta(0) \
            else local.isoformat()
        record = {"ts": ts, "service": rng.choice(services), "method": method, "path": path,
                  "status": status, "latency_ms": latency,
                  "client": f"10.{rng.randrange(4)}.{rng.randrange(256)}.{rng.randrange(256)}"}
        keys = list(record)
        rng.shuffle(keys)
        line = _json.dumps({k: record[k] for k in keys})
        if tier == "hard" and rng.random() < 0.02:
            line = rng.choice([line[: rng.randrange(5, len(line) - 1)], "", "   ",
                               "-- log rotated --", _json.dumps({"ts": ts, "msg": "heartbeat"}),
                               _json.dumps([1, 2, 3])])
        day = t.strftime("%Y-%m-%d")
        name = f"{record['service']}-{day}.jsonl"
        lines_of.setdefault(name, []).append(line)
    names = sorted(lines_of)
    for k, name in enumerate(names):
        data = ("\n".join(lines_of[name]) + "\n").encode()
        if tier != "easy" and k % 2 == 1:
            files[name + ".gz"] = _gzip.compress(data, mtime=0)
        else:
            files[name] = data
    if tier != "easy":
        files["README.txt"] = b"Rotated logs: *.jsonl.gz are gzip-compressed JSON lines.\n"
        files["api-old.jsonl.bak"] = lines_of[names[0]][0].encode() + b"\n"
    return files
'''

# The reference report script; wrong solutions are edits of it.
_RIGHT = r'''"""Per-endpoint report of the access logs: python3 report.py LOG_DIR"""

import datetime
import gzip
import json
import os
import sys

TIER = "TIER_VALUE"
FIELDS = ("ts", "method", "path", "status", "latency_ms")


def endpoint(method, path):
    path = path.split("?", 1)[0]
    if TIER != "easy":
        path = "/".join(":id" if seg.isdigit() else seg for seg in path.split("/"))
    return method + " " + path


def records(root):
    """Yield (record or None for a malformed line) over every log file."""
    for name in sorted(os.listdir(root)):
        full = os.path.join(root, name)
        if name.endswith(".jsonl"):
            f = open(full, encoding="utf-8")
        elif name.endswith(".jsonl.gz") and TIER != "easy":
            f = gzip.open(full, "rt", encoding="utf-8")
        else:
            continue
        with f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    yield None
                    continue
                if not isinstance(rec, dict) or any(k not in rec for k in FIELDS):
                    yield None
                    continue
                yield rec


def p95(values):
    values = sorted(values)
    return values[(95 * len(values) + 99) // 100 - 1]


def report(root):
    groups, hourly, skipped, total = {}, {}, 0, 0
    for rec in records(root):
        if rec is None:
            skipped += 1
            continue
        total += 1
        g = groups.setdefault(endpoint(rec["method"], rec["path"]), [0, []])
        g[0] += rec["status"] >= 500
        g[1].append(rec["latency_ms"])
        if TIER == "hard":
            t = datetime.datetime.fromisoformat(rec["ts"].replace("Z", "+00:00"))
            hour = t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H")
            hourly[hour] = hourly.get(hour, 0) + 1
    rows = [
        {"endpoint": e, "requests": len(lat), "error_rate": round(err / len(lat), 4),
         "p95_ms": p95(lat)}
        for e, (err, lat) in groups.items()
    ]
    rows.sort(key=lambda r: (-r["requests"], r["endpoint"]))
    out = {"total_requests": total, "endpoints": rows}
    if TIER == "hard":
        out["skipped_lines"] = skipped
        out["hourly"] = dict(sorted(hourly.items()))
    return out


if __name__ == "__main__":
    print(json.dumps(report(sys.argv[1]), indent=1))
'''

_INTERPOLATED = _RIGHT.replace(
    """    values = sorted(values)
    return values[(95 * len(values) + 99) // 100 - 1]""",
    """    import statistics

    if len(values) == 1:
        return values[0]
    return round(statistics.quantiles(values, n=100, method="inclusive")[94], 1)""",
)
_ERRORS_4XX = _RIGHT.replace('g[0] += rec["status"] >= 500', 'g[0] += rec["status"] >= 400')
_QUERY_KEPT = _RIGHT.replace('    path = path.split("?", 1)[0]\n', "")
_NO_GZ = _RIGHT.replace('elif name.endswith(".jsonl.gz") and TIER != "easy":', "elif False:")
_RAW_IDS = _RIGHT.replace(
    'if TIER != "easy":\n        path = "/".join', 'if False:\n        path = "/".join'
)
_LOCAL_HOURS = _RIGHT.replace(
    'hour = t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H")',
    'hour = t.strftime("%Y-%m-%dT%H")',
)
_COUNT_BLANK = _RIGHT.replace(
    """                if not line.strip():
                    continue
""",
    "",
)


@family(
    "access-log-report",
    category="data-querying",
    summary="A script aggregating JSON-lines access logs per endpoint (error rate, p95), run on "
    "fresh logs: gzip rotation and id paths (medium), bad lines and UTC hours (hard)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    tier = spec.tier
    n_lines = spec.iscale(600, 3000)
    visible_seed = rng.randrange(10**6)
    secrets = [rng.randrange(10**6, 2**31) for _ in range(2)]
    ns: dict = {}
    exec(compile(_GEN, "<gen>", "exec"), ns)
    logs = ns["make_logs"](visible_seed, tier, n_lines)
    right = _RIGHT.replace("TIER_VALUE", tier)

    rules = [
        "Read every file directly in the log directory whose name ends in `.jsonl`"
        + (" or `.jsonl.gz` (gzip-compressed, rotated logs)" if tier != "easy" else "")
        + "; ignore any other file. Each non-blank line is one JSON object with (at least) "
        "`ts`, `method`, `path`, `status` and `latency_ms`.",
        "The endpoint of a request is `METHOD PATH` with the query string (from `?` on) "
        "removed"
        + (
            ", and every path segment made only of digits replaced by `:id` "
            "(`GET /v1/orders/8812?expand=1` is `GET /v1/orders/:id`)"
            if tier != "easy"
            else " (`GET /v1/orders?page=2` is `GET /v1/orders`)"
        )
        + ".",
        "`total_requests`: the number of requests. `endpoints`: one object per endpoint with "
        "`endpoint`, `requests`, `error_rate` (the fraction of its requests with a status "
        ">= 500, rounded to 4 decimals) and `p95_ms`: the nearest-rank 95th percentile of its "
        "`latency_ms` (sort them; take the value at 1-based position `ceil(0.95 * n)`). Sort "
        "the endpoints by `requests` descending, then `endpoint` ascending.",
    ]
    if tier == "hard":
        rules += [
            "Some lines are damaged (cut off, not JSON, not an object, or missing one of the "
            "fields above): skip them and report their number as `skipped_lines`; blank lines "
            "are not damaged lines, just ignore them.",
            "`ts` is ISO 8601 with a UTC offset (`2024-05-01T13:04:05+02:00`, or `Z`). Report "
            "`hourly`: an object mapping each **UTC** hour that has requests, written "
            "`YYYY-MM-DDTHH`, to its number of requests.",
        ]
    keys = '"total_requests", "endpoints"' + (
        ', "skipped_lines", "hourly"' if tier == "hard" else ""
    )
    instruction = f"""\
# Access log report

On-call wants a quick per-endpoint view of our services' access logs. Write
`/app/report.py` so that `python3 /app/report.py LOG_DIR` prints one JSON object (keys
{keys}) to stdout. `/app/logs/` is a sample of the real log directory; the report will be run
on other log directories of the same kind, so compute everything from the files.

{chr(10).join("- " + r for r in rules)}

Only the standard library is available.
"""
    visible_report = _ns_report(right, logs)
    hardcoded = f"print({json.dumps(visible_report)!r})\n"
    wrong = {
        "interpolated-percentile": _INTERPOLATED,
        "errors-include-4xx": _ERRORS_4XX,
        "query-string-kept": _QUERY_KEPT,
    }
    if tier != "easy":
        wrong["ignores-gzip-files"] = _NO_GZ
        wrong["raw-id-paths"] = _RAW_IDS
    if tier == "hard":
        wrong["local-time-hours"] = _LOCAL_HOURS
        wrong["blank-lines-counted"] = _COUNT_BLANK
    wrong = {k: v.replace("TIER_VALUE", tier) for k, v in wrong.items()}
    wrong["visible-report-hardcoded"] = hardcoded
    tests = hs.tests(
        answer=hs.program(
            ["python3", "{app}/report.py", "{in}/logs"],
            require="/app/report.py",
            compile=["/app/report.py"],
        ),
        cases=[
            hs.Case(f"log set {i + 1}", files={f"logs/{n}": d for n, d in files.items()}, want=want)
            for i, (files, want) in enumerate(_log_sets(right, tier, n_lines, secrets))
        ],
        compare=hs.compare(
            "json_keys",
            tol=1e-4,
            parse_label="report.py prints JSON on {label}",
            object_label="report on {label} is an object",
            key_label="{label}: {key}",
        ),
        limits=hs.limits(timeout=60, cpu=10),
        kind="io",
    )
    return hs.task(
        instruction=instruction,
        workspace={f"logs/{name}": data for name, data in logs.items()},
        tests=tests,
        answer_path="report.py",
        reference=right,
        wrongs=wrong,
        note="one pass, nearest rank",
        tags=("python", "logs", "json", "aggregation"),
        reward_outcomes=outcomes.GRADED + outcomes.IO,
    )


def _ns_report(script: str, logs: dict[str, bytes]) -> dict:
    """Run the reference report on in-memory logs (for the hard-coded wrong solution)."""
    import os
    import tempfile

    ns: dict = {"__name__": "report"}
    exec(compile(script, "report.py", "exec"), ns)
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in logs.items():
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(data)
        return ns["report"](tmp)


def _log_sets(right: str, tier: str, n_lines: int, secrets: list[int]) -> list:
    """The hidden test's log directories, made once from the secrets: ``[(files, report)]``,
    ``report`` the reference's."""
    ns: dict = {}
    exec(compile(_GEN, "<gen>", "exec"), ns)
    sets = [ns["make_logs"](seed, tier, n_lines + 97 * i) for i, seed in enumerate(secrets)]
    return [(files, _ns_report(right, files)) for files in sets]
