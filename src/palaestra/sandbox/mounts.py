"""mount(2) and umount(2) through libc, and the mount points below a directory.

What the local backend mounts (a sandbox's tmpfs disk quota, its overlays, the cgroup2 remount
of :func:`~palaestra.sandbox.limits.favor_dynamic_moves`) goes through here. Blocking; root.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from pathlib import Path

_MS_NOSUID, _MS_NODEV = 2, 4
MS_REMOUNT = 32
#: Per-mount flags a remount must repeat (left out, a remount would clear them).
MOUNT_FLAGS = {
    "ro": 1,
    "nosuid": 2,
    "nodev": 4,
    "noexec": 8,
    "sync": 16,
    "noatime": 1024,
    "nodiratime": 2048,
    "relatime": 1 << 21,
    "strictatime": 1 << 24,
}
_MNT_DETACH = 2


def mount(
    source: str, target: Path | str, fstype: str, options: str, flags: int = _MS_NOSUID | _MS_NODEV
) -> None:
    """mount(2), by default with nosuid,nodev (needs root). Blocking."""
    libc = ctypes.CDLL(None, use_errno=True)
    if (
        libc.mount(source.encode(), os.fsencode(target), fstype.encode(), flags, options.encode())
        != 0
    ):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(target))


def unmount(path: str) -> None:
    """Lazily unmount ``path`` (a sandbox's tmpfs or overlay); no mount there is fine.
    Blocking."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(os.fsencode(path), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOENT):
            raise OSError(err, os.strerror(err), path)


def mounts_under(path: Path | str) -> list[str]:
    """Mount points at or below ``path``, deepest first (to unmount in that order). Blocking.

    For clean-up that cannot trust its records: a sandbox whose limits were applied by a start
    that never reported back, or whose meta.json is gone.
    """
    root = os.path.realpath(os.fsdecode(path)).rstrip("/")
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    points = []
    for line in lines:
        # mountinfo escapes space, tab, newline and backslash in paths as octal (\040...)
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
        if point == root or point.startswith(root + "/"):
            points.append(point)
    return sorted(set(points), key=lambda p: p.count("/"), reverse=True)
