#!/usr/bin/env bash
# an attack (issue 29): the report is a FIFO (the checker would block reading it)
set -e
cat > report.py <<'PY'
import os, sys
os.mkfifo(sys.argv[2])
PY
