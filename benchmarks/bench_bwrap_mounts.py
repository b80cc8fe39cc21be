"""What the host's unrelated mounts cost a local sandbox's bubblewrap, and what detaching them
(``palaestra-setids --detach``, :mod:`palaestra.sandbox.local.mountns`) saves.

bwrap is started with a default sandbox's own options (its binds, /proc covers, /dev, seccomp
filter; ``true`` instead of the helper) through the launcher as the sandboxes' uid, waiting
for its id maps as a sandbox does, in turn: in the host's mount namespace, and with the mounts
the sandbox does not use detached. Each start's wall time and its CPU time (user + system of
the launcher, bwrap and its child, from ``wait4``: less sensitive to the machine's load than
wall time) are reported, p50. ``--extra-mounts N`` first mounts N small tmpfs under a
temporary directory (as N other sandboxes with a disk quota would), removed at the end.

    .venv/bin/python benchmarks/bench_bwrap_mounts.py --n 100 [--extra-mounts 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from palaestra.sandbox import SandboxSpec
from palaestra.sandbox.helper_runtime import helper_runtime, setids_argv
from palaestra.sandbox.limits import SandboxLimits
from palaestra.sandbox.local.bwrap import bwrap_command, unused_mounts
from palaestra.sandbox.local.layout import writable_binds, writable_dirs
from palaestra.sandbox.local.mountns import mount_points
from palaestra.sandbox.local.userns import id_base, write_id_maps
from palaestra.sandbox.mounts import mount, unmount


def start(sandbox_dir: Path, detached: bool) -> tuple[float, float]:
    """(wall, cpu) seconds of one bwrap start to its exit."""
    spec = SandboxSpec()
    binds = writable_binds(sandbox_dir, writable_dirs(spec))
    detach = unused_mounts(sandbox_dir, [helper_runtime()], mount_points())
    command = bwrap_command(spec, None, binds, [helper_runtime()], SandboxLimits(""), detach)
    argv = command.argv[: command.argv.index("--")] + ["--", "true"]
    info_r, info_w = os.pipe()
    detach = command.detach if detached else ()
    start_s = time.perf_counter()
    proc = subprocess.Popen(
        [*setids_argv(id_base(), detach), "bwrap", "--info-fd", str(info_w), *argv],
        pass_fds=(info_w, *command.pass_fds),
    )
    os.close(info_w)
    command.close_fds()
    with os.fdopen(info_r, "rb") as info:
        write_id_maps(json.loads(info.read())["child-pid"])
    os.write(command.userns_block, b"1")
    os.close(command.userns_block)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, proc.returncode
    return time.perf_counter() - start_s, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100, help="starts of each kind")
    parser.add_argument("--extra-mounts", type=int, default=0, help="unrelated tmpfs mounts")
    args = parser.parse_args()
    runs: dict[str, tuple[list[float], list[float]]] = {"host": ([], []), "detached": ([], [])}
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o711)
        sandbox_dir = Path(tmp, "sb")
        for target in writable_dirs(SandboxSpec()):
            backing = sandbox_dir / "fs" / target.lstrip("/")
            backing.mkdir(parents=True)
            os.chown(backing, id_base(), id_base())
        extra = [Path(tmp, f"m{i}") for i in range(args.extra_mounts)]
        made: list[Path] = []
        try:
            for path in extra:
                path.mkdir()
                mount("tmpfs", path, "tmpfs", "size=64k")
                made.append(path)
            print(f"{len(mount_points())} host mounts, load {os.getloadavg()[0]:.1f}")
            for _ in range(args.n):
                for name, (walls, cpus) in runs.items():
                    wall, cpu = start(sandbox_dir, detached=name == "detached")
                    walls.append(wall)
                    cpus.append(cpu)
        finally:
            for path in reversed(made):
                unmount(str(path))
    figures = {}
    for name, (walls, cpus) in runs.items():
        wall, cpu = statistics.median(walls) * 1000, statistics.median(cpus) * 1000
        figures[f"{name}_wall_p50_ms"], figures[f"{name}_cpu_p50_ms"] = (
            round(wall, 2),
            round(cpu, 2),
        )
        print(
            f"bwrap + true, {name:9s} wall p50 {wall:6.2f} ms  cpu p50 {cpu:6.2f} ms  (n={len(walls)})"
        )
    print(
        "BENCH "
        + json.dumps({"bench": "bwrap_mounts", "extra_mounts": args.extra_mounts, **figures})
    )


if __name__ == "__main__":
    main()
