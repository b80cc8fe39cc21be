#!/usr/bin/env bash
# the reference, but new ids are still max(id) + 1 (ids reused after a removal)
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
s = open("todo/store.py").read()
s = s.replace('    task_id = data["next_id"]',
              '    task_id = max((t["id"] for t in data["tasks"]), default=0) + 1')
open("todo/store.py", "w").write(s)
PY
grep -q 'max((t\["id"\] for t in data\["tasks"\])' todo/store.py
