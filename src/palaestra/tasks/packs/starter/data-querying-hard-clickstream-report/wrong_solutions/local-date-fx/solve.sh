#!/usr/bin/env bash
# the reference, but purchases use the rate of the local (not UTC) calendar date
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
s = open("report.py").read()
s = s.replace("SELECT r.user_id, CAST(strftime('%s', e.ts) AS INTEGER) AS epoch, e.event_id,",
              "SELECT r.user_id, CAST(strftime('%s', e.ts) AS INTEGER) AS epoch, substr(e.ts, 1, 10) AS event_id,")
s = s.replace("eur = to_eur(amount, cur, day)", "eur = to_eur(amount, cur, _eid)")
open("report.py", "w").write(s)
PY
grep -q 'to_eur(amount, cur, _eid)' report.py
