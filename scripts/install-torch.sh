#!/usr/bin/env bash
# Installs torch's CPU build into a venv (`make setup` runs it): PyPI's Linux torch wheel is the
# CUDA build (several GB), PyTorch's CPU index has the CPU one.
#
#   scripts/install-torch.sh PYTHON INDEX [REQUIREMENT]
#
# PYTHON is the venv's python, INDEX the index with the CPU build (the Makefile's TORCH_INDEX; empty:
# pip's own configured index), REQUIREMENT defaults to torch==2.13.0. Fast either way:
# - a venv that already satisfies REQUIREMENT is left alone (no index is asked);
# - INDEX is probed once with a 3 s timeout; when it does not answer, pip installs REQUIREMENT from
#   its configured index (PyPI, or the mirror in pip.conf) at once, instead of retrying the
#   unreachable index for minutes (pip retries each URL five times, with back-off).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: scripts/install-torch.sh PYTHON INDEX [REQUIREMENT]" >&2
  exit 2
fi
python=$1
index=$2
requirement=${3:-torch==2.13.0}

# Already there: `pip install` would say so too, but only after asking INDEX for the dependencies.
if "$python" - "$requirement" <<'EOF'; then
import sys
from importlib.metadata import PackageNotFoundError, version

name, _, wanted = sys.argv[1].partition("==")
try:
    installed = version(name)
except PackageNotFoundError:
    sys.exit(1)
# torch's CPU build is 2.13.0+cpu: the local label does not change what `==2.13.0` means
sys.exit(0 if not wanted or installed.split("+")[0] == wanted else 1)
EOF
  echo "install-torch: $requirement already installed"
  exit 0
fi

if [ -z "$index" ]; then
  exec "$python" -m pip install -q "$requirement"
fi

# One request, 3 s at most: an index that answers anything below 500 is there.
if "$python" - "$index" <<'EOF'; then
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

url = sys.argv[1]
if url.startswith("file:"):
    sys.exit(0 if os.path.isdir(urllib.parse.urlparse(url).path) else 1)
try:
    urllib.request.urlopen(url, timeout=3).close()
except urllib.error.HTTPError as error:
    sys.exit(0 if error.code < 500 else 1)
except (OSError, ValueError):
    sys.exit(1)
EOF
  exec "$python" -m pip install -q --retries 1 --timeout 15 "$requirement" --index-url "$index"
fi

echo "install-torch: $index did not answer in 3 s; installing $requirement from pip's" \
  "configured index instead (on PyPI that is the CUDA build; set TORCH_INDEX to a mirror of" \
  "the CPU index, see README)" >&2
exec "$python" -m pip install -q "$requirement"
