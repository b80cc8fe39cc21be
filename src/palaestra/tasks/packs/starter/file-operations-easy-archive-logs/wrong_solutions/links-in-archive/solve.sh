#!/usr/bin/env bash
# hostile: every filed file a link to its right bytes kept elsewhere, readable by root only
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh >/dev/null
mkdir -p /tmp/kept && chmod 700 /tmp/kept
find archive -type f | while read -r f; do
  k="/tmp/kept/$(echo "$f" | tr / _)"
  mv "$f" "$k" && chmod 600 "$k" && ln -s "$k" "$f"
done
