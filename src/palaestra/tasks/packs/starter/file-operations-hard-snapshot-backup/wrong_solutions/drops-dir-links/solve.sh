#!/usr/bin/env bash
# the reference, but symlinks to directories are skipped
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
s = open("snap.py").read()
s = s.replace(" + [d for d in dirnames\n                                         if os.path.islink(os.path.join(dirpath, d))]", "")
open("snap.py", "w").write(s)
PY
