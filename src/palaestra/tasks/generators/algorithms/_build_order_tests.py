"""build-order's hidden test as data: the pipelines it checks, drawn at generation time from
the task's secret, with the reference's answers, run by the declarative harness; the large
pipeline is made again in the checker from its seed (``_build_order_big``)."""

from __future__ import annotations

import random
from pathlib import Path

from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.algorithms import _build_order_big as big_module

_BIG = Path(big_module.__file__)


class _Draws:
    """The test's pipelines, drawn from the task's secret (in the order the test drew them)."""

    def __init__(self, secret: int) -> None:
        self.rng = random.Random(secret)

    def names(self, n: int) -> list[str]:
        rng, out, seen = self.rng, [], set()
        while len(out) < n:
            size = rng.randrange(1, 4 if n < 1000 else 6)
            name = "".join(rng.choice("abcdefghijklmnop") for _ in range(size))
            name += str(rng.randrange(10)) if rng.random() < 0.3 else ""
            if name not in seen:
                seen.add(name)
                out.append(name)
        return out

    def dag(self, n: int, fanin: int, implicit: int = 0, cycle: bool = False) -> dict:
        """n steps over a random order; each takes up to ``fanin`` earlier steps as
        prerequisites. ``implicit`` of the earliest steps are only mentioned; ``cycle`` adds a
        back edge."""
        rng = self.rng
        order = self.names(n)
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

    def jobs_of(self, deps: dict) -> dict:
        return {
            n: {"duration": self.rng.randrange(1, 20), "deps": list(reqs)}
            for n, reqs in deps.items()
        }


def _outcome(fn, *args):
    try:
        value = fn(*args)
    except ValueError:
        return "cycle"
    return dict(sorted(value.items())) if isinstance(value, dict) else value


#: The children: each function on its cases, a ValueError answered as "cycle"; the first also
#: says whether the input is unmodified.
_ORDER = """
import copy
from {module} import {fn}
out = []
before = copy.deepcopy(INPUT)
for case in INPUT:
    try:
        out.append({fn}(case))
    except ValueError:
        out.append("cycle")
emit(out + [INPUT == before])
"""
_EACH = """
from {module} import {fn}
out = []
for args in INPUT:
    try:
        out.append({fn}(*args))
    except ValueError:
        out.append("cycle")
emit(out)
"""


def tests(reference: str, names: tuple, timed: bool, pool: bool, big_n: int, secret: int) -> dict:
    """The task's ``tests/``: the pipelines drawn from ``secret``, the answers of
    ``reference`` (the functions' source, run now) their expected values."""
    module, order_fn, finish_fn, sched_fn = names
    scope: dict = {}
    exec(reference, scope)
    d, name = _Draws(secret), module[:-3]
    order_cases = [{}, {"x": []}, {"b": ["a"]}, {"a": ["a"]}, {"c": ["b"], "b": ["c"]}]
    for _ in range(30):
        order_cases.append(d.dag(d.rng.randrange(3, 25), 3, implicit=d.rng.randrange(0, 3)))
    order_cases += [d.dag(d.rng.randrange(4, 15), 3, cycle=True) for _ in range(6)]
    order_cases += [d.dag(d.rng.randrange(100, 300), 4, implicit=2) for _ in range(3)]
    big_seed = d.rng.randrange(2**31)
    big = big_module.big_dag(random.Random(big_seed), big_n)
    cases = [
        hs.Case(f"{order_fn} case {i} ({len(c)} steps)", want=_outcome(scope[order_fn], c))
        for i, c in enumerate(order_cases)
    ]
    cases.append(hs.Case("input not modified", want=True))
    (want,) = big_module.expected(big, big_n)
    cases.append(hs.Case(f"{big_n} steps within the time bar", want=want))
    calls = [
        hs.python_call(
            _ORDER.format(module=name, fn=order_fn), order_cases, cases=len(order_cases) + 1
        ),
        hs.python_call(
            f"from {name} import {order_fn}\nemit([{order_fn}(INPUT)])",
            None,
            cases=1,
            cpu=2,
            compare=hs.compare("function", module="build_order_big", fn="same_order"),
            make=hs.made("build_order_big", "big_dag", big_seed, [big_n], big),
            reference="expected",
        ),
    ]
    if timed:
        job_cases = [{}, {"solo": {"duration": 7, "deps": []}}]
        job_cases += [d.jobs_of(d.dag(d.rng.randrange(3, 30), 3)) for _ in range(25)]
        job_cases += [d.jobs_of(d.dag(d.rng.randrange(4, 12), 2, cycle=True)) for _ in range(3)]
        cases += [
            hs.Case(f"{finish_fn} case {i}", want=_outcome(scope[finish_fn], c))
            for i, c in enumerate(job_cases)
        ]
        args = [[c] for c in job_cases]
        calls.append(hs.python_call(_EACH.format(module=name, fn=finish_fn), args, cases=len(args)))
    if pool:
        sched_cases = []
        for _ in range(25):
            jobs = d.jobs_of(d.dag(d.rng.randrange(3, 30), 3))
            sched_cases.append([jobs, d.rng.randrange(1, 5)])
        sched_cases.append([d.jobs_of(d.dag(2000, 3)), 3])
        sched_cases.append([d.jobs_of(d.dag(8, 2, cycle=True)), 2])
        cases += [
            hs.Case(
                f"{sched_fn} case {i} ({len(jobs)} steps, {workers} workers)",
                want=_outcome(scope[sched_fn], jobs, workers),
            )
            for i, (jobs, workers) in enumerate(sched_cases)
        ]
        calls.append(hs.python_call(_EACH.format(module=name, fn=sched_fn), sched_cases, cpu=4))
    return hs.tests(
        answer=hs.python_calls(*calls),
        cases=cases,
        compare=hs.compare("equal"),
        limits=hs.limits(timeout=60),
        modules={"build_order_big.py": _BIG.read_text()},
        timeout=300,
    )
