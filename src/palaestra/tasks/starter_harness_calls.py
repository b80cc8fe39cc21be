"""The hidden tests of the starter tasks whose answer is a Python function called in a child
(``hs.python_calls``), as declarative harness specs; :mod:`palaestra.tasks.starter_harness`
lists them with the program tasks and writes them. The cases and the reference that gives
their expected values live in the task's ``tests/`` module (hidden like the rest of
``tests/``); the values are computed here, when the spec is built, in this process."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from types import ModuleType

from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.pack_cache import PACKS_DIR

PACK = PACKS_DIR / "starter"


def pack_module(task: str, name: str, pack: Path | None = None) -> ModuleType:
    """The task's ``tests/<name>.py`` (an input maker, a reference), loaded from the pack."""
    path = (pack or PACK) / task / "tests" / f"{name}.py"
    mod = ModuleType(name)
    mod.__file__ = str(path)
    sys.path.insert(0, str(path.parent))  # its own imports: the task's other tests/ modules
    try:
        exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)
    finally:
        sys.path.remove(str(path.parent))
    return mod


def without_runtime(files: dict[str, str | bytes]) -> dict[str, str | bytes]:
    """``hs.tests``'s files less the runtime, which the pack gets when it is materialised."""
    runtime = {path.name for path in hs.HARNESS_RUNTIME}
    return {name: content for name, content in files.items() if name not in runtime}


def shipped_cases(
    task: str,
    module: str,
    *,
    code: str,
    answer: str,
    timeout: int,
    label: str = "case {i}",
    compare: dict | None = None,
    alarm: int = 100,
) -> dict[str, str | bytes]:
    """``tests/`` of a task whose cases are small enough to ship in the spec: ``module``'s
    ``cases()`` the call's input, its ``expected`` their expected values (computed now), its
    ``compare`` the comparison (default ``equal``); ``alarm`` the checker's own limit
    (seconds, under the task's verifier timeout); ``code`` called once in a child on them, within ``timeout``
    seconds; ``answer`` the agent's file (a syntax error is a compile error)."""
    maker = pack_module(task, module)
    made = maker.cases()
    cases = [hs.Case(label.format(i=i), want=w) for i, w in enumerate(maker.expected(made))]
    files = hs.tests(
        answer=hs.python_calls(hs.python_call(code, made), compile=[answer]),
        cases=cases,
        compare=compare or hs.compare("equal"),
        limits=hs.limits(timeout=timeout),
        kind="assert",
        modules={f"{module}.py": (PACK / task / "tests" / f"{module}.py").read_text()},
        timeout=alarm,
    )
    return without_runtime(files)


def made_cases(
    task: str, module: str, *, code: str, answer: str, timeout: int, label, compare=None
) -> dict[str, str | bytes]:
    """``tests/`` of a task whose cases ``module.cases(random.Random(module.SEED))`` makes
    again in the checker (SHA-256 checked; other data: ``module.expected`` on it, first);
    ``code`` called once in a child on them within ``timeout`` seconds, each result compared
    by ``compare`` (default ``equal``) with ``module.expected``'s, computed now."""
    maker = pack_module(task, module)
    made = maker.cases(random.Random(maker.SEED))
    cases = [
        hs.Case(label(i, c), want=w)
        for i, (c, w) in enumerate(zip(made, maker.expected(made), strict=True))
    ]
    call = hs.python_call(
        code, None, make=hs.made(module, "cases", maker.SEED, [], made), reference="expected"
    )
    files = hs.tests(
        answer=hs.python_calls(call, compile=[answer]),
        cases=cases,
        compare=compare or hs.compare("equal"),
        limits=hs.limits(timeout=timeout),
        kind="assert",
        modules={f"{module}.py": (PACK / task / "tests" / f"{module}.py").read_text()},
        timeout=100,
    )
    return without_runtime(files)


#: The child's code: each case's pairs handed over as lists and tuples in turn, the input
#: checked unmodified, a ValueError reported as such, the result's types checked (a large
#: result reported as its length and digest, as ``intervals_cases.shown``).
_MERGE_CALL = """\
import copy, hashlib, json
from intervals import merge_intervals


def shown(case, value):
    if len(case) <= 1000:
        return value
    text = json.dumps(value, separators=(",", ":"))
    return {"intervals": len(value), "sha256": hashlib.sha256(text.encode()).hexdigest()}


out = []
for case in INPUT:
    pairs = [tuple(p) if i % 2 else list(p) for i, p in enumerate(case)]
    before = copy.deepcopy(pairs)
    try:
        res = merge_intervals(pairs)
    except ValueError:
        out.append({"error": "ValueError"})
        continue
    except Exception as e:
        out.append({"error": type(e).__name__ + ": " + str(e)[:200]})
        continue
    ok = isinstance(res, list) and all(
        type(p) is tuple and len(p) == 2 and all(type(x) is int for x in p) for p in res)
    out.append({"types": ok, "unmodified": pairs == before,
                "value": shown(case, [list(p) for p in res]) if ok else repr(res)[:200]})
emit(out)
"""


def merge_intervals() -> dict[str, str | bytes]:
    """414 cases (edge cases, 400 small random lists, one of 100 000 intervals) made again in
    the checker from the test's seed, in one child within 20 s; each result equal to the
    reference's. Reward 1 only when every case passes, as before."""
    return made_cases(
        "algorithms-easy-merge-intervals",
        "intervals_cases",
        code=_MERGE_CALL,
        answer="/app/intervals.py",
        timeout=20,
        label=lambda i, c: f"case {i}: " + (repr(c) if len(c) <= 20 else f"<{len(c)} intervals>"),
    )


_ROUTE_CALL = """\
from routing import fastest_route
out = []
for c in INPUT:
    roads = [tuple(r) for r in c["roads"]]
    try:
        res = fastest_route(c["n"], roads, c["src"], c["dst"], c["budget"])
        if res is None:
            out.append({"none": 1})
        else:
            minutes, path = res
            out.append({"minutes": minutes if type(minutes) is int else repr(minutes),
                        "path": [p if type(p) is int else repr(p) for p in path]})
    except Exception as e:
        out.append({"error": type(e).__name__ + ": " + str(e)[:200]})
emit(out)
"""


def toll_budget_route() -> dict[str, str | bytes]:
    """303 graphs made again in the checker from the test's seed, in one child within 40 s;
    each result checked by ``tests/route_cases.py`` (optimal minutes, a valid route within
    the budget). Reward 1 only when every case passes, as before."""
    return made_cases(
        "algorithms-medium-toll-budget-route",
        "route_cases",
        code=_ROUTE_CALL,
        answer="/app/routing.py",
        timeout=40,
        label=lambda i, c: (
            f"case {i}: " + (repr(c) if len(c["roads"]) <= 12 else f"<{c['n']} cities>")
        ),
        compare=hs.compare("function", module="route_cases", fn="check"),
    )


_CALC_CALL = """\
from fractions import Fraction
import calc
out = []
for expr, variables in INPUT:
    vs = None if variables is None else {k: Fraction(n, d) if d != 1 else n
                                         for k, (n, d) in variables.items()}
    try:
        res = calc.evaluate(expr, vs)
        if isinstance(res, Fraction):
            out.append({"v": [res.numerator, res.denominator]})
        else:
            out.append({"x": "returned " + type(res).__name__})
    except calc.EvalError as e:
        pos = getattr(e, "position", None)
        ok = isinstance(e, ValueError) and type(pos) is int
        out.append({"e": pos} if ok else {"x": "bad EvalError"})
    except RecursionError:
        out.append({"x": "RecursionError"})
    except Exception as e:
        out.append({"x": type(e).__name__ + ": " + str(e)[:100]})
emit(out)
"""


def exact_calculator() -> dict[str, str | bytes]:
    """2,791 expressions (hand-written, random trees, their corruptions) made again in the
    checker from the test's seed, in one child within 60 s; each result (a value, or an error
    position) the reference's. Reward 1 only when every case passes, as before."""

    def label(i: int, case: list) -> str:
        expr = case[0]
        return f"{i}: " + repr(expr if len(expr) < 200 else expr[:100] + f"...<{len(expr)} chars>")

    return made_cases(
        "algorithms-hard-exact-calculator",
        "calc_cases",
        code=_CALC_CALL,
        answer="/app/calc.py",
        timeout=60,
        label=label,
    )


#: The agent's six queries, each on the three databases (restored from the checker's dumps,
#: in memory): SQL only, reads only (an authorizer), 10 s a query.
_SALES_CALL = """\
import os, sqlite3, time
ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
           getattr(sqlite3, "SQLITE_RECURSIVE", 33)}


def gate(action, *args):
    return sqlite3.SQLITE_OK if action in ALLOWED else sqlite3.SQLITE_DENY


scripts, queries = INPUT
dbs = []
for script in scripts:
    con = sqlite3.connect(":memory:")
    con.executescript(script)
    con.set_authorizer(gate)
    dbs.append(con)
out = []
for q in queries:
    path = os.path.join("queries", q + ".sql")
    try:
        with open(path) as f:
            sql = f.read()
    except (OSError, UnicodeDecodeError):
        out.append({"missing": "/app/" + path})
        continue
    results = []
    for con in dbs:
        deadline = time.monotonic() + 10
        con.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)
        try:
            rows = [[v if not isinstance(v, bytes) else "x'" + v.hex() + "'" for v in r]
                    for r in con.execute(sql).fetchall()]
            results.append({"rows": rows})
        except Exception as e:
            results.append({"error": type(e).__name__ + ": " + str(e)[:200]})
    out.append(results)
emit(out)
"""


def sales_queries() -> dict[str, str | bytes]:
    """The six queries on the visible database and two hidden ones (``tests/make_db.py``'s
    seeds, made again in the checker as SQL dumps, SHA-256 checked), in one child within
    60 s; one check a query, right on all three (``tests/sales_cases.py``). Reward: the
    fraction of the six queries right, as before."""
    task = "data-querying-medium-sales-queries"
    tests = PACK / task / "tests"
    maker = pack_module(task, "sales_cases")
    made = maker.dumps(random.Random(0), *maker.SEEDS)
    call = hs.python_call(
        _SALES_CALL,
        None,
        make=hs.made("sales_cases", "dumps", 0, maker.SEEDS, made),
        reference="expected",
    )
    wants = maker.expected(made, *maker.SEEDS)
    files = hs.tests(
        answer=hs.python_calls(call),
        cases=[hs.Case(w["query"], want=w) for w in wants],
        compare=hs.compare("function", module="sales_cases", fn="check"),
        limits=hs.limits(timeout=60),
        kind="io",
        modules={n: (tests / n).read_text() for n in ("sales_cases.py", "make_db.py")},
        timeout=100,
        reward="partial",
    )
    return without_runtime(files)


#: Task id -> the builder of its ``tests/`` harness files.
BUILDERS = {
    "algorithms-easy-merge-intervals": merge_intervals,
    "algorithms-medium-toll-budget-route": toll_budget_route,
    "algorithms-hard-exact-calculator": exact_calculator,
    "data-querying-medium-sales-queries": sales_queries,
}
