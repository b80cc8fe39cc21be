"""A run's case directory and what the checker reads back of it (stdlib only, Python 3.8+;
shipped in ``tests/`` beside ``palaestra_harness.py``): the inputs written root's and
read-only (or the run's, ``writable``), links and empty folders included; a run's output
files, folders and a shell task's paths read back without following links."""

import os
import stat

from palaestra_check import NOBODY, linked, make_private_dir, read_regular, read_regular_bytes

_MAX_FILE = 64 * 1024 * 1024


def readonly_tree(files):
    """A new directory of root's, readable by all, holding ``files`` (path -> text or bytes)."""
    root = make_private_dir("ref-")
    _write_files(root, files, 0o644)
    os.chmod(root, 0o755)
    return root


def _write_files(root, files, mode):
    for rel in sorted(files):
        path = os.path.join(root, rel)
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            os.makedirs(parent, 0o755)
        data = files[rel]
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data)
    for here, dirs, _ in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(here, name), 0o755)


def case_dir(files, tree=None, writable=False):
    """A fresh directory for one run: ``files`` in it are root's and read-only (and the
    ``tree``'s links and empty folders, see :func:`_write_tree`); the directory is sticky and
    writable, so the run may add its own files but never change or remove the inputs
    (``writable``: the inputs are the run's, to change, rename or remove). Nothing of another
    case is in it."""
    root = make_private_dir("case-")
    _write_files(root, files or {}, 0o644)
    _write_tree(root, tree or {})
    if writable:
        for here, dirs, names in os.walk(root):
            for name in dirs + names:
                os.chown(os.path.join(here, name), NOBODY, NOBODY, follow_symlinks=False)
    os.chmod(root, 0o1777)
    return root


def _write_tree(root, tree):
    """What ``files`` cannot say of an input tree: ``dirs`` (empty folders), ``hardlinks``
    (path -> an input file's path), ``symlinks`` (path -> the link's text, as given) and
    ``modes`` (an input file's path -> its permission bits)."""

    def parent_of(rel):
        path = os.path.join(root, rel)
        here = root
        for part in os.path.dirname(rel).split("/"):
            here = os.path.join(here, part) if part else here
            if not os.path.isdir(here):
                os.mkdir(here)
            os.chmod(here, 0o755)
        return path

    for rel in tree.get("dirs", ()):
        parent_of(rel + "/.")
    for rel, target in sorted(tree.get("hardlinks", {}).items()):
        os.link(os.path.join(root, target), parent_of(rel), follow_symlinks=False)
    for rel, target in sorted(tree.get("symlinks", {}).items()):
        os.symlink(target, parent_of(rel))
    for rel, mode in sorted(tree.get("modes", {}).items()):
        os.chmod(os.path.join(root, rel), mode, follow_symlinks=False)


def read_outputs(directory):
    """``{name: text}`` of the regular files directly in ``directory`` (which must not be a
    link), each read without following links and capped; anything else is skipped."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        dir_fd = os.open(directory, flags)
    except OSError:
        return {}
    out = {}
    try:
        for name in sorted(os.listdir(dir_fd)):
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as f:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    out[name] = f.read(_MAX_FILE).decode("utf-8", "replace")
    finally:
        os.close(dir_fd)
    return out


_MAX_ENTRIES = 20000


def read_tree(directory, modes=False, gunzip=False):
    """``{path: entry}`` of everything under ``directory`` (which must not be a link), never
    through a link: ``["file", text]`` (capped, a FIFO never blocks; ``modes``: its permission
    bits too, ``["file", text, mode]``; ``gunzip``: a ``.gz`` file's text decompressed, capped,
    ``["other"]`` when it is not gzip data), ``["dir"]``, ``["link", its text]`` or
    ``["other"]``; None when ``directory`` is missing or a link."""
    if linked(directory) or not os.path.isdir(directory):
        return None
    out = {}
    for here, dirs, names in os.walk(directory):
        for name in sorted(dirs + names):
            path = os.path.join(here, name)
            rel = os.path.relpath(path, directory)
            if os.path.islink(path):
                out[rel] = ["link", os.readlink(path)]
            elif name in dirs:
                out[rel] = ["dir"]
            else:
                out[rel] = _file_entry(path, modes, gunzip and name.endswith(".gz"))
            if len(out) > _MAX_ENTRIES:
                return out
    return out


def _file_entry(path, modes, gunzip):
    data = read_regular_bytes(path, _MAX_FILE)
    if data is not None and gunzip:
        import gzip
        import io
        import zlib

        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as z:
                data = z.read(_MAX_FILE)  # never a whole gzip bomb
        except (OSError, EOFError, zlib.error):
            data = None
    if data is None:
        return ["other"]
    entry = ["file", data.decode("utf-8", "replace")]
    return entry + [stat.S_IMODE(os.lstat(path).st_mode)] if modes else entry


def look(path):
    """What the agent left at ``path``: its ``type`` (``absent``, ``link`` when it or a
    directory on it is a symlink, ``dir``, ``file`` or ``other``) and, a regular file reached
    without links, its ``text`` (capped; a FIFO never blocks the checker)."""
    if not os.path.lexists(path):
        kind = "absent"
    elif linked(path):
        kind = "link"
    elif os.path.isdir(path):
        kind = "dir"
    else:
        kind = "file" if os.path.isfile(path) else "other"
    return {"type": kind, "text": read_regular(path) if kind == "file" else None}


_OLD = 1_000_000_000  # 2001: a kept folder's files start with this mtime, so a rewrite shows


def stamps(directory):
    """``{path: (inode, mtime)}`` of the regular files under ``directory``, never through a
    link (a ``kept`` folder's, before and after a run)."""
    out = {}
    if linked(directory) or not os.path.isdir(directory):
        return out
    for here, _, names in os.walk(directory):
        for name in names:
            st = os.lstat(os.path.join(here, name))
            if stat.S_ISREG(st.st_mode):
                rel = os.path.relpath(os.path.join(here, name), directory)
                out[rel] = (st.st_ino, st.st_mtime_ns)
    return out


def age(directory):
    """Gives the regular files under ``directory`` an old mtime (before a run), so that one
    rewritten in place shows in :func:`stamps`."""
    for rel in stamps(directory):
        os.utime(os.path.join(directory, rel), (_OLD, _OLD), follow_symlinks=False)
