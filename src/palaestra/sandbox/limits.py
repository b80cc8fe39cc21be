"""Resource limits of local sandboxes: cgroups (v1 or v2), rlimits, a tmpfs disk quota.

Each sandbox gets its own cgroup, ``palaestra/<run id>.<sandbox id>`` below the cgroup of the
process that creates it (so the sandboxes count against whatever limits that process already has):

* cgroup v1 (separate hierarchies, as on these machines): the directory is made in the
  ``pids``, ``freezer`` and ``cpu`` hierarchies, and in ``memory`` when the spec limits it;
  the helper makes one child per command in the freezer one, so a command's processes stay
  traceable however they fork, ``setsid`` or re-parent, and a timeout freezes and kills them all.
* cgroup v2 (unified): one directory with ``memory.max``, ``memory.swap.max``, ``pids.max``,
  ``cpu.max`` and, as in v1, its own CPU weight; per-command children below it (no controllers
  enabled there) for tracking and ``cgroup.kill``.

The sandbox's pid 1 is moved in right after bubblewrap starts it, before it runs any command,
so every process of the sandbox is inside. When cgroups cannot be written (not root, no
delegation), the helper falls back to rlimits: ``RLIMIT_AS`` for memory (per process), nothing
for processes or CPU; :attr:`SandboxLimits.description` says which applies.

Moving a process into a cgroup takes a global lock whose writer waits for an RCU grace period,
which on an idle machine lasts about 10 ms per move: a sandbox start (its pid 1 moved into each
hierarchy) and every command (moved into its own cgroup) would pay it. The cgroup2 mount option
``favordynmods`` (Linux 6.0+) removes that wait, at a small cost to fork and exit; the local
backend turns it on once per process (:func:`favor_dynamic_moves`, opt out with
``PALAESTRA_CGROUP_FAVORDYNMODS=0``).

The disk quota (``storage_mb``) is a size-limited tmpfs mounted on the sandbox's backing
directory on the host, so every writable directory of the sandbox shares one quota and writes
beyond it fail with ENOSPC. Its pages are also charged to the sandbox's memory cgroup.
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from palaestra.sandbox.base import SandboxSpec
from palaestra.sandbox.mounts import MOUNT_FLAGS, MS_REMOUNT, mount, unmount

CGROUP_ROOT = Path("/sys/fs/cgroup")
#: Applied when the spec sets no ``pids_limit``: enough for any build, fatal to a fork bomb.
DEFAULT_PIDS_LIMIT = 1024
CPU_PERIOD_US = 100_000
_V1_CONTROLLERS = ("memory", "pids", "cpu", "freezer")
#: ``0`` leaves the cgroup2 mount's options alone (see :func:`favor_dynamic_moves`).
FAVOR_DYNMODS_ENV = "PALAESTRA_CGROUP_FAVORDYNMODS"
_RMDIR_WAIT_S = 5.0


@dataclass
class SandboxLimits:
    """The limits applied to one sandbox and the host resources that enforce them.

    ``cgroups`` are the directories made for it and ``mounts`` the mounts made for it (the disk
    quota's tmpfs, a root filesystem's overlay), undone on close; ``helper`` is the
    configuration handed to the in-sandbox helper (file descriptors of the tracking and memory
    cgroups, rlimits); ``pass_fds`` the descriptors bubblewrap must pass on to it.
    """

    description: str
    cgroup_version: int | None = None
    cgroups: list[str] = field(default_factory=list)
    helper: dict[str, object] = field(default_factory=dict)
    pass_fds: tuple[int, ...] = ()
    mounts: list[str] = field(default_factory=list)

    def close_fds(self) -> None:
        """Close the descriptors (once bubblewrap has inherited them)."""
        for fd in self.pass_fds:
            os.close(fd)
        self.pass_fds = ()

    def add_process(self, pid: int) -> None:
        """Move ``pid`` into every cgroup of the sandbox. Blocking."""
        for path in self.cgroups:
            Path(path, "cgroup.procs").write_text(str(pid))


def cgroup_version() -> int | None:
    """2 on a unified hierarchy, 1 when the v1 controllers this module needs are mounted."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return 2
    if all((CGROUP_ROOT / c / "cgroup.procs").exists() for c in _V1_CONTROLLERS):
        return 1
    return None


def _own_cgroup(controller: str) -> str:
    """This process's cgroup path in the hierarchy of ``controller`` ("" for v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    raise OSError(errno.ENOENT, f"no {controller or 'unified'} line in /proc/self/cgroup")


def apply_limits(
    spec: SandboxSpec, cgroup_name: str, backing_dir: Path, owner: int | None = None
) -> SandboxLimits:
    """Make the sandbox's cgroups and disk quota. Blocking: call it from a thread. ``owner``
    is the host uid of the sandbox's root, to which its tracking cgroup is delegated.

    Never raises for a missing mechanism: what cannot be enforced falls back (rlimits) or is
    reported as not enforced in the description. On an error after cgroups were made, they are
    removed before the error propagates.
    """
    pids = spec.pids_limit or DEFAULT_PIDS_LIMIT
    limits = SandboxLimits(description="")
    parts: list[str] = []
    try:
        version = cgroup_version()
        reason = "no cgroup hierarchy with memory, pids, cpu and freezer"
        if version is not None:
            try:
                if version == 1:
                    _cgroups_v1(limits, spec, cgroup_name, pids, owner)
                else:
                    _cgroups_v2(limits, spec, cgroup_name, pids, owner)
                limits.cgroup_version = version
            except OSError as exc:
                remove_cgroups(limits.cgroups)
                limits.cgroups, limits.helper = [], {}
                limits.close_fds()
                reason = f"cgroup v{version} not writable: {exc.strerror or exc}"
        if limits.cgroup_version is not None:
            parts.append(
                f"cgroup v{limits.cgroup_version}: "
                + (f"memory {spec.memory_mb} MiB" if spec.memory_mb else "memory unlimited")
                + f", pids {pids}, "
                + (f"cpus {spec.cpus:g}" if spec.cpus else "cpus unlimited")
            )
        else:
            if spec.memory_mb:
                limits.helper["rlimit_as"] = spec.memory_mb << 20
            parts.append(
                f"rlimits ({reason}): "
                + (f"address space {spec.memory_mb} MiB per process" if spec.memory_mb else "")
                + ("; " if spec.memory_mb else "")
                + "pids and cpus not enforced"
            )
        if spec.storage_mb:
            try:
                backing_dir.mkdir(parents=True, exist_ok=True)
                mount("tmpfs", backing_dir, "tmpfs", f"size={spec.storage_mb}m,mode=755")
                limits.mounts.append(str(backing_dir))
                parts.append(f"storage {spec.storage_mb} MiB (tmpfs)")
            except OSError as exc:
                parts.append(f"storage not enforced (cannot mount a tmpfs: {exc.strerror})")
        else:
            parts.append("storage unlimited")
    except BaseException:
        release(limits)
        raise
    limits.description = "; ".join(parts)
    return limits


def _make(path: Path, settings: dict[str, str], limits: SandboxLimits) -> None:
    path.mkdir(parents=True, exist_ok=False)
    limits.cgroups.append(str(path))
    for name, value in settings.items():
        (path / name).write_text(value)


def _delegate(path: Path, files: tuple[str, ...], owner: int | None) -> None:
    """Hand the sandbox's tracking cgroup to ``owner``, the host uid of the sandbox's root (see
    :mod:`.local.userns`), whose helper makes a child cgroup per command there and moves the
    command in: the directory itself and, on v2, the files a move writes (cgroup v2's
    delegation model). The limits' files stay the host root's."""
    if owner is None:
        return
    for name in ("", *files):
        os.chown(path / name if name else path, owner, owner)


def _cgroups_v1(
    limits: SandboxLimits, spec: SandboxSpec, name: str, pids: int, owner: int | None
) -> None:
    dirs = {
        c: CGROUP_ROOT / c / _own_cgroup(c).lstrip("/") / "palaestra" / name
        for c in _V1_CONTROLLERS
    }
    memory: dict[str, str] = {}
    if spec.memory_mb:
        memory["memory.limit_in_bytes"] = str(spec.memory_mb << 20)
        if (CGROUP_ROOT / "memory" / "memory.memsw.limit_in_bytes").exists():
            memory["memory.memsw.limit_in_bytes"] = str(spec.memory_mb << 20)  # no swap escape
    cpu: dict[str, str] = {}
    if spec.cpus:
        cpu = {
            "cpu.cfs_period_us": str(CPU_PERIOD_US),
            "cpu.cfs_quota_us": str(round(spec.cpus * CPU_PERIOD_US)),
        }
    # A memory cgroup only with a limit to enforce (it costs every process in it some
    # accounting). A cpu cgroup always: the sandbox is one scheduling entity with a Docker
    # container's weight (a new cgroup's cpu.shares, 1024), not a part of its creator's.
    _make(dirs["pids"], {"pids.max": str(pids)}, limits)
    _make(dirs["freezer"], {}, limits)
    _delegate(dirs["freezer"], (), owner)
    track = os.open(dirs["freezer"], os.O_RDONLY | os.O_DIRECTORY)
    limits.pass_fds = (track,)
    limits.helper.update(track_fd=track, kill="freezer")
    _make(dirs["cpu"], cpu, limits)
    if memory:
        _make(dirs["memory"], memory, limits)
        oom = os.open(dirs["memory"], os.O_RDONLY | os.O_DIRECTORY)
        limits.pass_fds = (track, oom)
        limits.helper.update(oom_fd=oom, oom_file="memory.oom_control")


def _cgroups_v2(
    limits: SandboxLimits, spec: SandboxSpec, name: str, pids: int, owner: int | None
) -> None:
    parent = CGROUP_ROOT / _own_cgroup("").lstrip("/") / "palaestra"
    parent.mkdir(exist_ok=True)  # left in place: concurrent creators share it
    wanted = {"memory", "pids", "cpu"}
    enabled = set((parent / "cgroup.subtree_control").read_text().split())
    if not wanted <= enabled:
        # Fails with EBUSY when palaestra/ holds processes itself (it never does), and with
        # ENOENT when the controllers are not delegated to this process's cgroup.
        (parent.parent / "cgroup.subtree_control").write_text("+memory +pids +cpu")
        (parent / "cgroup.subtree_control").write_text("+memory +pids +cpu")
    settings = {"pids.max": str(pids)}
    if spec.memory_mb:
        settings["memory.max"] = str(spec.memory_mb << 20)
        settings["memory.swap.max"] = "0"
    if spec.cpus:
        settings["cpu.max"] = f"{round(spec.cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}"
    path = parent / name
    _make(path, settings, limits)
    _delegate(path, ("cgroup.procs", "cgroup.threads"), owner)
    track = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    limits.pass_fds = (track,)
    limits.helper.update(
        track_fd=track,
        kill="cgroup.kill" if (path / "cgroup.kill").exists() else "cgroup.freeze",
        oom_fd=track,
        oom_file="memory.events",
    )


def remove_cgroups(paths: list[str]) -> None:
    """Remove the sandboxes' cgroups, deepest first (per-command children included).

    Blocking. Call it once the sandbox's processes are gone: a cgroup with processes cannot be
    removed; this retries for a few seconds while the kernel finishes tearing them down.
    Processes still there are killed first, frozen ones too: a helper killed in the middle of
    a freeze-kill-thaw (a command's timeout racing the sandbox's close) leaves its command's
    cgroup frozen, where SIGKILL waits until a thaw.
    """
    kill_and_thaw(paths)
    for path in reversed(paths):
        if not os.path.isdir(path):
            continue
        for child in [*sorted(_subdirs(path), key=len, reverse=True), path]:
            deadline = time.monotonic() + _RMDIR_WAIT_S
            while True:
                try:
                    os.rmdir(child)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                        break
                    time.sleep(0.005)


def kill_and_thaw(paths: list[str]) -> None:
    """SIGKILL every process in the cgroup trees at ``paths`` (a sandbox's, one per
    hierarchy), then thaw them (cgroup v1's freezer.state, v2's cgroup.freeze) so that frozen
    ones die too. Every hierarchy at once: one frozen keeps the others' cgroups busy.
    Blocking."""
    tree = [cgroup for path in paths if os.path.isdir(path) for cgroup in [path, *_subdirs(path)]]
    for cgroup in tree:
        try:
            pids = Path(cgroup, "cgroup.procs").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    for cgroup in tree:  # parents first: a child cannot thaw under a frozen parent
        for name, thawed in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
            try:
                Path(cgroup, name).write_text(thawed)
            except OSError:
                pass  # not this hierarchy's file


def freeze(paths: list[str], frozen: bool) -> None:
    """Freeze (or thaw) every process of a sandbox's cgroups at ``paths`` (cgroup v1's freezer
    hierarchy, v2's ``cgroup.freeze``); a freeze returns once the kernel reports the processes
    frozen. Blocking."""
    for path in paths:
        if Path(path, "freezer.state").exists():  # v1
            control, status = Path(path, "freezer.state"), Path(path, "freezer.state")
            value = wanted = "FROZEN" if frozen else "THAWED"
        elif Path(path, "cgroup.freeze").exists():  # v2
            control, status = Path(path, "cgroup.freeze"), Path(path, "cgroup.events")
            value, wanted = str(int(frozen)), f"frozen {int(frozen)}"
        else:
            continue  # another v1 hierarchy: the freezer one does it
        control.write_text(value)
        deadline = time.monotonic() + _RMDIR_WAIT_S
        while wanted not in status.read_text():
            if time.monotonic() >= deadline:
                raise OSError(errno.ETIMEDOUT, f"{control} did not reach {wanted!r}")
            time.sleep(0.001)


def reclaim_empty_cgroups(older_than_s: float, name_prefix: str = "") -> None:
    """Remove sandbox cgroups that hold no process, made more than ``older_than_s`` ago.

    A sandbox's cgroup always holds its helper once started, so an empty one is a leftover
    whose record was lost (its state directory deleted while the sandbox ran; a crash before
    the record was written). Only the ``palaestra`` directories under this process's own
    cgroups are looked at, and of those only names starting with ``name_prefix``. Blocking.
    """
    version = cgroup_version()
    if version is None:
        return
    parents = []
    try:
        if version == 1:
            parents = [
                CGROUP_ROOT / c / _own_cgroup(c).lstrip("/") / "palaestra" for c in _V1_CONTROLLERS
            ]
        else:
            parents = [CGROUP_ROOT / _own_cgroup("").lstrip("/") / "palaestra"]
    except OSError:
        return
    now = time.time()
    for parent in parents:
        try:
            entries = list(os.scandir(parent))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.startswith(name_prefix):
                continue
            try:
                old = now - entry.stat().st_mtime > older_than_s
                if entry.is_dir() and old and not Path(entry.path, "cgroup.procs").read_text():
                    for child in [*sorted(_subdirs(entry.path), key=len, reverse=True)]:
                        os.rmdir(child)
                    os.rmdir(entry.path)
            except OSError:
                continue  # busy after all, or removed by someone else meanwhile


@functools.cache
def favor_dynamic_moves() -> str:
    """Remount the cgroup2 hierarchy with ``favordynmods``, once per process (as root, Linux
    6.0+, where cgroup2 is mounted: v2 machines, and v1 machines with the hybrid layout).
    Blocking. Returns what happened, for the logs: "on" (already, or now), or why not.

    The option is the hierarchy's, not a mount's, and lasts until reboot; every option the
    hierarchy and the mount point already have is kept.
    """
    if os.environ.get(FAVOR_DYNMODS_ENV, "1") == "0":
        return f"off ({FAVOR_DYNMODS_ENV}=0)"
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError as exc:
        return f"not set: {exc}"
    for line in lines:
        fields = line.split()
        sep = fields.index("-")
        if fields[sep + 1] != "cgroup2":
            continue
        target, mount_opts, super_opts = fields[4], fields[5], fields[sep + 3].split(",")
        if "favordynmods" in super_opts:
            return "on"
        flags = MS_REMOUNT
        for opt in mount_opts.split(","):
            flags |= MOUNT_FLAGS.get(opt, 0)
        data = ",".join([*(o for o in super_opts if o not in ("rw", "ro")), "favordynmods"])
        try:
            mount("cgroup2", target, "cgroup2", data, flags)
        except OSError as exc:
            return f"not set: remounting {target}: {exc.strerror}"
        return "on"
    return "not set: no cgroup2 mount"


def _subdirs(path: str) -> list[str]:
    found = []
    for root, dirs, _ in os.walk(path):
        found += [os.path.join(root, d) for d in dirs]
    return found


def release(limits: SandboxLimits) -> None:
    """Undo :func:`apply_limits` once the sandbox's processes are gone. Blocking."""
    limits.close_fds()
    remove_cgroups(limits.cgroups)
    for path in reversed(limits.mounts):
        unmount(path)
