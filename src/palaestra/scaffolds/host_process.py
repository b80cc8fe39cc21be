"""The host side of the ``external`` scaffold's processes: a host command contained in its own
pid namespace, killed as a group, its output's tail read back; and the mounts that make this
Python run inside a sandbox."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from palaestra.sandbox.base import Mount


def contained(argv: list[str], cwd: str | Path) -> list[str]:
    """``argv`` under bwrap in a new pid namespace that sees the host's files, devices and
    network: its pid 1 ends when the command does, and the kernel then kills the rest of the
    namespace (a process-group kill misses what ``setsid`` moved out of the group)."""
    return [
        "bwrap",
        "--dev-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--unshare-pid",
        "--die-with-parent",
        "--chdir",
        str(cwd),
        "--",
        *argv,
    ]


def kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def tail(path: Path, chars: int) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(size - 4 * chars, 0))
        return f.read().decode(errors="replace")[-chars:]


def host_python_mounts() -> tuple[Mount, ...]:
    """Read-only mounts that make this Python, with the packages of its environment, run in a
    sandbox at the same paths as here (``sys.executable`` then works inside). For harnesses
    installed on the host that must run in the sandbox; the agent can read these files."""
    system = ("/usr", "/bin", "/lib", "/opt", "/etc")
    paths = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)}
    return tuple(
        Mount(source=Path(p), target=p)
        for p in sorted(paths)
        if not any(p == d or p.startswith(d + "/") for d in system)
    )
