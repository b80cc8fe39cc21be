#!/usr/bin/env bash
# the reference, but list migrates (rewrites) a version-1 file
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
s = open("todo/cli.py").read()
s = s.replace('    tasks = store.load()["tasks"]\n', '    data = store.load()\n    store.save(data)\n    tasks = data["tasks"]\n')
open("todo/cli.py", "w").write(s)
PY
grep -q 'store.save(data)\n    tasks' todo/cli.py || grep -q 'tasks = data\["tasks"\]' todo/cli.py
