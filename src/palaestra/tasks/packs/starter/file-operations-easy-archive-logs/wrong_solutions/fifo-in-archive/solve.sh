#!/usr/bin/env bash
# hostile (issue 29): the right layout, and a FIFO in it that a plain open would block on
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh >/dev/null
mkfifo archive/unsorted/pending.log
