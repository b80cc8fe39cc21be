#!/usr/bin/env bash
# right layout, but copies instead of moving
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
sed 's/mv -n --/cp --/' /solution/reference.sh | bash
