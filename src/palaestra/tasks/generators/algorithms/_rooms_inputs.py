"""The meeting-rooms family's large day and its reference (stdlib only, Python 3.8+): the
generator computes the expected values with it, and the task ships it in ``tests/`` as
``rooms_inputs.py``, where the harness makes the large day again from its seed (too large to
ship) and, should that Python draw another day, takes the expected values from it."""

import heapq


def reference(bookings, buffer):
    """The fewest rooms: a heap of the times rooms come free (cleaning included)."""
    frees = []
    for start, end in sorted(bookings):
        if frees and frees[0] <= start:
            heapq.heapreplace(frees, end + buffer)
        else:
            heapq.heappush(frees, end + buffer)
    return len(frees)


def reference_rooms(bookings, buffer):
    """Each booking's room: by start (then end, then input order), the lowest free one."""
    order = sorted(range(len(bookings)), key=lambda i: (bookings[i][0], bookings[i][1], i))
    busy, idle, rooms, count = [], [], [0] * len(bookings), 0
    for i in order:
        start, end = bookings[i]
        while busy and busy[0][0] <= start:
            heapq.heappush(idle, heapq.heappop(busy)[1])
        if idle:
            room = heapq.heappop(idle)
        else:
            room, count = count, count + 1
        rooms[i] = room
        heapq.heappush(busy, (end + buffer, room))
    return rooms


def big_day(rng, n):
    """The large day: starts over 24 h, lengths up to 3 h scaled down."""
    rnd = rng.random
    horizon, max_len = 24 * 60 * 60, 3 * 60 * 60 // max(1, n // 2000)
    return [[s, s + 1 + int(rnd() * max_len)] for s in [int(rnd() * horizon) for _ in range(n)]]


def days(rng, n, buffer, cases):
    """The input of a call: ``cases`` (the small days, shipped), then the large day."""
    return list(cases) + [big_day(rng, n)]


def counts(value, n, buffer, cases):
    """The expected counts of a call's input."""
    return [reference(day, buffer) for day in value]


def rooms(value, n, buffer, cases):
    """The expected rooms of a call's input."""
    return [reference_rooms(day, buffer) for day in value]
