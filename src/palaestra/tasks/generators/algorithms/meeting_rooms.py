"""meeting-rooms: how many rooms a day of bookings needs, and (hard) which room each one gets.

Difficulty knobs: the input size and the time bar (a quadratic sweep passes easy, not medium or
hard); from medium on, a cleaning buffer between meetings in one room; from hard on, the actual
room assignment under a deterministic rule (lowest-numbered free room), which a count-only
sweep cannot produce.
"""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

from palaestra.tasks.generators import attacks, family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.algorithms import _rooms_inputs as ri
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_NAMES = [
    ("rooms.py", "rooms_needed", "assign_rooms"),
    ("scheduler.py", "min_rooms", "room_plan"),
    ("calendar_tools.py", "count_rooms", "allocate_rooms"),
    ("booking.py", "rooms_required", "place_bookings"),
]
_UNITS = ["minutes", "seconds"]


def _random_day(rng, n: int, horizon: int, max_len: int) -> list[list[int]]:
    out = []
    for _ in range(n):
        start = rng.randrange(0, horizon)
        out.append([start, start + rng.randrange(1, max_len + 1)])
    return out


@family(
    "meeting-rooms",
    category="algorithms",
    summary="Minimum rooms for a day of bookings; buffers (medium), room assignment (hard)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    module, count_fn, assign_fn = rng.choice(_NAMES)
    unit = rng.choice(_UNITS)
    buffer = rng.randrange(5, 16) if spec.tier != "easy" else 0
    assign = spec.tier == "hard"
    big_n = spec.iscale(1_000, 50_000)
    secret = rng.randrange(2**31)

    examples = [[[9, 10], [9, 12], [10, 11], [12, 13]], [[1, 5], [5, 8]], []]
    buffer_rule = (
        f"After a meeting ends at `e`, its room must be cleaned for {buffer} {unit}: the room "
        f"can host a meeting starting at `e + {buffer}` or later, not earlier."
        if buffer
        else "A room freed at `e` can host a meeting starting at `e`."
    )
    example_lines = "\n".join(
        f">>> {count_fn}({json.dumps(ex)})\n{ri.reference(ex, buffer)}" for ex in examples
    )
    assign_text = ""
    if assign:
        assign_text = textwrap.dedent(
            f"""\

            Also implement `{assign_fn}(bookings)`, returning a list with the room index of each
            booking, **in the input order**. Rooms are numbered 0, 1, 2, ... Process bookings by
            start time (ties: the one that ends first; then input order); each booking takes the
            **lowest-numbered** room that is free at its start (cleaning included), or a new room
            numbered one past the highest so far. The number of distinct rooms used must equal
            `{count_fn}(bookings)`.
            """
        )
    instruction = textwrap.dedent(
        f"""\
        # Rooms for the booking calendar

        The office booking system needs to know how many meeting rooms a day of bookings takes.
        Implement `{count_fn}(bookings)` in `/app/{module}` (it currently raises
        `NotImplementedError`).

        - `bookings` is a list of `[start, end]` pairs of integers ({unit} since midnight), with
          `start < end`. A meeting occupies its room over the half-open interval `[start, end)`.
        - {buffer_rule}
        - Return the minimum number of rooms so that no room hosts two meetings at once
          (cleaning included). An empty list needs 0 rooms.
        - Do not modify the input. Days may hold up to {big_n:,} bookings; a call must finish
          within a few seconds for that size.
        {textwrap.indent(assign_text, " " * 8).strip()}

        Examples:

        ```python
        {textwrap.indent(example_lines, "        ").strip()}
        ```

        Only the standard library is available. Keep the module path and function names.
        """
    )
    stub = f'"""Room planning for the booking calendar."""\n\n\ndef {count_fn}(bookings):\n    raise NotImplementedError\n'
    if assign:
        stub += f"\n\ndef {assign_fn}(bookings):\n    raise NotImplementedError\n"

    right = _solution_source(count_fn, assign_fn if assign else None, buffer)
    wrong = {
        # treats back-to-back meetings as clashing (closed intervals): off by one at the edges
        "closed-intervals": _solution_source(count_fn, assign_fn if assign else None, buffer + 1),
        # only compares each meeting with the one before it
        "adjacent-only": _adjacent_only(count_fn, assign_fn if assign else None, buffer),
        # hard-coded to the instruction's examples
        "examples-only": _hardcoded(count_fn, assign_fn if assign else None, examples, buffer),
    }
    if buffer:  # ignores the cleaning buffer
        wrong["no-buffer"] = _solution_source(count_fn, assign_fn if assign else None, 0)
    if spec.tier != "easy":  # right answers, quadratic time: too slow for the size asked
        wrong["quadratic"] = _quadratic(count_fn, assign_fn if assign else None, buffer)
        # ... handed to a new fork before each process reaches the CPU bar (issue 29)
        wrong["fork-relay"] = attacks.fork_relay(wrong["quadratic"])
    if assign:  # right count, but rooms handed out by earliest free time, not lowest number
        wrong["earliest-free-room"] = _earliest_free(count_fn, assign_fn, buffer)

    return hs.task(
        instruction=instruction,
        workspace={module: stub},
        tests=_tests(module, count_fn, assign_fn if assign else None, buffer, big_n, secret),
        answer_path=module,
        reference=right,
        wrongs=wrong,
        note="heap of room free times",
        tags=("python", "heap", "intervals"),
        verifier_timeout_sec=360.0,
    )


def _solution_source(count_fn: str, assign_fn: str | None, buffer: int) -> str:
    src = f"""\
import heapq

BUFFER = {buffer}


def {count_fn}(bookings):
    frees = []
    for start, end in sorted((b[0], b[1]) for b in bookings):
        if frees and frees[0] <= start:
            heapq.heapreplace(frees, end + BUFFER)
        else:
            heapq.heappush(frees, end + BUFFER)
    return len(frees)
"""
    if assign_fn:
        src += f"""

def {assign_fn}(bookings):
    order = sorted(range(len(bookings)), key=lambda i: (bookings[i][0], bookings[i][1], i))
    busy = []  # (free_at, room)
    idle = []  # room numbers free now
    rooms = [0] * len(bookings)
    count = 0
    for i in order:
        start, end = bookings[i][0], bookings[i][1]
        while busy and busy[0][0] <= start:
            heapq.heappush(idle, heapq.heappop(busy)[1])
        if idle:
            room = heapq.heappop(idle)
        else:
            room, count = count, count + 1
        rooms[i] = room
        heapq.heappush(busy, (end + BUFFER, room))
    return rooms
"""
    return src


def _adjacent_only(count_fn: str, assign_fn: str | None, buffer: int) -> str:
    src = f"""\
def {count_fn}(bookings):
    items = sorted((b[0], b[1]) for b in bookings)
    if not items:
        return 0
    best = run = 1
    for (s0, e0), (s1, e1) in zip(items, items[1:]):
        run = run + 1 if s1 < e0 + {buffer} else 1
        best = max(best, min(run, 2))
    return best
"""
    if assign_fn:
        src += f"\n\ndef {assign_fn}(bookings):\n    return [i % 2 for i in range(len(bookings))]\n"
    return src


def _hardcoded(count_fn: str, assign_fn: str | None, examples: list, buffer: int) -> str:
    table = {json.dumps(ex): ri.reference(ex, buffer) for ex in examples}
    src = f"""\
import json

KNOWN = {table!r}


def {count_fn}(bookings):
    return KNOWN.get(json.dumps([list(b) for b in bookings]), 1 if bookings else 0)
"""
    if assign_fn:
        src += f"\n\ndef {assign_fn}(bookings):\n    return [0] * len(bookings)\n"
    return src


def _quadratic(count_fn: str, assign_fn: str | None, buffer: int) -> str:
    src = f"""\
def {count_fn}(bookings):
    best = 0
    for s, _ in bookings:
        best = max(best, sum(1 for a, b in bookings if a <= s < b + {buffer}))
    return best
"""
    if assign_fn:
        src += f"""

def {assign_fn}(bookings):
    order = sorted(range(len(bookings)), key=lambda i: (bookings[i][0], bookings[i][1], i))
    free_at = []
    rooms = [0] * len(bookings)
    for i in order:
        start, end = bookings[i]
        for room, t in enumerate(free_at):
            if t <= start:
                free_at[room] = end + {buffer}
                rooms[i] = room
                break
        else:
            rooms[i] = len(free_at)
            free_at.append(end + {buffer})
    return rooms
"""
    return src


def _earliest_free(count_fn: str, assign_fn: str, buffer: int) -> str:
    return (
        _solution_source(count_fn, None, buffer)
        + f"""

def {assign_fn}(bookings):
    order = sorted(range(len(bookings)), key=lambda i: (bookings[i][0], bookings[i][1], i))
    busy = []  # (free_at, room): reuse the room that freed up first
    rooms = [0] * len(bookings)
    count = 0
    for i in order:
        start, end = bookings[i]
        if busy and busy[0][0] <= start:
            room = heapq.heappop(busy)[1]
        else:
            room, count = count, count + 1
        rooms[i] = room
        heapq.heappush(busy, (end + BUFFER, room))
    return rooms
"""
    )


# Python, in the hidden test and at generation time: the reference and the large day.
#: The large day and the reference, shipped in tests/ (the large day is made again there).
_INPUTS = Path(__file__).with_name("_rooms_inputs.py")


def _small_days(buffer: int, secret: int) -> tuple[list, int]:
    """The small days drawn from ``secret``, and the large day's seed."""
    rng = random.Random(secret)
    cases = [
        [],
        [[0, 10]],
        [[0, 10], [10, 20]],
        [[0, 10], [10 + buffer, 20]],
        [[0, 10], [9 + buffer, 20]],
        [[5, 6]] * 4,
        [[1, 100], [2, 3], [3, 4], [4, 5]],
    ]
    cases += [_random_day(rng, rng.randrange(2, 30), 200, 40) for _ in range(40)]
    cases += [_random_day(rng, rng.randrange(100, 400), 2000, 120) for _ in range(5)]
    return cases, rng.randrange(2**31)


#: The first call: every small day, then whether the input is unmodified.
_COUNT_ALL = """
import copy
from {module} import {fn}
before = copy.deepcopy(INPUT)
out = [{fn}(case) for case in INPUT]
emit(out + [INPUT == before])
"""
_EACH = "from {module} import {fn}\nemit([{fn}(case) for case in INPUT])"


def _tests(module, count_fn, assign_fn, buffer: int, big_n: int, secret: int) -> dict:
    """The small days (the reference's answers made now), the large day (made again in the
    checker from its seed) under 2 s of CPU, and (hard) the rooms of all of them."""
    cases, seed = _small_days(buffer, secret)
    big = ri.big_day(random.Random(seed), big_n)
    name = module[:-3]
    checks = [
        hs.Case(f"case {i} ({len(c)} bookings)", want=ri.reference(c, buffer))
        for i, c in enumerate(cases)
    ]
    checks += [
        hs.Case("input not modified", want=True),
        hs.Case(f"{big_n} bookings within the time bar", want=ri.reference(big, buffer)),
    ]
    calls = [
        hs.python_call(_COUNT_ALL.format(module=name, fn=count_fn), cases, cases=len(cases) + 1),
        hs.python_call(
            _EACH.format(module=name, fn=count_fn),
            None,
            cases=1,
            cpu=2,
            make=hs.made("rooms_inputs", "days", seed, [big_n, buffer, []], [big]),
            reference="counts",
        ),
    ]
    if assign_fn:
        checks += [
            hs.Case(f"rooms of case {i}", want=ri.reference_rooms(c, buffer))
            for i, c in enumerate([*cases, big])
        ]
        calls.append(
            hs.python_call(
                _EACH.format(module=name, fn=assign_fn),
                None,
                make=hs.made("rooms_inputs", "days", seed, [big_n, buffer, cases], [*cases, big]),
                reference="rooms",
            )
        )
    return hs.tests(
        answer=hs.python_calls(*calls),
        cases=checks,
        compare=hs.compare("equal"),
        limits=hs.limits(timeout=60),
        modules={"rooms_inputs.py": _INPUTS.read_text()},
        timeout=300,
    )
