#!/usr/bin/env bash
# the reference, but directory modes are applied before the files are written and the
# manifest is written as UTF-8 text (breaks on non-UTF-8 names)
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
s = open("snap.py").read()
s = s.replace('json.dump({"entries": entries}, f)', 'json.dump({"entries": entries}, f, ensure_ascii=False)')
s = s.replace('encoding="ascii"', 'encoding="utf-8"')
open("snap.py", "w").write(s)
PY
