#!/usr/bin/env bash
# the reference without the truncation of a torn tail (fixes 3 of the 4 causes)
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
p = "kvstore/log.py"
s = open(p).read()
s = s.replace("            os.truncate(self.path, offset)", "            pass")
open(p, "w").write(s)
PY
