"""Killing a command's processes, and waiting until they are gone: its cgroup and every cgroup
below it when the sandbox has cgroups, else a set of processes and their descendants found in /proc. Both waits call
``reap`` (the request loop's: it collects exited children) while they wait."""

from __future__ import annotations

import os
import time

from .prctl import PR_GET_PDEATHSIG, PR_SET_PDEATHSIG, Int, byref, prctl

TYPE_CHECKING = False  # importing typing would add ~2 ms to every sandbox's start
if TYPE_CHECKING:
    from collections.abc import Callable

#: How long a kill waits for the killed processes to disappear.
KILL_WAIT_S = 5.0
#: The most cgroups of one command's tree a kill or a removal visits (its own included).
MAX_TREE = 1024
_SIGKILL, _SIGSTOP = 9, 19


def kill_cgroup(track_fd: int, kill_mode: str, name: str, reap: Callable[[], None]) -> None:
    """SIGKILL every process in a command's cgroup (``name`` under ``track_fd``) and in every
    cgroup below it, and wait until they are gone; at most :data:`KILL_WAIT_S` in all.

    Frozen first (v1 freezer, v2 cgroup.freeze: both freeze the cgroups below too) so nothing
    forks while the members are listed, then thawed, each cgroup of the tree, parents first (a
    cgroup frozen on its own stays frozen under a thawed parent, and v1's frozen processes die
    only once thawed); v2 kernels with cgroup.kill do the whole tree in one write.
    """
    deadline = time.monotonic() + KILL_WAIT_S
    if kill_mode == "cgroup.kill":
        write_at(track_fd, f"{name}/cgroup.kill", "1")
    else:
        v1 = kill_mode == "freezer"
        control = f"{name}/freezer.state" if v1 else f"{name}/cgroup.freeze"
        write_at(track_fd, control, "FROZEN" if v1 else "1")
        state_file = control if v1 else f"{name}/cgroup.events"
        while time.monotonic() < deadline:
            state = read_at(track_fd, state_file)
            if ("FROZEN" in state) if v1 else ("frozen 1" in state):
                break
            time.sleep(0.001)
        tree = cgroup_tree(track_fd, name, deadline)
        for cgroup in tree:
            for pid in _members(track_fd, cgroup):
                send_signal(int(pid), _SIGKILL)
        _thaw(track_fd, kill_mode, tree)
    while time.monotonic() < deadline:
        reap()
        if not populated(track_fd, name, deadline):
            return
        time.sleep(0.001)


def thaw_below(track_fd: int, kill_mode: str) -> None:
    """Thaw every cgroup below the tracking cgroup (``track_fd``), parents first: a process
    killed in a frozen cgroup dies only once it is thawed (v1). Bounded as :func:`cgroup_tree`."""
    _thaw(track_fd, kill_mode, cgroup_tree(track_fd, ".", time.monotonic() + KILL_WAIT_S)[1:])


def _thaw(track_fd: int, kill_mode: str, tree: list[str]) -> None:
    v1 = kill_mode == "freezer"
    control, thawed = ("freezer.state", "THAWED") if v1 else ("cgroup.freeze", "0")
    for cgroup in tree:
        try:
            write_at(track_fd, f"{cgroup}/{control}", thawed)
        except OSError:
            pass  # removed meanwhile


def cgroup_tree(track_fd: int, name: str, deadline: float) -> list[str]:
    """``name`` and the cgroups below it (paths relative to ``track_fd``), parents first.

    Bounded, whatever a command made: at most :data:`MAX_TREE` cgroups, none looked for after
    ``deadline``, and a path too long to open is left out (the host's close still removes the
    sandbox's whole tree).
    """
    tree = [name]
    for parent in tree:  # grows while it is walked: breadth first
        if len(tree) >= MAX_TREE or time.monotonic() >= deadline:
            break
        try:
            fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY, dir_fd=track_fd)
        except OSError:
            continue  # removed meanwhile, or a path too long
        try:
            with os.scandir(fd) as entries:
                tree += [f"{parent}/{e.name}" for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            pass
        finally:
            os.close(fd)
    return tree[:MAX_TREE]


def populated(track_fd: int, name: str, deadline: float) -> bool:
    """Whether any process is left in the cgroup ``name`` or below it."""
    try:
        return "populated 1" in read_at(track_fd, f"{name}/cgroup.events")  # v2: the tree's
    except FileNotFoundError:
        pass
    return any(_members(track_fd, cgroup) for cgroup in cgroup_tree(track_fd, name, deadline))


def remove_cgroup_tree(track_fd: int, name: str) -> bool:
    """Remove the cgroup ``name`` and the cgroups below it, deepest first, as far as they hold
    no process; whether ``name`` is gone."""
    for cgroup in reversed(cgroup_tree(track_fd, name, time.monotonic() + KILL_WAIT_S)):
        try:
            os.rmdir(cgroup, dir_fd=track_fd)
        except FileNotFoundError:
            pass
        except OSError:
            if cgroup == name:
                return False
    return True


def _members(track_fd: int, cgroup: str) -> list[str]:
    try:
        return read_at(track_fd, f"{cgroup}/cgroup.procs").split()
    except OSError:
        return []  # removed meanwhile


def kill_tree(
    selected: Callable[[int, int, int, int], bool],
    reap: Callable[[], None],
    after_kill: Callable[[], None] | None = None,
) -> None:
    """SIGKILL the selected processes (``selected(pid, ppid, pgrp, session)``) and their
    descendants (never pid 1), call ``after_kill`` (a thaw: see :func:`thaw_below`), and wait.

    Everything found is stopped first, until a scan finds nothing new: a stopped process
    cannot fork, and a killed parent would hand its children to pid 1 and so lose the link
    that marks them as descendants. Only then is the whole set killed.
    """
    stopped: set[int] = set()
    while True:
        procs = processes()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in procs.items():
            children.setdefault(ppid, []).append(pid)
        todo = [pid for pid, p in procs.items() if pid in stopped or selected(pid, *p)]
        found: set[int] = set()
        while todo:
            pid = todo.pop()
            if pid != 1 and pid not in found:
                found.add(pid)
                todo.extend(children.get(pid, ()))
        new = found - stopped
        if not new:
            break
        for pid in new:
            send_signal(pid, _SIGSTOP)
        stopped |= new
    for pid in stopped:
        send_signal(pid, _SIGKILL)
    if after_kill is not None:
        after_kill()
    deadline = time.monotonic() + KILL_WAIT_S
    while time.monotonic() < deadline:
        reap()
        alive = processes()
        if not any(pid in alive for pid in stopped):
            return
        time.sleep(0.001)


def oom_kills(oom_fd: int | None, oom_file: str) -> int:
    """How many processes the OOM killer has killed in the sandbox so far (0 without cgroups)."""
    if oom_fd is None:
        return 0
    for line in read_at(oom_fd, oom_file).splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return 0


def processes() -> dict[int, tuple[int, int, int]]:
    """``pid -> (ppid, pgrp, session)`` of every process in the sandbox that is not dead yet."""
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name is in parentheses and may contain anything, ")" included.
        state, ppid, pgrp, session = stat[stat.rindex(b")") + 2 :].split()[:4]
        if state not in (b"Z", b"X"):
            procs[int(name)] = (int(ppid), int(pgrp), int(session))
    return procs


def environ_has(pid: int, entry: bytes) -> bool:
    """Whether ``entry`` (``\\0NAME=value\\0``) is in the process's initial environment."""
    path = f"/proc/{pid}/environ"
    try:
        with open(path, "rb") as f:
            data = f.read()
    except PermissionError:
        data = _read_as_owner(pid, path)
    except OSError:
        return False
    return entry in b"\0" + data


def _read_as_owner(pid: int, path: str) -> bytes:
    """Read a /proc file of a process of another user, as that user.

    Without CAP_SYS_PTRACE (a container's root lacks it) only a process's own user may read its
    environment, so the effective ids switch to the owner's (the ids of ``/proc/<pid>``: its
    effective ones while it is dumpable) and back. Changing ids clears the parent-death signal,
    which is set again. Nothing is read from an undumpable process (``/proc/<pid>`` is root's).
    """
    try:
        st = os.stat(f"/proc/{pid}")
    except OSError:
        return b""
    euid, egid = os.geteuid(), os.getegid()
    if st.st_uid == euid:
        return b""
    death = Int(0)
    prctl(PR_GET_PDEATHSIG, byref(death))
    try:
        os.setegid(st.st_gid)
        os.seteuid(st.st_uid)
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""
    finally:
        os.seteuid(euid)
        os.setegid(egid)
        if death.value:
            prctl(PR_SET_PDEATHSIG, death.value)


def send_signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def read_at(dir_fd: int, path: str) -> str:
    fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
    try:
        return os.read(fd, 1 << 16).decode()
    finally:
        os.close(fd)


def write_at(dir_fd: int, path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY, dir_fd=dir_fd)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
