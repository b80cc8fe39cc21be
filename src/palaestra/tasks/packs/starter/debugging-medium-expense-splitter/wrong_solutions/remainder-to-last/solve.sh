#!/usr/bin/env bash
# the reference, but the extra cents go to the last participants
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
sed -i 's/share + 1 if i < extra else share/share + 1 if i >= n - extra else share/' splitter/split.py
grep -q 'i >= n - extra' splitter/split.py
