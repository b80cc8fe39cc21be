#!/usr/bin/env bash
# fixes the rounding and the remainder but not the shared default participants list
set -e
sed -i 's/return int(float(text.strip().replace(",", "")) \* 100)/return round(float(text.strip().replace(",", "")) * 100)/' splitter/money.py
python3 - <<'PY'
p = "splitter/split.py"
s = open(p).read()
s = s.replace("    share = amount // n\n    return [share] * n",
              "    share, extra = divmod(amount, n)\n"
              "    return [share + 1 if i < extra else share for i in range(n)]")
open(p, "w").write(s)
PY
grep -q divmod splitter/split.py
