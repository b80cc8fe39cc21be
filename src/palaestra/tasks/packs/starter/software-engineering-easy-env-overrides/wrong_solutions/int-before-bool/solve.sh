#!/usr/bin/env bash
# the reference, but the bool branch never runs: bools fall into the int branch
# (bool is a subclass of int), as when ints are checked first
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
sed -i 's/    if isinstance(current, bool):/    if isinstance(current, bool) and False:/' appconfig/loader.py
grep -q 'isinstance(current, bool) and False' appconfig/loader.py
