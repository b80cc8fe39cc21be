#!/usr/bin/env bash
# the reference, but an unclosed block is reported at the end of the template
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
s = open("minitpl/engine.py").read()
s = s.replace('raise TemplateSyntaxError(f"unclosed {stack[-1][0]}", stack[-1][1])',
              'raise TemplateSyntaxError(f"unclosed {stack[-1][0]}", source.count(chr(10)) + 1)')
open("minitpl/engine.py", "w").write(s)
PY
grep -q 'source.count(chr(10)) + 1' minitpl/engine.py
