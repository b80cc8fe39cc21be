#!/usr/bin/env bash
# fastest route ignoring tolls, rejected afterwards if it is over budget
set -e
cat > routing.py <<'PY'
import heapq
def fastest_route(n, roads, src, dst, budget):
    if src == dst:
        return (0, [])
    adj = [[] for _ in range(n)]
    for i, (u, v, m, t) in enumerate(roads):
        adj[u].append((v, m, t, i))
    best, prev, heap = {src: 0}, {}, [(0, src)]
    while heap:
        d, u = heapq.heappop(heap)
        if d != best[u]:
            continue
        for v, m, t, i in adj[u]:
            if d + m < best.get(v, float("inf")):
                best[v] = d + m
                prev[v] = (u, i)
                heapq.heappush(heap, (d + m, v))
    if dst not in best:
        return None
    path, at = [], dst
    while at != src:
        at, i = prev[at]
        path.append(i)
    path.reverse()
    if sum(roads[i][3] for i in path) > budget:
        return None
    return (best[dst], path)
PY
