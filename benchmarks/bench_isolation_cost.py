"""What the local sandbox's user namespace and seccomp filter cost at start, on bare bubblewrap.

Three ways to start ``bwrap ... true``, interleaved so that the machine's load falls on each
alike (the sandboxes' own start, helper and all, is ``bench_sandbox.py``'s figure):

* ``root``: bwrap as root, namespaces but no user namespace and no filter (the local sandbox
  before issue 28);
* ``userns``: bwrap as the sandboxes' unprivileged uid making a user namespace, waiting while
  this process writes its id maps (``--userns-block-fd``), as :mod:`palaestra.sandbox.local`
  starts it;
* ``userns+seccomp``: the same with Docker's default profile loaded (``--seccomp``).

Prints p50 and p90 of each in milliseconds and one ``BENCH`` JSON line.

    .venv/bin/python benchmarks/bench_isolation_cost.py --n 200
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

from palaestra.sandbox.local.seccomp import seccomp_fd
from palaestra.sandbox.local.userns import id_base, write_id_maps

BASE = [
    "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
    "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
    "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
]  # fmt: skip


def start_root() -> float:
    t = time.perf_counter()
    subprocess.run(["bwrap", *BASE, "true"], check=True)
    return time.perf_counter() - t


def start_userns(seccomp: bool) -> float:
    block_r, block_w = os.pipe()
    info_r, info_w = os.pipe()
    fds = [block_r, info_w]
    extra = []
    if seccomp:
        fds.append(seccomp_fd())
        extra = ["--seccomp", str(fds[-1])]
    argv = [
        "bwrap", "--unshare-user", "--uid", "0", "--gid", "0", "--userns-block-fd", str(block_r),
        "--info-fd", str(info_w), *extra, *BASE, "true",
    ]  # fmt: skip
    t = time.perf_counter()
    proc = subprocess.Popen(
        argv, pass_fds=tuple(fds), user=id_base(), group=id_base(), extra_groups=[]
    )
    for fd in fds:
        os.close(fd)
    with os.fdopen(info_r, "rb") as info:
        pid = json.loads(info.read())["child-pid"]
    write_id_maps(pid)
    os.write(block_w, b"1")
    os.close(block_w)
    assert proc.wait() == 0
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100, help="starts of each kind")
    args = parser.parse_args()
    runs: dict[str, list[float]] = {"root": [], "userns": [], "userns+seccomp": []}
    for _ in range(args.n):
        runs["root"].append(start_root())
        runs["userns"].append(start_userns(seccomp=False))
        runs["userns+seccomp"].append(start_userns(seccomp=True))
    figures = {}
    for name, seconds in runs.items():
        p50 = statistics.median(seconds) * 1000
        p90 = statistics.quantiles(seconds, n=10)[-1] * 1000
        figures[f"{name}_p50_ms"] = round(p50, 2)
        print(f"bwrap + true, {name:15s} p50 {p50:6.2f} ms  p90 {p90:6.2f} ms  (n={len(seconds)})")
    print("BENCH " + json.dumps({"bench": "isolation_cost", **figures}))


if __name__ == "__main__":
    main()
