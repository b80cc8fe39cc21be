"""Wrong solutions for the starter tasks of the categories file-operations, optimization and
software-engineering (see :mod:`tests.tasks.starter.pack`)."""

WRONG_SOLUTIONS_F_TO_S: dict[str, dict[str, str]] = {
    "file-operations-easy-archive-logs": {
        # files every name that matches the pattern, without checking that the date exists
        "no-date-check": r"""
mkdir -p archive/unsorted
for path in incoming/*; do
  name=$(basename "$path")
  if [[ $name =~ ^([a-z0-9]+(-[a-z0-9]+)*)-([0-9]{2})-([0-9]{2})-([0-9]{4})\.log$ ]]; then
    s=${BASH_REMATCH[1]} d=${BASH_REMATCH[3]} m=${BASH_REMATCH[4]} y=${BASH_REMATCH[5]}
    mkdir -p "archive/$s/$y/$m" && mv "$path" "archive/$s/$y/$m/$s-$y-$m-$d.log"
  else
    mv "$path" archive/unsorted/
  fi
done
""",
        # splits the service at the first dash, so auth-api files are misfiled
        "first-dash-service": r"""
python3 - <<'PY'
import datetime, os, shutil
os.makedirs("archive/unsorted", exist_ok=True)
for name in os.listdir("incoming"):
    dest = f"archive/unsorted/{name}"
    parts = name[:-4].split("-") if name.endswith(".log") else []
    if len(parts) >= 4 and all(p.isdigit() for p in parts[-3:]):
        svc, rest = parts[0], parts[-3:]
        d, m, y = rest
        try:
            datetime.date(int(y), int(m), int(d))
            if len(d) == 2 and len(m) == 2 and len(y) == 4 and svc.islower():
                dest = f"archive/{svc}/{y}/{m}/{svc}-{y}-{m}-{d}.log"
        except ValueError:
            pass
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.move(f"incoming/{name}", dest)
PY
""",
        # right layout, but copies instead of moving
        "copy-not-move": r"""
sed 's/mv -n --/cp --/' /solution/solve.sh | bash
""",
        # hostile (issue 29): the right layout, and a FIFO in it that a plain open would block on
        "fifo-in-archive": r"""
bash /solution/solve.sh >/dev/null
mkfifo archive/unsorted/pending.log
""",
        # hostile: every filed file a link to its right bytes kept elsewhere, readable by root only
        "links-in-archive": r"""
bash /solution/solve.sh >/dev/null
mkdir -p /tmp/kept && chmod 700 /tmp/kept
find archive -type f | while read -r f; do
  k="/tmp/kept/$(echo "$f" | tr / _)"
  mv "$f" "$k" && chmod 600 "$k" && ln -s "$k" "$f"
done
""",
        # hostile: the right layout kept elsewhere, /app/archive a link to it
        "archive-is-a-link": r"""
bash /solution/solve.sh >/dev/null
mkdir -p /tmp/kept && mv archive /tmp/kept/archive && ln -s /tmp/kept/archive archive
""",
    },
    "file-operations-medium-dedupe-tree": {
        # the reference, but the keeper is the first path in os.walk order, links are absolute
        "walk-order-absolute-links": r"""
bash /solution/solve.sh >/dev/null 2>&1 || true
rm -rf shared && mkdir shared
python3 - <<'PY'
s = open("dedupe.py").read()
s = s.replace("keeper = min(group)", "keeper = group[0]")
s = s.replace("target = os.path.relpath(keep, os.path.dirname(dup))",
              "target = os.path.abspath(keep)")
open("dedupe.py", "w").write(s)
PY
""",
        # groups by file name and size instead of content
        "name-and-size": r"""
cat > dedupe.py <<'PY'
import os, sys
root = sys.argv[1]
seen = {}
for dirpath, dirs, files in sorted(os.walk(root)):
    for name in sorted(files):
        full = os.path.join(dirpath, name)
        if os.path.islink(full) or os.path.getsize(full) == 0:
            continue
        key = (name, os.path.getsize(full))
        if key in seen:
            os.remove(full)
            os.symlink(os.path.relpath(seen[key], dirpath), full)
            print(f"{os.path.relpath(full, root)}\t{os.path.relpath(seen[key], root)}")
        else:
            seen[key] = full
PY
python3 dedupe.py shared
""",
    },
    "file-operations-hard-snapshot-backup": {
        # the reference, but directory modes are applied before the files are written and the
        # manifest is written as UTF-8 text (breaks on non-UTF-8 names)
        "utf8-manifest": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("snap.py").read()
s = s.replace('json.dump({"entries": entries}, f)', 'json.dump({"entries": entries}, f, ensure_ascii=False)')
s = s.replace('encoding="ascii"', 'encoding="utf-8"')
open("snap.py", "w").write(s)
PY
""",
        # the reference, but file mtimes are not restored
        "no-mtime": r"""
bash /solution/solve.sh
sed -i 's/            os.utime(target, ns=(e\["mtime_ns"\], e\["mtime_ns"\]))/            pass/' snap.py
grep -q '^            pass$' snap.py
""",
        # the reference, but symlinks to directories are skipped
        "drops-dir-links": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("snap.py").read()
s = s.replace(" + [d for d in dirnames\n                                         if os.path.islink(os.path.join(dirpath, d))]", "")
open("snap.py", "w").write(s)
PY
""",
        # the reference, but every stored file gets a fresh object (no deduplication)
        "no-dedup": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("snap.py").read()
s = s.replace("        digest = h.hexdigest()\n",
              "        digest = h.hexdigest() + '-' + os.path.basename(tmp)[-8:]\n")
s = s.replace("        if os.path.exists(final):\n", "        if False:\n")
open("snap.py", "w").write(s)
PY
grep -q "if False:" snap.py
""",
    },
    "optimization-easy-order-report": {
        # fast, but a plain dict keeps the LAST row of a duplicated customer id
        "dict-keeps-last": r"""
bash /solution/solve.sh
sed -i 's/        first_index.setdefault(customer\["id"\], idx)  # the first row wins, as before/        first_index[customer["id"]] = idx/' report.py
grep -q 'first_index\[customer\["id"\]\] = idx' report.py
""",
        # a cosmetic speed-up that keeps the quadratic scan
        "still-quadratic": r"""
python3 - <<'PY'
s = open("report.py").read()
s = s.replace('            if customer["id"] == order["customer_id"]:',
              '            if customer["id"] is cid or customer["id"] == cid:')
s = s.replace('        match = None\n', '        match = None\n        cid = order["customer_id"]\n')
open("report.py", "w").write(s)
PY
grep -q 'is cid' report.py
""",
        # attacks (issue 29): CPU spent in orphans; a later case's input rewritten
        "orphans-burn-cpu": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("report.py").read()
burn = (
    "import os as _o, sys as _s, time as _t\n"
    "def _orphans(n=3, each=1.8):\n"
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
    "if _o.path.getsize(_s.argv[1]) > 1000000:\n"
    "    _orphans()\n"
)
open("report.py", "w").write(burn + s)
PY
grep -q '_orphans()' report.py
""",
        "shrinks-the-large-input": r"""
python3 - <<'PY'
s = open("report.py").read()
shrink = (
    "import os as _o, shutil as _sh, sys as _s\n"
    "if 'small' in _s.argv[1]:\n"
    "    for _a, _b in zip(_s.argv[1:3], ('o_big.csv', 'c_big.csv')):\n"
    "        try:\n"
    "            _sh.copyfile(_a, _o.path.join(_o.path.dirname(_a), _b))\n"
    "        except OSError:\n"
    "            pass\n"
)
open("report.py", "w").write(shrink + s)
PY
grep -q "o_big.csv" report.py
""",
    },
    "optimization-medium-moving-median": {
        # fixes the quadratic list building but still sorts every window
        "sort-each-window": r"""
sed -i 's/            values = values + \[int(line)\]/            values.append(int(line))/' smooth.py
grep -q 'values.append' smooth.py
""",
        # fast (bisect window), but the median comes from statistics.median: "4.0", not "4"
        "statistics-median": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("smooth.py").read()
s = s.replace("import bisect\n", "import bisect\nimport statistics\n")
s = s.replace("out.append(format_half(window[k // 2 - 1] + window[k // 2]))",
              "out.append(str(statistics.median(window[k // 2 - 1:k // 2 + 1])))")
open("smooth.py", "w").write(s)
PY
grep -q 'statistics.median' smooth.py
""",
        # attacks (issue 29): CPU spent in orphans; the large traces replaced by a small one
        "orphans-burn-cpu": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("smooth.py").read()
burn = (
    "import os as _o, sys as _s, time as _t\n"
    "def _orphans(n=3, each=1.8):\n"
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
    "if _o.path.getsize(_s.argv[1]) > 1000000:\n"
    "    _orphans()\n"
)
open("smooth.py", "w").write(burn + s)
PY
grep -q '_orphans()' smooth.py
""",
        "shrinks-later-inputs": r"""
python3 - <<'PY'
s = open("smooth.py").read()
shrink = (
    "import os as _o, sys as _s\n"
    "def _shrink(top):\n"
    "    for _root, _dirs, _files in _o.walk(top):\n"
    "        for _f in _files:\n"
    "            _p = _o.path.join(_root, _f)\n"
    "            try:\n"
    "                if _p != _s.argv[1] and _f.endswith('.txt'):\n"
    "                    _o.unlink(_p)\n"
    "                    _o.symlink(_s.argv[1], _p)\n"
    "            except OSError:\n"
    "                pass\n"
    "if _o.path.getsize(_s.argv[1]) < 100000:\n"
    "    _shrink(_o.path.dirname(_o.path.dirname(_s.argv[1])))\n"
    "    for _t in ('/tmp', '/var/tmp', '/dev/shm'):\n"
    "        _shrink(_t)\n"
)
open("smooth.py", "w").write(shrink + s)
PY
grep -q "_shrink(_t)" smooth.py
""",
    },
    "optimization-hard-access-log-report": {
        # fixes three of the four hotspots; the first-appearance list scan stays
        "misses-client-list": r"""
bash /solution/solve.sh
sed -i 's/        if req.ip not in seen:/        if req.ip not in clients:/' analyze.py
grep -q 'if req.ip not in clients:' analyze.py
""",
        # fast, but sessions are computed on requests sorted by time, not in file order
        "time-sorted-sessions": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("analyze.py").read()
s = s.replace("    for req in requests:\n        prev = last_seen.get(req.ip)",
              "    for req in sorted(requests, key=lambda r: r.ts):\n"
              "        prev = last_seen.get(req.ip)")
open("analyze.py", "w").write(s)
PY
grep -q 'sorted(requests, key=lambda r: r.ts)' analyze.py
""",
        # attack (issue 29): 14 s of CPU in orphans, over the 4 s bar of the large log
        "orphans-burn-cpu": r"""
bash /solution/solve.sh
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
""",
    },
    "software-engineering-easy-env-overrides": {
        # the reference, but the bool branch never runs: bools fall into the int branch
        # (bool is a subclass of int), as when ints are checked first
        "int-before-bool": r"""
bash /solution/solve.sh
sed -i 's/    if isinstance(current, bool):/    if isinstance(current, bool) and False:/' appconfig/loader.py
grep -q 'isinstance(current, bool) and False' appconfig/loader.py
""",
        # the reference, but section and key are matched case-sensitively after lower-casing
        # the variable (misses sections written with capitals in the file)
        "lowercase-only": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("appconfig/loader.py").read()
s = s.replace("    sections = {s.lower(): s for s in config}", "    sections = {s: s for s in config}")
open("appconfig/loader.py", "w").write(s)
PY
grep -q 'sections = {s: s for s in config}' appconfig/loader.py
""",
    },
    "software-engineering-medium-todo-due-dates": {
        # the reference, but new ids are still max(id) + 1 (ids reused after a removal)
        "reuses-ids": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("todo/store.py").read()
s = s.replace('    task_id = data["next_id"]',
              '    task_id = max((t["id"] for t in data["tasks"]), default=0) + 1')
open("todo/store.py", "w").write(s)
PY
grep -q 'max((t\["id"\] for t in data\["tasks"\])' todo/store.py
""",
        # the reference, but tasks without a due date sort first
        "undated-first": r"""
bash /solution/solve.sh
sed -i 's/"due": lambda t: (t\["due"\] is None, t\["due"\] or "", t\["id"\])/"due": lambda t: (t["due"] or "", t["id"])/' todo/cli.py
grep -q '"due": lambda t: (t\["due"\] or "", t\["id"\])' todo/cli.py
""",
        # the reference, but list migrates (rewrites) a version-1 file
        "list-writes-file": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("todo/cli.py").read()
s = s.replace('    tasks = store.load()["tasks"]\n', '    data = store.load()\n    store.save(data)\n    tasks = data["tasks"]\n')
open("todo/cli.py", "w").write(s)
PY
grep -q 'store.save(data)\n    tasks' todo/cli.py || grep -q 'tasks = data\["tasks"\]' todo/cli.py
""",
    },
    "software-engineering-hard-template-blocks": {
        # the reference, but single quotes are not escaped (html.escape(quote=False))
        "no-quote-escaping": r"""
bash /solution/solve.sh
sed -i 's/else html.escape(text))/else html.escape(text, quote=False))/' minitpl/engine.py
grep -q 'quote=False' minitpl/engine.py
""",
        # the reference, but loop variables are written into the enclosing scope (they leak
        # out of the loop and clobber outer names)
        "leaky-loop-scope": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("minitpl/engine.py").read()
s = s.replace('                scopes.append({name: item, "loop": loop})\n',
              '                scopes[-1].update({name: item, "loop": loop})\n')
s = s.replace('                _render(body, scopes, out)\n                scopes.pop()\n',
              '                _render(body, scopes, out)\n')
open("minitpl/engine.py", "w").write(s)
PY
grep -q 'scopes\[-1\].update' minitpl/engine.py
""",
        # the reference, but an unclosed block is reported at the end of the template
        "unclosed-at-eof": r"""
bash /solution/solve.sh
python3 - <<'PY'
s = open("minitpl/engine.py").read()
s = s.replace('raise TemplateSyntaxError(f"unclosed {stack[-1][0]}", stack[-1][1])',
              'raise TemplateSyntaxError(f"unclosed {stack[-1][0]}", source.count(chr(10)) + 1)')
open("minitpl/engine.py", "w").write(s)
PY
grep -q 'source.count(chr(10)) + 1' minitpl/engine.py
""",
    },
}
