#!/usr/bin/env bash
# fast (bisect window), but the median comes from statistics.median: "4.0", not "4"
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
s = open("smooth.py").read()
s = s.replace("import bisect\n", "import bisect\nimport statistics\n")
s = s.replace("out.append(format_half(window[k // 2 - 1] + window[k // 2]))",
              "out.append(str(statistics.median(window[k // 2 - 1:k // 2 + 1])))")
open("smooth.py", "w").write(s)
PY
grep -q 'statistics.median' smooth.py
