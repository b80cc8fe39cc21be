"""Hidden tests for fastest_route.

The agent's code runs in a child process that records raw results as JSON; optimality (against a
reference Dijkstra over (city, toll) states) and route validity are checked here.
"""

import heapq
import json
import os
import random
import subprocess
import sys
import tempfile

CHILD = r'''
import json, sys
sys.path.insert(0, "/app")
from routing import fastest_route
cases = json.load(open(sys.argv[1]))
out = []
for c in cases:
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
json.dump(out, open(sys.argv[2], "w"))
'''


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


def make_cases():
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
    rng = random.Random(7193)
    for _ in range(250):
        n = rng.randint(2, 12)
        cases.append(random_case(rng, n, rng.randint(n, 5 * n), rng.randint(0, 15)))
    for _ in range(40):
        n = rng.randint(20, 80)
        cases.append(random_case(rng, n, rng.randint(n, 6 * n), rng.randint(0, 60)))
    for _ in range(4):
        cases.append(random_case(rng, 300, 3000, 100))
    return cases


def check(case, got):
    want = reference(case["n"], case["roads"], case["src"], case["dst"], case["budget"])
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


def main():
    cases = make_cases()
    with tempfile.TemporaryDirectory() as d:
        os.chown(d, 65534, 65534)  # the agent's code runs as nobody
        inp, outp = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        with open(inp, "w") as f:
            json.dump(cases, f)
        try:
            proc = subprocess.run([sys.executable, "-I", "-c", CHILD, inp, outp], cwd="/app", user=65534, group=65534, extra_groups=[],
                                  capture_output=True, text=True, timeout=40)
        except subprocess.TimeoutExpired:
            print("FAIL: fastest_route did not finish all cases within 40 s")
            return 1
        if proc.returncode != 0 or not os.path.exists(outp):
            print("FAIL: running fastest_route crashed:\n" + proc.stderr[-3000:])
            return 1
        with open(outp) as f:
            results = json.load(f)
    if not isinstance(results, list) or len(results) != len(cases):
        print("FAIL: wrong number of results")
        return 1
    failures = 0
    for i, (case, got) in enumerate(zip(cases, results)):
        problem = check(case, got)
        if problem:
            failures += 1
            if failures <= 5:
                shown = case if len(case["roads"]) <= 12 else f"<graph with {case['n']} cities>"
                print(f"FAIL case {i}: {problem}\n  case={shown}")
    print(f"{len(cases) - failures}/{len(cases)} cases passed")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
