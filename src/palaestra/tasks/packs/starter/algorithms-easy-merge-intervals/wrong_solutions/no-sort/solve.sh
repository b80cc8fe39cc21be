#!/usr/bin/env bash
# assumes the input is already sorted
set -e
cat > intervals.py <<'PY'
def merge_intervals(intervals):
    merged = []
    for s, e in intervals:
        if s > e:
            raise ValueError("bad interval")
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged
PY
