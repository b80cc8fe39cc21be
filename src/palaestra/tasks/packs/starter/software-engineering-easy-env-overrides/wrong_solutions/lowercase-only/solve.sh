#!/usr/bin/env bash
# the reference, but section and key are matched case-sensitively after lower-casing
# the variable (misses sections written with capitals in the file)
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
s = open("appconfig/loader.py").read()
s = s.replace("    sections = {s.lower(): s for s in config}", "    sections = {s: s for s in config}")
open("appconfig/loader.py", "w").write(s)
PY
grep -q 'sections = {s: s for s in config}' appconfig/loader.py
