"""Exported root filesystems that share their common files (see :func:`share_files`).

Images built on one base (every ``tasks synth`` project's image is ``palaestra/base:bookworm``
plus its own venv) export to trees that are mostly the same files. Each export records the
image's layer ids beside it (``<export>.layers``); a new export is compared with the cached one
sharing the longest run of leading layers, and each of its regular files equal to the one at
the same path there (same size, mode, owner, modification time and content) is replaced by a
hard link to it. An export then costs on disk only what its own layers changed: the base once.

Hard links rather than stacked overlay lowerdirs keep an export a plain self-contained tree
(deleting one export never breaks another, the sandbox mounts one lowerdir as before). The
trees are read-only to sandboxes (an overlay's writes go to its upper layer), so a shared
inode is never written through one export and seen in another.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

LAYERS_SUFFIX = ".layers"
_CHUNK = 1 << 20


def layers_file(export: Path) -> Path:
    return export.with_name(export.name + LAYERS_SUFFIX)


def record_layers(export: Path, layers: list[str]) -> None:
    """Write the layer ids of the image ``export`` came from beside it (atomically)."""
    target = layers_file(export)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(layers))
    os.replace(partial, target)


def _recorded_layers(export: Path) -> list[str] | None:
    try:
        layers = json.loads(layers_file(export).read_text())
    except (OSError, ValueError):
        return None
    return layers if isinstance(layers, list) else None


def closest_export(cache: Path, layers: list[str], *, exclude: str = "") -> Path | None:
    """The cached export whose image shares the most leading layers with ``layers`` (at least
    one), or None."""
    best, best_shared = None, 0
    try:
        names = sorted(os.listdir(cache))
    except FileNotFoundError:
        return None
    for name in names:
        if name.startswith(".") or name.endswith(LAYERS_SUFFIX) or name == exclude:
            continue
        export = cache / name
        theirs = _recorded_layers(export)
        if theirs is None or not export.is_dir():
            continue
        shared = 0
        for mine, other in zip(layers, theirs, strict=False):
            if mine != other:
                break
            shared += 1
        if shared > best_shared:
            best, best_shared = export, shared
    return best


def share_files(tree: Path, base: Path) -> int:
    """Replace each regular file of ``tree`` that is equal to ``base``'s at the same path by a
    hard link to it; return the bytes no longer stored twice. Blocking. A file whose
    counterpart cannot take another link (the filesystem's limit) or went meanwhile stays a
    copy."""
    saved = 0
    for directory, _dirs, files in os.walk(tree):
        rel = os.path.relpath(directory, tree)
        for name in files:
            mine = os.path.join(directory, name)
            theirs = os.path.normpath(os.path.join(base, rel, name))
            if _same_file(mine, theirs):
                try:
                    _link_over(theirs, mine)
                except OSError as exc:
                    if exc.errno in (errno.EMLINK, errno.EXDEV, errno.EEXIST, errno.ENOENT):
                        continue
                    raise
                saved += os.lstat(mine).st_size
    return saved


def _same_file(mine: str, theirs: str) -> bool:
    try:
        a, b = os.lstat(mine), os.lstat(theirs)
    except FileNotFoundError:
        return False
    if not (stat.S_ISREG(a.st_mode) and stat.S_ISREG(b.st_mode)):
        return False
    if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
        return False  # already one file
    if (a.st_size, a.st_mode, a.st_uid, a.st_gid, a.st_mtime_ns) != (
        b.st_size,
        b.st_mode,
        b.st_uid,
        b.st_gid,
        b.st_mtime_ns,
    ):
        return False
    with open(mine, "rb") as f, open(theirs, "rb") as g:
        while True:
            x, y = f.read(_CHUNK), g.read(_CHUNK)
            if x != y:
                return False
            if not x:
                return True


def _link_over(source: str, target: str) -> None:
    partial = f"{target}.palaestra-link"
    os.link(source, partial)
    try:
        os.replace(partial, target)
    except BaseException:
        os.unlink(partial)
        raise
