#!/usr/bin/env bash
# silences the crash by skipping rows that do not split into 5 fields
set -e
python3 - <<'PY'
p = "inventory/loader.py"
s = open(p).read()
s = s.replace("        items.append(parse_row(line.split(\",\")))",
              "        fields = line.split(\",\")\n        if len(fields) != 5:\n"
              "            continue\n        items.append(parse_row(fields))")
open(p, "w").write(s)
PY
grep -q "len(fields) != 5" inventory/loader.py
python3 -m inventory summary items.csv
