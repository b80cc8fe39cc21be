#!/usr/bin/env bash
# the reference, but every stored file gets a fresh object (no deduplication)
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
s = open("snap.py").read()
s = s.replace("        digest = h.hexdigest()\n",
              "        digest = h.hexdigest() + '-' + os.path.basename(tmp)[-8:]\n")
s = s.replace("        if os.path.exists(final):\n", "        if False:\n")
open("snap.py", "w").write(s)
PY
grep -q "if False:" snap.py
