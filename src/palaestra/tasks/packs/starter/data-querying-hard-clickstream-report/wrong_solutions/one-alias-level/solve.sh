#!/usr/bin/env bash
# the reference, but only one level of aliases is followed
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
s = open("report.py").read()
s = s.replace("WHERE c.depth < 1000", "WHERE c.depth < 1")
open("report.py", "w").write(s)
PY
grep -q "c.depth < 1$" report.py
