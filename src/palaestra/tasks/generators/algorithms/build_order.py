"""build-order: order the steps of a build pipeline from their prerequisites (scheduling with
dependencies).

Easy: the deterministic topological order (among the steps ready to run, the alphabetically
smallest first), with cycles reported as errors and prerequisites that are only mentioned
(never listed themselves) treated as steps with no prerequisites. Medium adds durations and the
earliest finish time with unlimited parallel workers (the critical path), and a pipeline large
enough that a quadratic scan misses the CPU bar. Hard adds a fixed pool of workers and a list
schedule under a stated priority rule (longest remaining chain first), whose start times must be
reproduced exactly.
"""

from __future__ import annotations

from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.algorithms._build_order_big import order as _reference_order
from palaestra.tasks.generators.algorithms._build_order_tests import tests
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_NAMES = [
    ("pipeline.py", "build_order", "finish_time", "schedule"),
    ("buildplan.py", "step_order", "earliest_finish", "plan_workers"),
    ("jobgraph.py", "run_order", "critical_time", "assign_starts"),
    ("deploy_steps.py", "execution_order", "total_duration", "worker_schedule"),
]
_WORKERS = ["build agents", "CI runners", "worker machines", "executors"]

# Function bodies, with ORDER_FN / FINISH_FN / SCHED_FN replaced by the task's names.
_ORDER_RIGHT = """\
def ORDER_FN(deps):
    nodes = set(deps)
    for reqs in deps.values():
        nodes.update(reqs)
    waiting = {n: 0 for n in nodes}
    children = {n: [] for n in nodes}
    for n, reqs in deps.items():
        for r in set(reqs):
            waiting[n] += 1
            children[r].append(n)
    ready = [n for n in nodes if waiting[n] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        n = heapq.heappop(ready)
        order.append(n)
        for c in children[n]:
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, c)
    if len(order) != len(nodes):
        raise ValueError("dependency cycle among: " + ", ".join(sorted(set(nodes) - set(order))))
    return order
"""

# Kahn's algorithm with a first-in-first-out queue: a valid order, not the one asked for.
_ORDER_FIFO = (
    _ORDER_RIGHT.replace(
        "ready = [n for n in nodes if waiting[n] == 0]\n    heapq.heapify(ready)",
        "ready = sorted(n for n in nodes if waiting[n] == 0)",
    )
    .replace("heapq.heappop(ready)", "ready.pop(0)")
    .replace("heapq.heappush(ready, c)", "ready.append(c)")
)

# Only the listed steps: prerequisites that are merely mentioned are dropped.
_ORDER_LISTED_ONLY = _ORDER_RIGHT.replace(
    "    for reqs in deps.values():\n        nodes.update(reqs)\n", ""
).replace("for r in set(reqs):", "for r in set(reqs) & nodes:")

# On a cycle, returns what it could order instead of raising.
_ORDER_NO_CYCLE_CHECK = _ORDER_RIGHT.replace(
    'raise ValueError("dependency cycle among: " + ", ".join(sorted(set(nodes) - set(order))))',
    "return order",
)

# The right order by a scan of every step at every turn: quadratic.
_ORDER_QUADRATIC = """\
def ORDER_FN(deps):
    nodes = set(deps)
    for reqs in deps.values():
        nodes.update(reqs)
    done = set()
    order = []
    while len(order) < len(nodes):
        ready = [n for n in nodes if n not in done and all(r in done for r in deps.get(n, ()))]
        if not ready:
            raise ValueError("dependency cycle")
        n = min(ready)
        done.add(n)
        order.append(n)
    return order
"""

_FINISH_RIGHT = """\
def FINISH_FN(jobs):
    deps = {n: j["deps"] for n, j in jobs.items()}
    end = {}
    for n in ORDER_FN(deps):
        end[n] = jobs[n]["duration"] + max((end[r] for r in jobs[n]["deps"]), default=0)
    return max(end.values(), default=0)
"""

# Looks one level back only: the longest job plus its longest direct prerequisite.
_FINISH_ONE_LEVEL = """\
def FINISH_FN(jobs):
    ORDER_FN({n: j["deps"] for n, j in jobs.items()})
    return max(
        (j["duration"] + max((jobs[r]["duration"] for r in j["deps"]), default=0)
         for j in jobs.values()),
        default=0,
    )
"""

_SCHED_RIGHT = """\
def SCHED_FN(jobs, workers):
    order = ORDER_FN({n: j["deps"] for n, j in jobs.items()})
    children = {n: [] for n in jobs}
    waiting = {}
    for n, j in jobs.items():
        waiting[n] = len(set(j["deps"]))
        for r in set(j["deps"]):
            children[r].append(n)
    tail = {}
    for n in reversed(order):
        tail[n] = jobs[n]["duration"] + max((tail[c] for c in children[n]), default=0)
    ready = [(-PRIORITY, n) for n in jobs if waiting[n] == 0]
    heapq.heapify(ready)
    running = []
    start = {}
    now, idle = 0, workers
    while ready or running:
        while idle and ready:
            n = heapq.heappop(ready)[1]
            start[n] = now
            heapq.heappush(running, (now + jobs[n]["duration"], n))
            idle -= 1
        now = running[0][0]
        while running and running[0][0] == now:
            n = heapq.heappop(running)[1]
            idle += 1
            for c in children[n]:
                waiting[c] -= 1
                if waiting[c] == 0:
                    heapq.heappush(ready, (-PRIORITY, c))
    return start
"""


def _source(order: str, finish: str | None, sched: str | None, names: tuple, prio="tail[n]") -> str:
    _, order_fn, finish_fn, sched_fn = names
    parts = ['"""Step planning for the build pipeline."""\n\nimport heapq\n', order]
    if finish:
        parts.append(finish)
    if sched:
        p = prio.replace("[n]", "[c]")
        parts.append(
            sched.replace("(-PRIORITY, n)", f"(-{prio}, n)").replace("(-PRIORITY, c)", f"(-{p}, c)")
        )
    src = "\n\n".join(parts)
    return (
        src.replace("ORDER_FN", order_fn)
        .replace("FINISH_FN", finish_fn)
        .replace("SCHED_FN", sched_fn)
    )


def _random_names(rng, n: int) -> list[str]:
    stems = ["fetch", "lint", "compile", "test", "pack", "sign", "upload", "index", "docs",
             "schema", "assets", "bundle", "migrate", "seed", "probe", "cache"]  # fmt: skip
    names: list[str] = []
    seen = set()
    while len(names) < n:
        name = f"{rng.choice(stems)}-{rng.randrange(100)}"
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


@family(
    "build-order",
    category="algorithms",
    summary="Deterministic build order from prerequisites; critical path (medium), "
    "worker-pool list schedule (hard)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    names = rng.choice(_NAMES)
    module, order_fn, finish_fn, sched_fn = names
    workers_word = rng.choice(_WORKERS)
    timed = spec.tier != "easy"
    pool = spec.tier == "hard"
    big_n = spec.iscale(2_000, 30_000)
    secret = rng.randrange(2**31)

    example_deps = {}
    ex_names = _random_names(rng, 5)
    example_deps[ex_names[0]] = [ex_names[1], ex_names[2]]
    example_deps[ex_names[2]] = [ex_names[3]]
    example_deps[ex_names[4]] = []
    ex_order = _reference_order(example_deps)

    finish_text = sched_text = ""
    if timed:
        finish_text = f"""
## `{finish_fn}(jobs)`

`jobs` maps each step name to `{{"duration": d, "deps": [...]}}` (`d` a positive integer of
seconds; every prerequisite is itself a key of `jobs`). With as many {workers_word} as needed,
a step starts as soon as all its prerequisites have finished. Return the time at which the last
step finishes (0 for no jobs). Raise `ValueError` on a cycle.
"""
    if pool:
        sched_text = f"""
## `{sched_fn}(jobs, workers)`

Now only `workers` {workers_word} exist (`workers >= 1`); each runs one step at a time, to the
end. Simulate this list schedule and return a dict mapping every step to its start time:

- At time 0, and at each moment some steps finish, first mark all steps finishing at that moment
  as done; then, while a worker is idle and some step is ready (all its prerequisites done and
  not yet started), start the ready step with the **highest priority**.
- A step's priority is the total duration of the longest chain of steps starting with it and
  following the "is a prerequisite of" links to the end of the pipeline (its own duration
  included). Higher runs first; equal priorities go by step name, alphabetically smallest first.
- Raise `ValueError` on a cycle.
"""
    instruction = f"""\
# Build pipeline planner

Our build pipeline is a set of named steps, each with prerequisite steps that must run before
it. Implement the planning functions in `/app/{module}` (they raise `NotImplementedError` now).

## `{order_fn}(deps)`

`deps` maps a step name to the list of its prerequisite step names. Return a list with every
step exactly once, each after all its prerequisites. Among the steps that could run next, always
take the one with the alphabetically smallest name (plain string comparison), so the order is
unique. A prerequisite that is mentioned but is not a key of `deps` is a step with no
prerequisites and must appear in the order too. A prerequisite listed twice counts once. If the
prerequisites form a cycle, raise `ValueError`. Do not modify the input.

```python
>>> {order_fn}({example_deps!r})
{ex_order!r}
```
{finish_text}{sched_text}
Pipelines may have up to {big_n:,} steps; a call must finish within a few seconds for that
size. Only the standard library is available; keep the module path and function names.
"""
    stub = '"""Step planning for the build pipeline."""\n\n\n'
    stub += f"def {order_fn}(deps):\n    raise NotImplementedError\n"
    if timed:
        stub += f"\n\ndef {finish_fn}(jobs):\n    raise NotImplementedError\n"
    if pool:
        stub += f"\n\ndef {sched_fn}(jobs, workers):\n    raise NotImplementedError\n"

    fin = _FINISH_RIGHT if timed else None
    sch = _SCHED_RIGHT if pool else None
    right = _source(_ORDER_RIGHT, fin, sch, names)
    wrong = {
        "fifo-ready-queue": _source(_ORDER_FIFO, fin, sch, names),
        "listed-steps-only": _source(_ORDER_LISTED_ONLY, fin, sch, names),
        "no-cycle-check": _source(_ORDER_NO_CYCLE_CHECK, fin, sch, names),
    }
    if timed:
        wrong["quadratic-scan"] = _source(_ORDER_QUADRATIC, fin, sch, names)
        wrong["one-level-finish"] = _source(_ORDER_RIGHT, _FINISH_ONE_LEVEL, sch, names)
    if pool:
        wrong["priority-by-name"] = _source(_ORDER_RIGHT, fin, sch, names, prio="0")
        wrong["priority-by-duration"] = _source(
            _ORDER_RIGHT, fin, sch, names, prio='jobs[n]["duration"]'
        )

    reference = _source(_ORDER_RIGHT, _FINISH_RIGHT, _SCHED_RIGHT, names)
    return hs.task(
        instruction=instruction,
        workspace={module: stub},
        tests=tests(reference, names, timed, pool, big_n, secret),
        answer_path=module,
        reference=right,
        wrongs=wrong,
        note="Kahn's algorithm with a heap",
        tags=("python", "graphs", "topological-sort", "scheduling"),
        verifier_timeout_sec=360.0,
    )
