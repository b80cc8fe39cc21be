#!/usr/bin/env bash
# the reference, but loop variables are written into the enclosing scope (they leak
# out of the loop and clobber outer names)
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
s = open("minitpl/engine.py").read()
s = s.replace('                scopes.append({name: item, "loop": loop})\n',
              '                scopes[-1].update({name: item, "loop": loop})\n')
s = s.replace('                _render(body, scopes, out)\n                scopes.pop()\n',
              '                _render(body, scopes, out)\n')
open("minitpl/engine.py", "w").write(s)
PY
grep -q 'scopes\[-1\].update' minitpl/engine.py
