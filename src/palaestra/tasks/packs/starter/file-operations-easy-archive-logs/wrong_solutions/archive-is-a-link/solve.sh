#!/usr/bin/env bash
# hostile: the right layout kept elsewhere, /app/archive a link to it
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh >/dev/null
mkdir -p /tmp/kept && mv archive /tmp/kept/archive && ln -s /tmp/kept/archive archive
