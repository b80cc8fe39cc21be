"""bubblewrap's command line for a local sandbox, and the descriptors it takes.

What the command sets up, in order of defence (docs/sandbox.md has the probe table that
compares it with a Docker container):

* a user namespace whose ids are the host's unprivileged range of :mod:`.userns` (bwrap runs as
  that range's first uid and waits on ``--userns-block-fd`` until the maps are written);
* new pid, ipc, uts, cgroup and (unless the spec asks for the network) network namespaces;
* Docker's capability set less ``MKNOD``, ``NET_RAW`` and ``SETPCAP``, as both the effective and
  the bounding set, and no_new_privs;
* Docker's default seccomp profile (:mod:`.seccomp`);
* the paths of ``/proc`` Docker makes read-only (``/proc/sys``, ``/proc/sysrq-trigger``...)
  bound read-only, and those it masks (``/proc/kcore``, ``/proc/keys``...) covered;
* a read-only root: the host's system directories bound read-only (``/etc`` without its
  secrets) on an empty tmpfs, or an image's root filesystem on an overlay; only the spec's
  writable directories are writable.

bwrap runs as the range's unprivileged first uid, so every host directory it binds must be
reachable by that uid: the state directory is (mode 0711), and a source that is not (the
helper's runtime under root's home, a mount below a closed directory) is bound by root into the
sandbox's directory first (:func:`~.layout.bind_sources`). Every bind names a path below the
sandbox's directory or a path of the spec, which is how the janitor knows a bwrap as a
sandbox's.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import posixpath
import stat
from pathlib import Path

from palaestra.sandbox._channel import HELPER_DIR_IN_SANDBOX, sandbox_path
from palaestra.sandbox.base import SandboxSpec, is_within
from palaestra.sandbox.helper_runtime import helper_argv
from palaestra.sandbox.limits import SandboxLimits
from palaestra.sandbox.local.mountns import ALWAYS_NEEDED, detachable
from palaestra.sandbox.local.mountns import bind_sources as mount_sources
from palaestra.sandbox.local.seccomp import seccomp_fd

#: Host directories bound read-only at the same place (symlinks are recreated as symlinks);
#: /etc is filtered.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc", "/opt")
#: Never shown from the host's /etc, whatever their permissions.
ETC_SECRETS = frozenset(
    {
        "shadow",
        "shadow-",
        "gshadow",
        "gshadow-",
        "sudoers",
        "sudoers.d",
        "master.passwd",
        "opasswd",
        "private",
        "krb5.keytab",
        "credstore",
        "credstore.encrypted",
        "wireguard",
        "system-connections",
    }
)
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
}
#: Docker's default capability set minus CAP_MKNOD (a block device node would reach the host's
#: disks: there is no device cgroup here), CAP_NET_RAW and CAP_SETPCAP. They are capabilities
#: of the sandbox's user namespace: they act on its own namespaces and on files whose owner is
#: mapped into it, never on the host's. Root inside keeps root's file access to the sandbox's
#: files and can switch users, but cannot mount, ptrace, load modules or change the clock.
CAPABILITIES = (
    "CAP_AUDIT_WRITE",
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_NET_BIND_SERVICE",
    "CAP_SETFCAP",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SYS_CHROOT",
)
#: What Docker binds read-only in /proc (moby's oci defaults, ReadonlyPaths).
PROC_READ_ONLY = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
#: What Docker masks in /proc (MaskedPaths; /sys is not mounted in a local sandbox at all).
PROC_MASKED = (
    "/proc/asound",
    "/proc/acpi",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
)


@dataclasses.dataclass
class BwrapCommand:
    """bwrap's arguments (after ``bwrap``) and the descriptors they name (the seccomp program
    and the read end of ``userns_block``), which the caller passes to bwrap and then closes
    (:meth:`close_fds`). ``userns_block`` is the write end of the pipe bwrap waits on before
    its child goes on in the new user namespace."""

    argv: list[str]
    pass_fds: list[int]
    userns_block: int
    #: The host's mounts bwrap does without (:mod:`.mountns`): the launcher detaches them.
    detach: tuple[str, ...] = ()

    def close_fds(self) -> None:
        for fd in self.pass_fds:
            os.close(fd)
        self.pass_fds = []


def bwrap_command(
    spec: SandboxSpec,
    root: Path | None,
    writable: list[tuple[Path, str]],
    sources: list[Path],
    limits: SandboxLimits,
    detach: tuple[str, ...] = (),
) -> BwrapCommand:
    """The command for a sandbox whose files ``prepare`` and ``fill`` make: ``root`` is its overlay (with
    a root filesystem), ``writable`` the host directories bound writable at their targets,
    ``sources`` where to find the helper's runtime and then each of the spec's mounts;
    ``detach`` the host's mounts it does without (:func:`unused_mounts`).
    Opens descriptors: on an error they are closed before it propagates."""
    block_r, block_w = os.pipe()
    fds: list[int] = [block_r]
    try:
        argv = [
            "--unshare-user",
            "--uid",
            "0",
            "--gid",
            "0",
            "--userns-block-fd",
            str(block_r),
            "--die-with-parent",
            "--new-session",
            "--as-pid-1",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            spec.hostname,
            "--cap-drop",
            "ALL",
        ]
        if spec.network == "none":
            argv.append("--unshare-net")
        for cap in CAPABILITIES:
            argv += ["--cap-add", cap]
        if root is not None:  # the overlay made by fill, writable, as the root
            argv += ["--bind", str(root), "/"]
        else:
            argv += system_dir_args()
        argv += ["--proc", "/proc", *proc_cover_args(), "--dev", "/dev"]
        binds = [("--bind", source, target) for source, target in writable]
        mounts = sorted(
            zip(spec.mounts, sources[1:], strict=True),
            key=lambda pair: sandbox_path(pair[0].target).count("/"),
        )
        for mount, source in mounts:
            binds.append(("--ro-bind" if mount.read_only else "--bind", source, mount.target))
        binds.append(("--ro-bind", sources[0], HELPER_DIR_IN_SANDBOX))
        made: set[str] = set()
        for kind, source, target in binds:
            argv += [*_make_parents(sandbox_path(target), made), kind, str(source), target]
        if root is None:
            argv += ["--remount-ro", "/"]
        argv += ["--chdir", "/", "--clearenv"]
        for key, value in {**BASE_ENV, **spec.env}.items():
            argv += ["--setenv", key, value]
        fds.append(seccomp_fd())
        argv += ["--seccomp", str(fds[-1])]
        config = json.dumps(limits.helper, separators=(",", ":"))
    except BaseException:
        for fd in (*fds, block_w):
            os.close(fd)
        raise
    return BwrapCommand([*argv, "--", *helper_argv(config)], fds, block_w, detach)


def unused_mounts(
    sandbox_dir: Path, sources: list[Path], host_mounts: list[str]
) -> tuple[str, ...]:
    """The mounts of ``host_mounts`` that the command of a sandbox in ``sandbox_dir`` (whose
    writable directories and root filesystem live there) binding ``sources`` (the helper's
    runtime, the spec's mounts) does not use (see :mod:`.mountns`). Blocking the first time
    (the system directories' binds)."""
    needed = [*ALWAYS_NEEDED, *mount_sources((*system_dir_args(), *proc_cover_args()))]
    needed += [str(sandbox_dir), *map(str, sources)]
    return tuple(detachable(host_mounts, needed))


@functools.cache
def proc_cover_args() -> tuple[str, ...]:
    """Binds that make Docker's read-only paths of /proc read-only and cover its masked ones
    (a file with /dev/null, a directory with a read-only tmpfs), for those this kernel has."""
    args: list[str] = []
    for path in PROC_READ_ONLY:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    for path in PROC_MASKED:
        if os.path.isdir(path):
            args += ["--tmpfs", path, "--remount-ro", path]
        elif os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    return tuple(args)


@functools.cache
def system_dir_args() -> tuple[str, ...]:
    """Binds for the host's system directories that exist; symlinks stay symlinks; /etc
    filtered (see :func:`_filtered_etc`). Blocking the first time (it walks /etc)."""
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif path == "/etc" and os.path.isdir(path):
            args += _filtered_etc(path)
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return tuple(args)


def _filtered_etc(path: str) -> list[str]:
    """Binds showing the host's ``path`` (/etc) without its secrets.

    /etc is bound read-only whole (a bind per file would cost bubblewrap milliseconds). Its
    owner, the host's root, is not mapped into the sandbox's user namespace
    (:mod:`.userns`), so every process of the sandbox, its root included, has only the rights
    of "other" on it, as any unprivileged user of the host: shadow, gshadow, sudoers, ssh host
    keys, ssl/private... (not world-readable) are closed by the kernel. The known secrets of
    :data:`ETC_SECRETS` and ``*.key`` files that are readable all the same are masked on top: a
    masked file reads as empty (``/dev/null``), a masked directory is an empty, read-only
    tmpfs. Each mask costs a start about 0.1 ms, so only those that add something are made.
    """
    args = ["--ro-bind", path, path]
    for root, dirs, files in os.walk(path):
        for name in sorted([*dirs, *files]):
            full = os.path.join(root, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue  # resolved inside the sandbox, where its target is masked or closed
            is_dir = stat.S_ISDIR(st.st_mode)
            if is_dir and not st.st_mode & 0o001:
                dirs.remove(name)  # others cannot go through it: nothing below needs a mask
                continue
            secret = name in ETC_SECRETS or name.endswith((".key", "_key"))
            if not secret or not st.st_mode & (0o005 if is_dir else 0o004):
                continue
            if is_dir:
                args += ["--tmpfs", full, "--remount-ro", full]
                dirs.remove(name)
            else:
                args += ["--ro-bind", "/dev/null", full]
    return args


def _make_parents(path: str, made: set[str]) -> list[str]:
    """``--dir`` for the ancestors of ``path`` outside the system directories.

    bwrap would create missing ones with mode 0700 itself, shutting non-root users out.
    """
    parents = []
    parent = posixpath.dirname(path)
    while parent != "/":
        parents.append(parent)
        parent = posixpath.dirname(parent)
    args = []
    for parent in reversed(parents):
        if parent not in made and not any(is_within(parent, d) for d in SYSTEM_DIRS):
            made.add(parent)
            args += ["--dir", parent]
    return args
