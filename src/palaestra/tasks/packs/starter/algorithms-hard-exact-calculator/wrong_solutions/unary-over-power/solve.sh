#!/usr/bin/env bash
# the reference, but unary minus binds tighter than ^ (-2^2 == 4)
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
p = "calc.py"
s = open(p).read()
s = s.replace('return ("neg", self.unary()) if tok[1] == "-" else self.unary()',
              'inner = self.unary()\n'
              '            if tok[1] == "-" and inner[0] == "pow":\n'
              '                return ("pow", ("neg", inner[1]), inner[2], inner[3])\n'
              '            return ("neg", inner) if tok[1] == "-" else inner', 1)
open(p, "w").write(s)
PY
grep -q 'inner = self.unary()' calc.py
