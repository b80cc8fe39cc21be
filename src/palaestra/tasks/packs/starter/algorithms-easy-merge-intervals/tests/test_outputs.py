"""Hidden tests for merge_intervals.

The agent's code runs in a child process (python3 -I) that only records JSON results; every
comparison happens here, so nothing the agent's module does at import time can fake a pass.
"""

import json
import os
import random
import subprocess
import sys
import tempfile

CHILD = r'''
import copy, json, sys
sys.path.insert(0, "/app")
from intervals import merge_intervals
cases = json.load(open(sys.argv[1]))
out = []
for case in cases:
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
    ok_types = isinstance(res, list) and all(
        type(p) is tuple and len(p) == 2 and all(type(x) is int for x in p) for p in res)
    out.append({"types": ok_types, "unmodified": pairs == before,
                "value": [list(p) for p in res] if ok_types else repr(res)[:200]})
json.dump(out, open(sys.argv[2], "w"))
'''


def reference(case):
    for s, e in case:
        if s > e:
            return {"error": "ValueError"}
    merged = []
    for s, e in sorted(case):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return {"types": True, "unmodified": True, "value": merged}


def make_cases():
    rng = random.Random(20240611)
    cases = [
        [],
        [[5, 5]],
        [[1, 3], [3, 5]],
        [[1, 2], [3, 4]],
        [[3, 4], [1, 2]],
        [[1, 10], [2, 3], [4, 5]],
        [[1, 3], [1, 3], [1, 3]],
        [[-5, -1], [-1, 0], [2, 2], [0, 1]],
        [[10**18, 10**18 + 5], [-(10**18), 0], [10**18 + 5, 10**19]],
        [[0, 0], [1, 1], [2, 2], [1, 2]],
        [[4, 1]],
        [[1, 2], [5, 3], [7, 9]],
        [[7, 8], [1, 2], [2, 3], [6, 7]],
    ]
    for _ in range(400):
        n = rng.randint(1, 40)
        span = rng.choice([5, 20, 100, 1000])
        case = []
        for _ in range(n):
            s = rng.randint(-span, span)
            case.append([s, s + rng.randint(0, max(1, span // rng.choice([2, 5, 20])))])
        rng.shuffle(case)
        cases.append(case)
    big = []
    for _ in range(100_000):
        s = rng.randint(0, 10**7)
        big.append([s, s + rng.randint(0, 60)])
    cases.append(big)
    return cases


def main():
    cases = make_cases()
    with tempfile.TemporaryDirectory() as d:
        os.chown(d, 65534, 65534)  # the agent's code runs as nobody
        inp, outp = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        with open(inp, "w") as f:
            json.dump(cases, f)
        try:
            proc = subprocess.run([sys.executable, "-I", "-c", CHILD, inp, outp], cwd="/app", user=65534, group=65534, extra_groups=[],
                                  capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            print("FAIL: merge_intervals did not finish all cases within 20 s")
            return 1
        if proc.returncode != 0 or not os.path.exists(outp):
            print("FAIL: running merge_intervals crashed:\n" + proc.stderr[-3000:])
            return 1
        with open(outp) as f:
            results = json.load(f)
    if not isinstance(results, list) or len(results) != len(cases):
        print("FAIL: wrong number of results")
        return 1
    failures = 0
    for i, (case, got) in enumerate(zip(cases, results)):
        want = reference(case)
        if got != want:
            failures += 1
            if failures <= 5:
                shown = case if len(case) <= 20 else f"<{len(case)} intervals>"
                print(f"FAIL case {i}: input={shown}\n  expected={str(want)[:300]}\n  got={str(got)[:300]}")
    print(f"{len(cases) - failures}/{len(cases)} cases passed")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
