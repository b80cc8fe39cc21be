"""The on-disk side of a local sandbox: its directory, its writable directories and files,
owned by the sandbox's id range (:mod:`.userns`). bubblewrap's command line is :mod:`.bwrap`.

A sandbox lives in ``<state_dir>/<run_id>/<sandbox_id>/``: ``meta.json`` (its record for the
janitor), ``fs/`` (the host directories behind its writable directories, and a root
filesystem's writable layer), ``lower/`` (an idmapped view of the root filesystem) and ``root/``
(the overlay of the two that the sandbox runs on). The helper
runs on its own runtime (:mod:`palaestra.sandbox.helper_runtime`), bound read-only at
``/.palaestra``: a root filesystem needs no Python of its own. The functions that touch the disk
are blocking: callers run them in a thread.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
from pathlib import Path

from palaestra.sandbox._channel import sandbox_path
from palaestra.sandbox.base import SandboxError, SandboxSpec, SandboxSpecError, is_within
from palaestra.sandbox.helper_runtime import helper_runtime
from palaestra.sandbox.janitor import RUN_ID_LABEL, SandboxMeta, remove_sandbox_dir
from palaestra.sandbox.limits import SandboxLimits, apply_limits
from palaestra.sandbox.limits import release as release_limits
from palaestra.sandbox.local.bwrap import system_dir_args
from palaestra.sandbox.local.seccomp import seccomp_program
from palaestra.sandbox.local.snapshot import OVERLAY_DIR, copy_into
from palaestra.sandbox.local.userns import (
    id_base,
    idmapped_clone,
    shift_into_range,
    shift_into_range_one,
)
from palaestra.sandbox.mounts import mount as mount_fs
from palaestra.sandbox.mounts import mounts_under, unmount

_MS_BIND, _MS_REC = 4096, 16384
#: Always writable besides the spec's directories; HOME is /root.
EXTRA_WRITABLE_DIRS = ("/root", "/var/tmp")
STICKY_DIRS = frozenset({"/tmp", "/var/tmp"})


def writable_dirs(spec: SandboxSpec) -> list[str]:
    """Every writable directory, sorted (so a directory comes before the ones inside it)."""
    dirs = {sandbox_path(d) for d in (spec.workdir, *spec.writable_dirs, *EXTRA_WRITABLE_DIRS)}
    if "/" in dirs:
        raise SandboxSpecError("the local backend cannot make / writable; list subdirectories")
    return sorted(dirs)


def writable_binds(sandbox_dir: Path, writable: list[str]) -> list[tuple[Path, str]]:
    """(host directory, target) of each writable directory that needs a bind of its own."""
    return [(_backing(sandbox_dir, path), path) for path in _outermost(writable)]


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


def open_to_the_sandboxes(state_dir: Path) -> None:
    """Let the sandboxes' uid (bwrap runs as it) pass through ``state_dir`` to the
    directories bound from it, without listing it: mode 0711, as :func:`prepare` makes it
    (and as a state directory made before sandboxes had a uid of their own becomes here).
    Raises SandboxError when a directory above it is closed to others. Blocking."""
    real = Path(os.path.realpath(state_dir))
    for parent in reversed(real.parents):
        if not os.stat(parent).st_mode & 0o001:
            raise SandboxError(
                f"local sandboxes cannot use the state directory {state_dir}: {parent} is closed "
                "to other users, and bubblewrap runs as the sandboxes' unprivileged uid; choose "
                f"a state directory others can reach (PALAESTRA_STATE_DIR), or chmod o+x {parent}"
            )
    try:
        if real.stat().st_mode & 0o777 != 0o711:
            real.chmod(0o711)
    except FileNotFoundError:
        pass


def prepare(spec: SandboxSpec, sandbox_dir: Path, meta: SandboxMeta) -> SandboxLimits:
    """The first half of a sandbox's files, what its bubblewrap command needs: the sandbox's
    directory, its meta.json, its limits (cgroups, disk quota) and the binds of the sources
    its uid cannot reach. Blocking.

    :func:`fill` does the rest, while bubblewrap starts when the sandbox has no root
    filesystem: bwrap touches no path of the sandbox until its user namespace's maps are
    written, which waits for ``fill``. Mounts cannot wait: bwrap's mount namespace is a copy
    of this one made when it starts, so a mount made later is not in it (hence the binds here,
    and a root filesystem's overlay made by ``fill`` before bwrap starts)."""
    state_dir = sandbox_dir.parent.parent
    state_dir.mkdir(mode=0o711, parents=True, exist_ok=True)
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
    seccomp_program()  # compiled once, likewise
    if spec.rootfs is None:
        system_dir_args()
    else:
        _check_rootfs(Path(spec.rootfs))
    run_id = meta.labels[RUN_ID_LABEL]
    limits = apply_limits(spec, f"{run_id}.{meta.sandbox_id}", sandbox_dir / "fs", owner=id_base())
    try:
        for source, staged in zip(
            _bind_sources(spec), bind_sources(spec, sandbox_dir), strict=True
        ):
            if staged != source:
                staged.mkdir(parents=True)
                mount_fs(str(source), staged, "", "", _MS_BIND | _MS_REC)
                limits.mounts.append(str(staged))
    except BaseException:
        release_limits(limits)
        raise
    return limits


def fill(
    spec: SandboxSpec,
    sandbox_dir: Path,
    meta: SandboxMeta,
    writable: list[str],
    files: dict[str, Path],
    seed: Path | None,
    limits: SandboxLimits,
) -> None:
    """The second half (see :func:`prepare`): the backing directories of the writable ones,
    the spec's files copied in, a root filesystem's overlay, the binds of unreachable
    sources; meta.json rewritten with the cgroups and mounts. ``seed`` is a snapshot's copy of
    a sandbox's ``fs/`` (:mod:`.snapshot`) to start from, copied in first. Blocking. Every
    mount made is recorded in ``limits`` at once, so closing the sandbox undoes it whatever
    fails.

    Runs before the sandbox's processes do, when nothing inside can have planted links yet.
    """
    fs = sandbox_dir / "fs"
    fs.mkdir(exist_ok=True)
    if seed is not None:
        copy_into([seed / name for name in os.listdir(seed)], fs)
    layer = fs / OVERLAY_DIR
    if spec.rootfs is not None:
        # The writable layer lives in fs/ (under the disk quota when there is one); it
        # disappears with the sandbox, the shared read-only rootfs stays as it was.
        (layer / "upper").mkdir(parents=True, exist_ok=True)
    _make_backing(sandbox_dir, writable, files)
    # All the sandbox may write belongs to its ids: nothing in it is the host root's.
    shift_into_range(fs)
    # Closed to the host's other users: root inside makes set-id files here, set-id to
    # the range's first uid on the host (bwrap's binds are nosuid only inside).
    fs.chmod(0o700)
    if spec.rootfs is not None:
        (layer / "work").mkdir()  # overlayfs's own, used with the mounter's rights only
        _mount_root(Path(spec.rootfs).resolve(), sandbox_dir, layer, limits)
    dataclasses.replace(meta, cgroups=limits.cgroups, mounts=limits.mounts).write(sandbox_dir)


def _bind_sources(spec: SandboxSpec) -> list[Path]:
    """Host directories bound into the sandbox besides its own: the helper's runtime, then the
    spec's mounts, in order."""
    return [helper_runtime(), *(Path(m.source) for m in spec.mounts)]


def bind_sources(spec: SandboxSpec, sandbox_dir: Path) -> list[Path]:
    """Where bwrap finds each of :func:`_bind_sources`: the source itself, or, when the
    sandbox's unprivileged uid cannot reach it (a directory on the way, such as root's home,
    is closed to others), a bind mount of it that :func:`fill` makes in the sandbox's
    directory (bwrap resolves every source as that uid, even one passed as a descriptor)."""
    found = []
    for index, source in enumerate(_bind_sources(spec)):
        parents = Path(os.path.realpath(source)).parents
        reachable = all(os.stat(parent).st_mode & 0o001 for parent in parents)
        found.append(source if reachable else sandbox_dir / "mounts" / str(index))
    return found


def _mount_root(rootfs: Path, sandbox_dir: Path, layer: Path, limits: SandboxLimits) -> None:
    """The sandbox's root: an overlay of the root filesystem, seen through an idmapped mount
    (its root-owned files are the sandbox root's), under the writable layer in ``layer``."""
    lower, root = sandbox_dir / "lower", sandbox_dir / "root"
    lower.mkdir()
    root.mkdir()
    idmapped_clone(rootfs, lower)
    limits.mounts.append(str(lower))
    mount_fs(
        "overlay",
        root,
        "overlay",
        f"lowerdir={lower},upperdir={layer / 'upper'},workdir={layer / 'work'}",
    )
    limits.mounts.append(str(root))


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
    """Copy a spec's files into a warm sandbox (owned by its ids, as :func:`fill` leaves
    them) and record its labels. Blocking; only before anything but the helper has run in the
    sandbox (no planted links)."""
    copy_files(sandbox_dir, files)
    fs = sandbox_dir / "fs"
    for target in files:
        dest = _backing(sandbox_dir, target)
        shift_into_range(dest)
        for parent in dest.parents:  # the directories copy_files made on the way
            if parent == fs or not is_within(str(parent), str(fs)):
                break
            shift_into_range_one(parent)
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
