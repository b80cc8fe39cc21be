"""The user namespace of local sandboxes: their ids are an unprivileged range of the host's.

Every local sandbox runs in a user namespace of its own whose ids ``0..ID_COUNT-1`` map onto
the host's ``base..base+ID_COUNT-1`` (:func:`id_base`; ``$PALAESTRA_SANDBOX_ID_BASE``, default
:data:`DEFAULT_ID_BASE`). Root inside is the host's uid ``base``, ``nobody`` (65534) is
``base+65534``: a process that escapes the sandbox's other namespaces is an unprivileged user
of the host, and a file "root" makes in the sandbox belongs to uid ``base`` on the host. Its
capabilities hold only in namespaces the sandbox owns, and on files whose ids are mapped.

How a sandbox gets there (see :mod:`.sandbox`): bubblewrap starts as uid ``base`` with no
capabilities and makes the user namespace; it reports its child's pid and waits
(``--userns-block-fd``) while this process, as root, writes the child's ``uid_map`` and
``gid_map`` (:func:`write_id_maps`), which only a privileged process can do for a range.

The host's files keep their ids. What a sandbox must own is shifted into the range when it is
made (:func:`shift_into_range`: its writable directories and the spec's files, on the host);
a root filesystem is shown through an idmapped mount (:func:`idmapped_clone`), so the image's
root-owned files are root's inside while staying as they are on disk. The host's system
directories (``/usr``, ``/etc``...) are bound read-only as they are: their owner, the host's
root, is not mapped, so they show as owned by ``nobody`` inside, and root inside has no more
rights on them than any other user.

One range serves every sandbox of the host (as Docker's ``userns-remap`` does): what keeps
sandboxes apart is their other namespaces; the range keeps them apart from the host.
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
import struct
import subprocess
from pathlib import Path

#: Environment variable naming the first host id of the sandboxes' range.
ID_BASE_ENV = "PALAESTRA_SANDBOX_ID_BASE"
#: Outside every range systemd assigns (users below 60000, containers 524288-1879048191) and
#: below 2**31, where tools that keep ids in a signed int still work.
DEFAULT_ID_BASE = 2_000_000_000
#: Ids a sandbox has: 0 (root) to 65535, ``nobody`` (65534) included.
ID_COUNT = 65536

_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442  # the same on every arch
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC = 1, os.O_CLOEXEC
_AT_FDCWD, _AT_EMPTY_PATH, _AT_RECURSIVE = -100, 0x1000, 0x8000
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
_MOUNT_ATTR_IDMAP = 0x100000
_MOVE_MOUNT_F_EMPTY_PATH = 0x4


@functools.cache
def id_base() -> int:
    """The host id of the sandboxes' root (checked once per process)."""
    raw = os.environ.get(ID_BASE_ENV, "").strip()
    if not raw:
        return DEFAULT_ID_BASE
    try:
        base = int(raw)
    except ValueError:
        base = -1
    if not 65536 <= base <= 2**32 - 2 - ID_COUNT:
        raise ValueError(
            f"{ID_BASE_ENV}={raw!r} must be a host uid from 65536 to {2**32 - 2 - ID_COUNT}, the "
            f"first of {ID_COUNT} ids no user of the host has"
        )
    return base


def id_map() -> str:
    """The line of ``uid_map`` and ``gid_map``."""
    return f"0 {id_base()} {ID_COUNT}\n"


def write_id_maps(pid: int) -> None:
    """Map the range into the user namespace of ``pid`` (a sandbox's pid 1 waiting for it).
    Blocking; needs root."""
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{pid}/{name}", "w") as f:
            f.write(id_map())


def shift_into_range(top: Path) -> None:
    """Give ``top`` and everything below it (links themselves, never followed) the ids they
    have shifted into the range: a host id ``i`` below :data:`ID_COUNT` becomes ``base + i``;
    ids already in the range stay. Blocking; only on a tree no sandbox can write yet."""
    for path in (top, *_walk(top)):
        shift_into_range_one(path)


def shift_into_range_one(path: Path | str) -> None:
    """:func:`shift_into_range` for ``path`` alone."""
    base = id_base()
    st = os.lstat(path)
    uid = st.st_uid + base if st.st_uid < ID_COUNT else st.st_uid
    gid = st.st_gid + base if st.st_gid < ID_COUNT else st.st_gid
    if (uid, gid) != (st.st_uid, st.st_gid):
        os.lchown(path, uid, gid)
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o6000:
            os.chmod(path, stat.S_IMODE(st.st_mode))  # chown cleared setuid/setgid bits


def _walk(top: Path) -> list[str]:
    found = []
    for here, dirs, files in os.walk(top):
        found += [os.path.join(here, name) for name in (*dirs, *files)]
    return found


@functools.cache
def _template_userns() -> int:
    """A user namespace with the sandboxes' mapping, kept open for the process's life: what
    idmapped mounts take their mapping from. Made by util-linux's ``unshare``, whose shell
    says when the namespace exists and waits while its maps are written. Blocking."""
    proc = subprocess.Popen(
        ["unshare", "--user", "sh", "-c", "echo ready; exec cat >/dev/null"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        if proc.stdout.readline() != b"ready\n":
            raise OSError("cannot make a user namespace for the sandboxes' idmapped mounts")
        write_id_maps(proc.pid)
        return os.open(f"/proc/{proc.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        proc.stdin.close()
        proc.stdout.close()
        proc.wait()


def idmapped_clone(source: Path, target: Path) -> None:
    """Mount a read-only, nosuid, nodev copy of the mount tree at ``source`` on ``target``,
    showing its files' ids shifted into the range (host root's files are the sandbox root's).
    Nothing on disk changes. Blocking; needs root and Linux 5.12+ (overlay lower layers on an
    idmapped mount: 5.19+)."""
    libc = ctypes.CDLL(None, use_errno=True)
    flags = _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC | _AT_RECURSIVE
    tree = _check(libc.syscall(_SYS_OPEN_TREE, _AT_FDCWD, os.fsencode(source), flags), source)
    try:
        attrs = _MOUNT_ATTR_IDMAP | _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV
        # struct mount_attr {u64 attr_set, attr_clr, propagation, userns_fd}
        packed = struct.pack("QQQQ", attrs, 0, 0, _template_userns())
        attr = ctypes.create_string_buffer(packed, len(packed))
        _check(
            libc.syscall(
                _SYS_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH | _AT_RECURSIVE, attr, len(attr)
            ),
            source,
        )
        _check(
            libc.syscall(
                _SYS_MOVE_MOUNT, tree, b"", _AT_FDCWD, os.fsencode(target), _MOVE_MOUNT_F_EMPTY_PATH
            ),
            target,
        )
    finally:
        os.close(tree)


def _check(result: int, path: Path) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(path))
    return result
