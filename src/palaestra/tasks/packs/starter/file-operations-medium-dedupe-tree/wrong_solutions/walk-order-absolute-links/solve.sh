#!/usr/bin/env bash
# the reference, but the keeper is the first path in os.walk order, links are absolute
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh >/dev/null 2>&1 || true
rm -rf shared && mkdir shared
python3 - <<'PY'
s = open("dedupe.py").read()
s = s.replace("keeper = min(group)", "keeper = group[0]")
s = s.replace("target = os.path.relpath(keep, os.path.dirname(dup))",
              "target = os.path.abspath(keep)")
open("dedupe.py", "w").write(s)
PY
