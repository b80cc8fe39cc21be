#!/usr/bin/env bash
# the reference, but compaction reopens nothing (the stale-handle bug stays)
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
p = "kvstore/store.py"
s = open(p).read()
s = s.replace("        self._log.close()\n        try:\n", "        try:\n")
s = s.replace("            self._log.open()  # append to the new file, not the replaced one",
              "            pass")
open(p, "w").write(s)
PY
