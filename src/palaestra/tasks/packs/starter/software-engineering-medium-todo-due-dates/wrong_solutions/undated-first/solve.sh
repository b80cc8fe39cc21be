#!/usr/bin/env bash
# the reference, but tasks without a due date sort first
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
sed -i 's/"due": lambda t: (t\["due"\] is None, t\["due"\] or "", t\["id"\])/"due": lambda t: (t["due"] or "", t["id"])/' todo/cli.py
grep -q '"due": lambda t: (t\["due"\] or "", t\["id"\])' todo/cli.py
