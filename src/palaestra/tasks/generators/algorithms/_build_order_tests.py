"""build-order's hidden test: the pipelines it checks (drawn at generation time from the task's
secret and shipped in ``tests/precomputed.bin`` with the reference's answers) and its source."""

from __future__ import annotations

import random

# Python, at generation time: the hidden test's pipelines, drawn from the task's secret.
_DRAW = r'''
def names(n):
    out, seen = [], set()
    while len(out) < n:
        name = "".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randrange(1, 4 if n < 1000 else 6)))
        name += str(rng.randrange(10)) if rng.random() < 0.3 else ""
        if name not in seen:
            seen.add(name)
            out.append(name)
    return out


def dag(n, fanin, implicit=0, cycle=False):
    """n steps over a random order; each takes up to `fanin` earlier steps as prerequisites.
    `implicit` of the earliest steps are only mentioned; `cycle` adds a back edge."""
    order = names(n)
    rng.shuffle(order)
    deps = {}
    for i, name in enumerate(order):
        if i < implicit:
            continue
        k = rng.randrange(0, min(i, fanin) + 1)
        reqs = [order[j] for j in rng.sample(range(i), k)] if k else []
        if reqs and rng.random() < 0.1:
            reqs.append(reqs[0])  # listed twice
        deps[name] = reqs
    if cycle:
        listed = [s for s in order if s in deps]
        a, b = rng.sample(listed, 2)
        deps[a] = deps[a] + [b]
        deps[b] = deps[b] + [a]
    items = list(deps.items())
    rng.shuffle(items)
    return dict(items)


def jobs_of(deps):
    return {n: {"duration": rng.randrange(1, 20), "deps": list(reqs)} for n, reqs in deps.items()}
'''

# Python, in the hidden test and at generation time: the large pipeline. Too large to ship
# (~300 KB compressed), it is drawn again by the checker from a seed; only its digest and that
# of its order are shipped. The shape of ``dag(BIG_N, 3, implicit=5)``, drawn in bulk (a third
# of the CPU).
_BIG = r"""
LETTERS = bytes(range(256)).translate(bytes(97 + (b & 15) for b in range(256)))


def big_dag(seed, n, fanin=3, implicit=5):
    rng = random.Random(seed)
    order, seen = [], set()
    while len(order) < n:  # 1-5 letters of a-p, a digit on 30 %, distinct
        raw = rng.randbytes(8 * (n - len(order)) + 64)
        letters = raw.translate(LETTERS).decode()
        for j in range(0, len(raw), 8):
            name = letters[j + 1:j + 2 + raw[j] % 5]
            if raw[j + 6] < 77:
                name += str(raw[j + 7] % 10)
            if name not in seen:
                seen.add(name)
                order.append(name)
                if len(order) == n:
                    break
    rnd, deps = rng.random, {}
    for i in range(implicit, n):
        k = int(rnd() * (min(i, fanin) + 1))
        picked = []
        while len(picked) < k:
            j = int(rnd() * i)
            if j not in picked:
                picked.append(j)
        reqs = [order[j] for j in picked]
        if reqs and rnd() < 0.1:
            reqs.append(reqs[0])  # listed twice
        deps[order[i]] = reqs
    items = list(deps.items())
    rng.shuffle(items)
    return dict(items)


def digest(value):
    import hashlib

    return hashlib.sha256(repr(value).encode("utf-8", "surrogateescape")).hexdigest()
"""


def _outcome(fn, *args):
    try:
        value = fn(*args)
    except ValueError:
        return "cycle"
    return dict(sorted(value.items())) if isinstance(value, dict) else value


def cases(reference: str, names: tuple, timed: bool, pool: bool, big_n: int, secret: int) -> dict:
    """What the hidden test checks, made once: the pipelines drawn from ``secret`` and the
    answers of ``reference`` (the functions' source; ``"cycle"`` for a ValueError)."""
    _, order_fn, finish_fn, sched_fn = names
    scope: dict = {"random": random, "rng": random.Random(secret)}
    exec(reference, scope)
    exec(_DRAW + _BIG, scope)
    rng, dag, jobs_of = scope["rng"], scope["dag"], scope["jobs_of"]
    order, finish, sched = scope[order_fn], scope[finish_fn], scope[sched_fn]
    order_cases = [{}, {"x": []}, {"b": ["a"]}, {"a": ["a"]}, {"c": ["b"], "b": ["c"]}]
    order_cases += [dag(rng.randrange(3, 25), 3, implicit=rng.randrange(0, 3)) for _ in range(30)]
    order_cases += [dag(rng.randrange(4, 15), 3, cycle=True) for _ in range(6)]
    order_cases += [dag(rng.randrange(100, 300), 4, implicit=2) for _ in range(3)]
    big_seed = rng.randrange(2**31)
    big = scope["big_dag"](big_seed, big_n)
    cases = {
        "order": (order_cases, [_outcome(order, c) for c in order_cases]),
        "big": (big_seed, scope["digest"](big), scope["digest"](order(big))),
    }
    if timed:
        job_cases = [{}, {"solo": {"duration": 7, "deps": []}}]
        job_cases += [jobs_of(dag(rng.randrange(3, 30), 3)) for _ in range(25)]
        job_cases += [jobs_of(dag(rng.randrange(4, 12), 2, cycle=True)) for _ in range(3)]
        cases["finish"] = (job_cases, [_outcome(finish, c) for c in job_cases])
    if pool:
        sched_cases = []
        for _ in range(25):
            jobs = jobs_of(dag(rng.randrange(3, 30), 3))
            sched_cases.append([jobs, rng.randrange(1, 5)])
        sched_cases.append([jobs_of(dag(2000, 3)), 3])
        sched_cases.append([jobs_of(dag(8, 2, cycle=True)), 2])
        cases["sched"] = (sched_cases, [_outcome(sched, *c) for c in sched_cases])
    return cases


def hidden_test(reference: str, names: tuple, timed: bool, pool: bool, big_n: int) -> str:
    """``tests/test_hidden.py``: runs the agent's functions on :func:`cases`."""
    module, order_fn, finish_fn, sched_fn = names
    return f'''\
"""Hidden tests for {module}: random pipelines drawn from a per-task secret seed, at generation
time (tests/precomputed.bin holds them and the reference's answers)."""
import random

from palaestra_check import Checker, precomputed, run_python

{reference}
{_BIG}
BIG_N, TIMED, POOL = {big_n}, {timed}, {pool}
CASES = precomputed()

CHILD = """
import copy
from {module[:-3]} import {order_fn}
out = []
before = copy.deepcopy(INPUT)
for case in INPUT:
    try:
        out.append({order_fn}(case))
    except ValueError:
        out.append("cycle")
emit({{"out": out, "unmodified": INPUT == before}})
"""

ck = Checker()
order_cases, wants = CASES["order"]
res = run_python(CHILD, order_cases, timeout=60)
if not res.ok:
    ck.check("{order_fn} runs on the test pipelines", False, res.error)
else:
    got = res.value["out"]
    for i, case in enumerate(order_cases):
        ck.equal(f"{order_fn} case {{i}} ({{len(case)}} steps)", got[i] if i < len(got) else None,
                 wants[i])
    ck.check("input not modified", res.value["unmodified"])

seed, big_digest, want_digest = CASES["big"]
big = big_dag(seed, BIG_N)
BIG_CHILD = "from {module[:-3]} import {order_fn}\\nemit({order_fn}(INPUT))"
res = run_python(BIG_CHILD, big, timeout=60, cpu_seconds=2)
label = f"{{BIG_N}} steps within the time bar"
if res.ok and digest(res.value) == want_digest and digest(big) == big_digest:
    ck.check(label, True)
else:  # the reference decides, and says what differs
    ck.equal(label, res.value if res.ok else res.error, {order_fn}(big))

if TIMED:
    job_cases, wants = CASES["finish"]
    FCHILD = """
from {module[:-3]} import {finish_fn}
out = []
for case in INPUT:
    try:
        out.append({finish_fn}(case))
    except ValueError:
        out.append("cycle")
emit(out)
"""
    res = run_python(FCHILD, job_cases, timeout=60)
    if not res.ok:
        ck.check("{finish_fn} runs", False, res.error)
    else:
        for i, case in enumerate(job_cases):
            ck.equal(f"{finish_fn} case {{i}}", res.value[i] if i < len(res.value) else None,
                     wants[i])

if POOL:
    sched_cases, wants = CASES["sched"]
    SCHILD = """
from {module[:-3]} import {sched_fn}
out = []
for jobs, workers in INPUT:
    try:
        out.append({sched_fn}(jobs, workers))
    except ValueError:
        out.append("cycle")
emit(out)
"""
    res = run_python(SCHILD, sched_cases, timeout=60, cpu_seconds=4)
    if not res.ok:
        ck.check("{sched_fn} runs", False, res.error)
    else:
        for i, (jobs, workers) in enumerate(sched_cases):
            ck.equal(f"{sched_fn} case {{i}} ({{len(jobs)}} steps, {{workers}} workers)",
                     res.value[i] if i < len(res.value) else None, wants[i])
ck.finish()
'''
