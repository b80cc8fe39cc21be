#!/usr/bin/env bash
# treats touching intervals ([1,3],[3,5]) as separate
set -e
cat > intervals.py <<'PY'
def merge_intervals(intervals):
    pairs = sorted((s, e) for s, e in intervals)
    if any(s > e for s, e in pairs):
        raise ValueError("bad interval")
    merged = []
    for s, e in pairs:
        if merged and s < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged
PY
