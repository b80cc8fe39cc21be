"""The on-disk side of a local sandbox: its directory, its writable directories, and the
bubblewrap command line that builds its file system.

A sandbox lives in ``<state_dir>/<run_id>/<sandbox_id>/``: ``meta.json`` (its record for the
janitor), ``fs/`` (the host directories behind its writable directories, and a root
filesystem's writable layer) and ``root/`` (the overlay a root filesystem runs on). The helper
runs on its own runtime (:mod:`palaestra.sandbox.helper_runtime`), bound read-only at
``/.palaestra``: a root filesystem needs no Python of its own. The functions that touch the disk
are blocking: callers run them in a thread.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import json
import os
import posixpath
import shutil
import stat
from pathlib import Path

from palaestra.sandbox._channel import HELPER_DIR_IN_SANDBOX, sandbox_path
from palaestra.sandbox.base import SandboxSpec, SandboxSpecError, is_within
from palaestra.sandbox.helper_runtime import helper_argv, helper_runtime
from palaestra.sandbox.janitor import RUN_ID_LABEL, SandboxMeta, remove_sandbox_dir
from palaestra.sandbox.limits import SandboxLimits, apply_limits, mounts_under, unmount
from palaestra.sandbox.limits import mount as mount_fs
from palaestra.sandbox.limits import release as release_limits
from palaestra.sandbox.local.snapshot import OVERLAY_DIR, copy_into

#: Host directories bound read-only at the same place (symlinks are recreated as symlinks);
#: /etc is filtered.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc", "/opt")
#: Never shown from the host's /etc, whatever their permissions.
ETC_SECRETS = frozenset({
    "shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d", "master.passwd",
    "opasswd", "private", "krb5.keytab", "credstore", "credstore.encrypted", "wireguard",
    "system-connections",
})  # fmt: skip
#: Always writable besides the spec's directories; HOME is /root.
EXTRA_WRITABLE_DIRS = ("/root", "/var/tmp")
STICKY_DIRS = frozenset({"/tmp", "/var/tmp"})
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
}
#: Docker's default capability set minus CAP_MKNOD (a block device node would reach the host's
#: disks: there is no device cgroup here), CAP_NET_RAW and CAP_SETPCAP (bwrap, run as root,
#: leaves the bounding set full; with no_new_privs, which bwrap sets, and without SETPCAP,
#: nothing can regain a capability). Root inside keeps root's file access and can switch
#: users, but cannot mount, ptrace, load modules or change the clock.
CAPABILITIES = (
    "CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
    "CAP_NET_BIND_SERVICE", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETUID", "CAP_SYS_CHROOT",
)  # fmt: skip


def writable_dirs(spec: SandboxSpec) -> list[str]:
    """Every writable directory, sorted (so a directory comes before the ones inside it)."""
    dirs = {sandbox_path(d) for d in (spec.workdir, *spec.writable_dirs, *EXTRA_WRITABLE_DIRS)}
    if "/" in dirs:
        raise SandboxSpecError("the local backend cannot make / writable; list subdirectories")
    return sorted(dirs)


def _outermost(dirs: list[str]) -> list[str]:
    """The sorted ``dirs`` that are not inside another one: only these need a bind mount."""
    roots: list[str] = []
    for d in dirs:
        if not roots or not is_within(d, roots[-1]):
            roots.append(d)
    return roots


def files_to_copy(spec: SandboxSpec, writable: list[str]) -> dict[str, Path]:
    files = {}
    for target, source in spec.files.items():
        path = sandbox_path(target)
        if not any(is_within(path, d) for d in writable):
            raise SandboxSpecError(
                f"spec.files target {target} is not inside a writable directory "
                f"({', '.join(writable)}); add its directory to writable_dirs"
            )
        files[path] = Path(source)
    return files


def _backing(sandbox_dir: Path, path: str) -> Path:
    """The host directory behind the in-sandbox ``path`` (inside a writable directory)."""
    return sandbox_dir / "fs" / path.lstrip("/")


def populate(
    spec: SandboxSpec,
    sandbox_dir: Path,
    meta: SandboxMeta,
    writable: list[str],
    files: dict[str, Path],
    seed: Path | None = None,
) -> SandboxLimits:
    """Create the sandbox's directory, its meta.json, its limits (cgroups, disk quota) and
    backing directories; copy files in. ``seed`` is a snapshot's copy of a sandbox's ``fs/``
    (:mod:`.snapshot`) to start from, copied in first.

    Runs before the sandbox starts, when nothing inside can have planted links yet.
    """
    state_dir = sandbox_dir.parent.parent
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for attempt in range(3):
        try:
            sandbox_dir.mkdir(parents=True)
            break
        except FileNotFoundError:
            # The run directory was empty for a moment and went (a janitor, or the run's
            # last sandbox closing): make it again.
            if attempt == 2:
                raise
    meta.write(sandbox_dir)
    helper_runtime()  # made once, here rather than on the event loop
    if spec.rootfs is None:
        _system_dir_args()
    else:
        _check_rootfs(Path(spec.rootfs))
    run_id = meta.labels[RUN_ID_LABEL]
    limits = apply_limits(spec, f"{run_id}.{meta.sandbox_id}", sandbox_dir / "fs")
    try:
        if seed is not None:
            (sandbox_dir / "fs").mkdir(exist_ok=True)
            copy_into([seed / name for name in os.listdir(seed)], sandbox_dir / "fs")
        if spec.rootfs is not None:
            # The writable layer lives in fs/ (under the disk quota when there is one); it
            # disappears with the sandbox, the shared read-only rootfs stays as it was.
            layer = sandbox_dir / "fs" / OVERLAY_DIR
            (layer / "upper").mkdir(parents=True, exist_ok=True)
            (layer / "work").mkdir()
            (sandbox_dir / "root").mkdir()
            mount_fs(
                "overlay", sandbox_dir / "root", "overlay",
                f"lowerdir={Path(spec.rootfs).resolve()},upperdir={layer / 'upper'},"
                f"workdir={layer / 'work'}",
            )  # fmt: skip
            limits.mounts.append(str(sandbox_dir / "root"))
        dataclasses.replace(meta, cgroups=limits.cgroups, mounts=limits.mounts).write(sandbox_dir)
        _make_backing(sandbox_dir, writable, files)
    except BaseException:
        release_limits(limits)
        raise
    return limits


def _check_rootfs(rootfs: Path) -> None:
    if not rootfs.is_dir():
        raise SandboxSpecError(f"SandboxSpec.rootfs {rootfs} is not a directory")
    if any(c in str(rootfs.resolve()) for c in ",:\\"):
        raise SandboxSpecError(
            f"SandboxSpec.rootfs {rootfs}: overlayfs cannot take a path with ',', ':' or '\\'; "
            "move or link it elsewhere"
        )


def _make_backing(sandbox_dir: Path, writable: list[str], files: dict[str, Path]) -> None:
    for path in writable:
        _backing(sandbox_dir, path).mkdir(parents=True, exist_ok=True)
        if path in STICKY_DIRS:
            _backing(sandbox_dir, path).chmod(0o1777)
    copy_files(sandbox_dir, files)


def copy_files(sandbox_dir: Path, files: dict[str, Path]) -> None:
    """Copy a spec's files into the backing directories (which exist)."""
    for target, source in files.items():
        dest = _backing(sandbox_dir, target)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)
        elif source.exists():
            shutil.copy2(source, dest)
        else:
            raise FileNotFoundError(errno.ENOENT, "spec.files source does not exist", str(source))


def bwrap_args(
    spec: SandboxSpec, sandbox_dir: Path, writable: list[str], limits: SandboxLimits
) -> list[str]:
    argv = [
        "--die-with-parent", "--new-session", "--as-pid-1",
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--hostname", spec.hostname, "--cap-drop", "ALL",
    ]  # fmt: skip
    if spec.network == "none":
        argv.append("--unshare-net")
    for cap in CAPABILITIES:
        argv += ["--cap-add", cap]
    if spec.rootfs is not None:  # the overlay made by populate, writable, as the root
        argv += ["--bind", str(sandbox_dir / "root"), "/"]
    else:
        argv += _system_dir_args()
    argv += ["--proc", "/proc", "--dev", "/dev"]
    binds = [("--bind", str(_backing(sandbox_dir, path)), path) for path in _outermost(writable)]
    for mount in sorted(spec.mounts, key=lambda m: sandbox_path(m.target).count("/")):
        binds.append(
            ("--ro-bind" if mount.read_only else "--bind", str(mount.source), mount.target)
        )
    binds.append(("--ro-bind", str(helper_runtime()), HELPER_DIR_IN_SANDBOX))
    made: set[str] = set()
    for kind, source, target in binds:
        argv += [*_make_parents(sandbox_path(target), made), kind, source, target]
    if spec.rootfs is None:
        argv += ["--remount-ro", "/"]
    argv += ["--chdir", "/", "--clearenv"]
    for key, value in {**BASE_ENV, **spec.env}.items():
        argv += ["--setenv", key, value]
    config = json.dumps(limits.helper, separators=(",", ":"))
    return [*argv, "--", *helper_argv(config)]


@functools.cache
def _system_dir_args() -> tuple[str, ...]:
    """Binds for the host's system directories that exist; symlinks stay symlinks; /etc
    filtered (see :func:`_filtered_etc`)."""
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

    /etc is bound read-only whole (a bind per file would cost bubblewrap milliseconds), then
    every secret in it is masked: entries not world-readable (shadow, gshadow, sudoers, ssh
    host keys, ssl/private...) and the known secrets of :data:`ETC_SECRETS` whatever their
    mode. A masked file reads as empty (``/dev/null``); a masked directory is an empty,
    read-only tmpfs. passwd, group, hosts, resolv.conf, certificates, alternatives, ld.so.* stay.
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
                continue  # resolved inside the sandbox, where its target is masked or absent
            secret = name in ETC_SECRETS or name.endswith((".key", "_key"))
            if not secret and st.st_mode & 0o004:
                continue
            if stat.S_ISDIR(st.st_mode):
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


def overlay_changes(sandbox_dir: Path, under: tuple[str, ...]) -> list[str]:
    """What the overlay's writable layer holds inside the directories ``under``: every path
    made, changed or deleted (a whiteout) on top of the root filesystem. Blocking."""
    upper = sandbox_dir / "fs" / OVERLAY_DIR / "upper"
    found: set[str] = set()
    for directory in under:
        top = upper / sandbox_path(directory).lstrip("/")
        if top.is_symlink() or not top.exists():
            continue
        found.add(sandbox_path(directory))
        for here, dirs, files in os.walk(top):
            for name in dirs + files:
                found.add("/" + str((Path(here) / name).relative_to(upper)))
    return sorted(found)


def hand_out(sandbox_dir: Path, files: dict[str, Path], meta: SandboxMeta) -> None:
    """Copy a spec's files into a warm sandbox and record its labels. Blocking; only before
    anything but the helper has run in the sandbox (no planted links)."""
    copy_files(sandbox_dir, files)
    meta.write(sandbox_dir)


def release_and_remove(limits: SandboxLimits | None, sandbox_dir: Path) -> None:
    """Release a closed sandbox's limits and remove its directory. Blocking.

    Without a record of its limits (a start whose populating thread outlived its caller) the
    mounts under the directory are found and unmounted all the same: removing the directory
    around a live mount would lose the only trace of it.
    """
    if limits is not None:
        release_limits(limits)
    else:
        for path in mounts_under(sandbox_dir):
            unmount(path)
    remove_sandbox_dir(sandbox_dir)
