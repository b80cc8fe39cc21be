"""Which kind of btrfs quota accounting a directory's filesystem uses.

Docker's btrfs storage driver limits a container's size (``storage_mb``) with a qgroup limit on
the container's subvolume. What counts against it depends on the filesystem's accounting:

* ``"qgroup"`` (full qgroups): every extent the subvolume *references*, the image's files it
  shares included: the limit must be ``storage_mb`` plus the image's size. Deleting a
  subvolume costs the kernel a walk of every shared extent (the btrfs cleaner thread at 100 %
  of a core for about a second per container on a 2-core machine), which slows the next
  containers' starts down to seconds.
* ``"squota"`` (simple quotas, Linux 6.7+): only the extents the subvolume *created*; the image's
  files are its parent's. The limit is ``storage_mb`` itself, and deletion is cheap.

``scripts/provision-docker.sh`` makes the data root's filesystem with simple quotas where the
kernel has them. Read without privileges: ``/proc/self/mountinfo`` names the filesystem's
device, ``/sys/fs/btrfs/<uuid>/devices/`` the filesystem that has it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

QuotaMode = Literal["qgroup", "squota"]
SYSFS = Path("/sys/fs/btrfs")


def _unescape(field: str) -> str:
    """A mountinfo field with its octal escapes (``\\040`` for a space) decoded; other
    characters, non-ASCII ones included, stay as they are."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def btrfs_device(path: str | os.PathLike[str], mountinfo: str | None = None) -> str | None:
    """The device (``/dev/loop0``) of the btrfs filesystem mounted where ``path`` lies, or
    None when ``path`` is not on btrfs."""
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    target = os.path.realpath(path)
    best: tuple[int, str | None] = (-1, None)
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        mount_point, fstype, source = _unescape(fields[4]), fields[sep + 1], fields[sep + 2]
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= best[0]:  # the last mount on the longest prefix wins
            best = (len(mount_point), source if fstype == "btrfs" else None)
    return best[1]


def quota_mode(path: str | os.PathLike[str], sysfs: Path = SYSFS) -> QuotaMode | None:
    """``"squota"`` or ``"qgroup"`` for the btrfs filesystem ``path`` lies on when its quotas
    are on; None when they are off, when it is not btrfs, or when this cannot be told (a
    kernel before 6.7 has no ``qgroups/mode``: full qgroups, the only kind there)."""
    device = btrfs_device(path)
    if device is None:
        return None
    name = Path(device).name
    for fs in sysfs.glob("*-*-*-*-*"):
        if (fs / "devices" / name).exists():
            mode = fs / "qgroups" / "mode"
            if mode.is_file():
                text = mode.read_text().strip()
                return "squota" if text == "squota" else "qgroup" if text == "qgroup" else None
            return "qgroup" if (fs / "qgroups").is_dir() else None
    return None
