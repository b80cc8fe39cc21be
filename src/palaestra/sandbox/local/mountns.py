"""Which of the host's mounts a sandbox's bubblewrap can do without.

bubblewrap starts with a copy of its caller's mount namespace and, after each of its ~20 binds
and remounts, reads the whole of ``/proc/self/mountinfo`` (to find the mounts below the one it
made): the host's unrelated mounts (``/sys`` and its cgroup hierarchies, Docker's, other
sandboxes' overlays and quotas) are copied and read ~20 times at every start, more of them as
more sandboxes run. The launcher detaches them first, as root, in a mount namespace of its own
that is a slave of the host's (``palaestra-setids --detach``, in ``setids.c``): bubblewrap then
copies and reads only what the sandbox is made of. The sandbox sees the same files either way;
what it is given is bound by path from the mounts kept.

A mount is kept when its mount point is ``/``, a directory above something bubblewrap binds or
reads (its sources, ``/proc``, the device nodes of ``/dev``), or below one of them (a source's submounts are bound
with it); every other mount is detached, the outermost of each tree only (a detach takes the
tree below).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

#: What bubblewrap reads from the host besides its sources: its own /proc (its mount table,
#: its fds) and the device nodes ``--dev`` binds (not the host's /dev/pts or /dev/shm).
ALWAYS_NEEDED = (
    "/proc",
    *(f"/dev/{node}" for node in ("null", "zero", "full", "random", "urandom", "tty")),
)
#: bubblewrap's options whose next argument is a host path it binds.
_BIND_OPTIONS = frozenset(
    {"--bind", "--bind-try", "--ro-bind", "--ro-bind-try", "--dev-bind", "--dev-bind-try"}
)


def mount_points() -> list[str]:
    """This process's mount points, in the order of its mount table. Blocking (a /proc read)."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as table:
        return [_unescape(line.split(" ", 5)[4]) for line in table if line.strip()]


def bind_sources(args: Iterable[str]) -> list[str]:
    """The host paths that bubblewrap ``args`` (options only, none of the command's) bind."""
    sources: list[str] = []
    items = iter(args)
    for arg in items:
        if arg in _BIND_OPTIONS:
            sources.append(next(items, ""))
    return [source for source in sources if source.startswith("/")]


def detachable(points: list[str], needed: Iterable[str]) -> list[str]:
    """The mount points of ``points`` (a mount table's, in order) that a bubblewrap binding
    ``needed`` does not use, outermost first; a point where mounts are stacked comes as often
    as it has mounts. ``needed`` paths are resolved (a source reached through a link lives
    where the link leads)."""
    wanted = {posixpath.normpath(path) for path in needed}
    wanted |= {posixpath.realpath(path) for path in wanted}
    keep_above: set[str] = {"/"}
    for path in wanted:
        while path != "/":
            keep_above.add(path)
            path = posixpath.dirname(path)
    kept_trees = tuple(path.rstrip("/") + "/" for path in wanted)
    loose = sorted(
        (
            point
            for point in points
            if point not in keep_above and not point.startswith(kept_trees) and point[:1] == "/"
        ),
        key=lambda point: point.split("/"),  # a tree's mounts right after its top
    )
    outermost: list[str] = []
    for point in loose:
        top = outermost[-1] if outermost else None
        if top is not None and point != top and point.startswith(top.rstrip("/") + "/"):
            continue  # goes with the tree above it
        outermost.append(point)
    return outermost


def _unescape(field: str) -> str:
    r"""A mountinfo path: the kernel writes space, tab, newline and backslash as ``\ooo``."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)
