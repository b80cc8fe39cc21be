"""build-order's large pipeline (stdlib only, Python 3.9+): too large to ship (~300 KB
compressed), it is made again in the checker from a seed (the task ships this module in
``tests/`` as ``build_order_big.py``); only the digest of its order travels. The shape of the
drawn pipelines' ``dag(n, 3, implicit=5)``, drawn in bulk (a third of the CPU)."""

import hashlib
import heapq

LETTERS = bytes(range(256)).translate(bytes(97 + (b & 15) for b in range(256)))


def big_dag(rng, n, fanin=3, implicit=5):
    """n steps, each with up to ``fanin`` earlier steps as prerequisites, the first
    ``implicit`` only mentioned."""
    order, seen = [], set()
    while len(order) < n:  # 1-5 letters of a-p, a digit on 30 %, distinct
        raw = rng.randbytes(8 * (n - len(order)) + 64)
        letters = raw.translate(LETTERS).decode()
        for j in range(0, len(raw), 8):
            name = letters[j + 1 : j + 2 + raw[j] % 5]
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


def order(deps):
    """The reference order of an acyclic pipeline: the smallest ready step first."""
    nodes = set(deps)
    for reqs in deps.values():
        nodes.update(reqs)
    waiting = {n: 0 for n in nodes}
    children = {n: [] for n in nodes}
    for n, reqs in deps.items():
        for r in set(reqs):
            waiting[n] += 1
            children[r].append(n)
    ready = sorted(n for n in nodes if waiting[n] == 0)
    out = []
    while ready:
        n = heapq.heappop(ready)
        out.append(n)
        for c in children[n]:
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, c)
    return out


def digest(value):
    return hashlib.sha256(repr(value).encode("utf-8", "surrogateescape")).hexdigest()


def expected(deps, n):
    """The expected value of the large pipeline's one case: its order's digest and length."""
    steps = order(deps)
    return [{"sha256": digest(steps), "steps": len(steps)}]


def same_order(ck, label, want, got, opts):
    """The answer's order has the reference's digest (a ``function`` comparison)."""
    if isinstance(got, list) and digest(got) == want["sha256"]:
        return ck.check(label, True)
    size = len(got) if isinstance(got, list) else None
    detail = "the order differs from the reference's ({} steps expected, got {} items)"
    return ck.check(label, False, detail.format(want["steps"], size))
