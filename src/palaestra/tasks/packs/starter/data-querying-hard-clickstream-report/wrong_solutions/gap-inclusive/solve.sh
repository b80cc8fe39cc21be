#!/usr/bin/env bash
# the reference, but a gap of exactly 30 minutes starts a new session
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
sed -i 's/t - prev_t > 1800/t - prev_t >= 1800/' report.py
grep -q '>= 1800' report.py
