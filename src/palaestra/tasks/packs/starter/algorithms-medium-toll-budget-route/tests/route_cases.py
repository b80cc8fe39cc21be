"""The fastest_route cases (the hidden test's, drawn from its fixed seed), the reference
Dijkstra over (city, toll) states that gives their expected minutes, and the comparison (the
harness's ``function`` comparison): the minutes optimal, the route a valid walk within the
budget. Cases are made again in the checker and checked by SHA-256; should this Python draw
other cases, ``expected`` gives theirs before any agent code runs, and ``check`` walks the
routes on the same cases, drawn again by the same Python."""

import heapq
import random

SEED = 7193


def reference(n, roads, src, dst, budget):
    if src == dst:
        return 0
    adj = [[] for _ in range(n)]
    for u, v, m, t in roads:
        adj[u].append((v, m, t))
    best = {(src, 0): 0}
    heap = [(0, src, 0)]
    while heap:
        d, u, s = heapq.heappop(heap)
        if best[(u, s)] != d:
            continue
        if u == dst:
            return d
        for v, m, t in adj[u]:
            s2 = s + t
            if s2 <= budget and d + m < best.get((v, s2), 1 << 60):
                best[(v, s2)] = d + m
                heapq.heappush(heap, (d + m, v, s2))
    return None


def random_case(rng, n, m, budget):
    roads = []
    for _ in range(m):
        u, v = rng.randrange(n), rng.randrange(n)
        kind = rng.random()
        if kind < 0.3:       # slow and free
            roads.append((u, v, rng.randint(10, 40), 0))
        elif kind < 0.7:     # fast and expensive
            roads.append((u, v, rng.randint(1, 8), rng.randint(2, max(3, budget // 3 + 2))))
        else:
            roads.append((u, v, rng.randint(1, 30), rng.randint(0, 4)))
    return {"n": n, "roads": roads, "src": rng.randrange(n), "dst": rng.randrange(n),
            "budget": budget}


def cases(rng):
    """The 303 cases: hand-made ones, 250 small graphs, 40 medium, 4 of 3000 roads."""
    ex = [(0, 1, 5, 10), (0, 2, 4, 0), (2, 1, 4, 1), (1, 3, 1, 0)]
    cases = [
        {"n": 4, "roads": ex, "src": 0, "dst": 3, "budget": 10},
        {"n": 4, "roads": ex, "src": 0, "dst": 3, "budget": 5},
        {"n": 4, "roads": ex, "src": 0, "dst": 3, "budget": 0},
        {"n": 1, "roads": [], "src": 0, "dst": 0, "budget": 0},
        {"n": 3, "roads": [(0, 0, 1, 0), (1, 2, 1, 0)], "src": 0, "dst": 2, "budget": 100},
        {"n": 2, "roads": [(0, 1, 9, 0), (0, 1, 2, 5), (0, 1, 5, 2)], "src": 0, "dst": 1,
         "budget": 4},
        {"n": 2, "roads": [(1, 0, 1, 0)], "src": 0, "dst": 1, "budget": 100},
        # the fastest way to a middle city is too expensive to finish the trip from
        {"n": 4, "roads": [(0, 1, 1, 5), (0, 1, 10, 0), (1, 2, 1, 5), (2, 3, 1, 0)],
         "src": 0, "dst": 3, "budget": 5},
        # the toll-free detour revisits a city
        {"n": 3, "roads": [(0, 1, 1, 3), (1, 0, 1, 0), (0, 2, 50, 0), (1, 2, 1, 3)],
         "src": 0, "dst": 2, "budget": 3},
    ]
    for _ in range(250):
        n = rng.randint(2, 12)
        cases.append(random_case(rng, n, rng.randint(n, 5 * n), rng.randint(0, 15)))
    for _ in range(40):
        n = rng.randint(20, 80)
        cases.append(random_case(rng, n, rng.randint(n, 6 * n), rng.randint(0, 60)))
    for _ in range(4):
        cases.append(random_case(rng, 300, 3000, 100))
    return [dict(c, roads=[list(r) for r in c["roads"]]) for c in cases]


def problem(case, want, got):
    """What is wrong with the reported result ``got`` (None: nothing); ``want`` the optimal
    minutes or None."""
    if "error" in got:
        return f"raised {got['error']}"
    if want is None:
        return None if got == {"none": 1} else f"expected None, got {got}"
    if got.get("none"):
        return f"returned None but a route of {want} minutes exists"
    if got["minutes"] != want:
        return f"minutes {got['minutes']!r}, expected {want}"
    path = got["path"]
    if case["src"] == case["dst"]:
        return None if path == [] else f"expected an empty path, got {path}"
    roads = case["roads"]
    if not path or not all(type(i) is int and 0 <= i < len(roads) for i in path):
        return f"bad path {path}"
    at, minutes, toll = case["src"], 0, 0
    for i in path:
        u, v, m, t = roads[i]
        if u != at:
            return f"road {i} starts at {u}, but the route is at {at}"
        at, minutes, toll = v, minutes + m, toll + t
    if at != case["dst"]:
        return f"route ends at {at}, not {case['dst']}"
    if minutes != want:
        return f"the path takes {minutes} minutes, not {want}"
    if toll > case["budget"]:
        return f"the path costs {toll} in tolls, over the budget {case['budget']}"
    return None


def expected(made):
    """Each case's index and optimal minutes (None: no route within the budget)."""
    return [
        {"case": i, "minutes": reference(c["n"], c["roads"], c["src"], c["dst"], c["budget"])}
        for i, c in enumerate(made)
    ]


_CASES = []


def check(ck, label, want, got, options):
    """One check a case: what the child reported against the reference's minutes, its route
    walked on the case's roads."""
    if not _CASES:
        _CASES.extend(cases(random.Random(SEED)))
    case = _CASES[want["case"]]
    found = problem(case, want["minutes"], got) if isinstance(got, dict) else f"got {got!r:.80}"
    ck.check(label, found is None, found or "")
