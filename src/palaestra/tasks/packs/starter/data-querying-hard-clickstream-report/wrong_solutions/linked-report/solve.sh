#!/usr/bin/env bash
# an attack (issue 29): the reference's report, then OUT_JSON replaced by a link to a
# file only root may read (the checker reads the output without following links)
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
mv report.py real_report.py
cat > report.py <<'PY'
import os, runpy, sys
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "real_report.py"),
               run_name="__main__")
os.rename(sys.argv[2], sys.argv[2] + ".real")
os.symlink(sys.argv[2] + ".real", sys.argv[2])
PY
