#!/usr/bin/env bash
# hides the Unicode problem by encoding keys and values as ASCII escapes
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
p = "kvstore/record.py"
s = open(p).read()
s = s.replace('kb, vb = key.encode("utf-8"), value.encode("utf-8")',
              'kb, vb = key.encode("unicode_escape"), value.encode("unicode_escape")')
s = s.replace('return op, kb.decode("utf-8"), vb.decode("utf-8"), end',
              'return op, kb.decode("unicode_escape"), vb.decode("unicode_escape"), end')
open(p, "w").write(s)
PY
