#!/usr/bin/env bash
# the reference, but decimal literals go through float
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
sed -i 's/return ("num", Fraction(s\[start:j\]), start)/return ("num", Fraction(float(s[start:j])), start)/' calc.py
grep -q 'Fraction(float(' calc.py
