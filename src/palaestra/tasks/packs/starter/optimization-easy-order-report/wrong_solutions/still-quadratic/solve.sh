#!/usr/bin/env bash
# a cosmetic speed-up that keeps the quadratic scan
set -e
python3 - <<'PY'
s = open("report.py").read()
s = s.replace('            if customer["id"] == order["customer_id"]:',
              '            if customer["id"] is cid or customer["id"] == cid:')
s = s.replace('        match = None\n', '        match = None\n        cid = order["customer_id"]\n')
open("report.py", "w").write(s)
PY
grep -q 'is cid' report.py
