"""The merge_intervals cases (the hidden test's, drawn from its fixed seed) and the reference's
expected values: made again in the checker and checked by SHA-256; should this Python draw
other cases, ``expected`` gives theirs before any agent code runs."""


SEED = 20240611


def cases(rng):
    """The 414 cases: hand-made edge cases, 400 small random ones, one of 100 000 intervals."""
    made = [
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
        made.append(case)
    big = []
    for _ in range(100_000):
        s = rng.randint(0, 10**7)
        big.append([s, s + rng.randint(0, 60)])
    made.append(big)
    return made


def reference(case):
    """What the child reports for a correct merge_intervals on ``case``."""
    for s, e in case:
        if s > e:
            return {"error": "ValueError"}
    merged = []
    for s, e in sorted(case):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return {"types": True, "unmodified": True, "value": shown(case, merged)}


def shown(case, value):
    """A result as reported: a large case's as its length and digest (the spec stays small)."""
    if len(case) <= 1000:
        return value
    import hashlib
    import json

    text = json.dumps(value, separators=(",", ":"))
    return {"intervals": len(value), "sha256": hashlib.sha256(text.encode()).hexdigest()}


def expected(made):
    return [reference(case) for case in made]
