#!/usr/bin/env bash
# one label per city (the first, fastest arrival) instead of one per (city, toll)
set -e
cat > routing.py <<'PY'
import heapq
def fastest_route(n, roads, src, dst, budget):
    if src == dst:
        return (0, [])
    adj = [[] for _ in range(n)]
    for i, (u, v, m, t) in enumerate(roads):
        adj[u].append((v, m, t, i))
    done = set()
    heap = [(0, 0, src, [])]
    while heap:
        d, spent, u, path = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        if u == dst:
            return (d, path)
        for v, m, t, i in adj[u]:
            if spent + t <= budget and v not in done:
                heapq.heappush(heap, (d + m, spent + t, v, path + [i]))
    return None
PY
