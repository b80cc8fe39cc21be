#!/usr/bin/env bash
# attack (issue 29): 14 s of CPU in orphans, over the 4 s bar of the large log
# /solution/reference.sh: the task's reference solution (the pack's cache copy adds it)
set -e
bash /solution/reference.sh
python3 - <<'PY'
s = open("analyze.py").read()
burn = (
    "import os as _o, sys as _s, time as _t\n"
    "def _orphans(n=4, each=3.5):\n"
    "    r, w = _o.pipe()\n"
    "    for _ in range(n):\n"
    "        if _o.fork() == 0:\n"
    "            if _o.fork() == 0:\n"
    "                end = _t.process_time() + each\n"
    "                while _t.process_time() < end:\n"
    "                    pass\n"
    "                _o.write(w, b'x')\n"
    "            _o._exit(0)\n"
    "    for _ in range(n):\n"
    "        _o.read(r, 1)\n"
    "if _o.path.getsize(_s.argv[1]) > 5000000:\n"
    "    _orphans()\n"
)
open("analyze.py", "w").write(burn + s)
PY
grep -q '_orphans()' analyze.py
