#!/usr/bin/env bash
# the reference, but single quotes are not escaped (html.escape(quote=False))
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
sed -i 's/else html.escape(text))/else html.escape(text, quote=False))/' minitpl/engine.py
grep -q 'quote=False' minitpl/engine.py
