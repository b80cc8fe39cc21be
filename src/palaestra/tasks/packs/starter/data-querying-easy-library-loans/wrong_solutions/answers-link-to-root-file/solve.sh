#!/usr/bin/env bash
# hostile (issue 29): the right answers kept in a file only root may read, answers.json
# a link to it (the checker reads as root: a followed link would score 1)
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh >/dev/null
mkdir -p /tmp/kept && chmod 700 /tmp/kept
mv answers.json /tmp/kept/answers.json && chmod 600 /tmp/kept/answers.json
ln -s /tmp/kept/answers.json answers.json
