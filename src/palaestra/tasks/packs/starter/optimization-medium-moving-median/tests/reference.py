"""The correct fast moving median (bisect.insort): its outputs are the hidden cases' expected
values."""

import bisect, sys
vals = []
for line in open(sys.argv[1]):
    line = line.strip()
    if line and not line.startswith("#"):
        vals.append(int(line))
k = int(sys.argv[2])
win = sorted(vals[:k - 1]) if k <= len(vals) else []
out = []
def half(t):
    return str(t // 2) if t % 2 == 0 else f"{t / 2:.1f}"
for end in range(k, len(vals) + 1):
    bisect.insort(win, vals[end - 1])
    out.append(half(2 * win[k // 2]) if k % 2 else half(win[k // 2 - 1] + win[k // 2]))
    del win[bisect.bisect_left(win, vals[end - k])]
sys.stdout.write("".join(s + "\n" for s in out))
