#!/usr/bin/env bash
# the reference, but file mtimes are not restored
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
sed -i 's/            os.utime(target, ns=(e\["mtime_ns"\], e\["mtime_ns"\]))/            pass/' snap.py
grep -q '^            pass$' snap.py
