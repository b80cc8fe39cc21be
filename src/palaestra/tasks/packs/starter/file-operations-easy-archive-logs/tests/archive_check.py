"""Checks /app/archive against the layout the spec fixed from the original file list
(``manifest.json``: names and SHA-256), and that /app/incoming holds no file. Nothing the
agent left is followed: a link is a problem, a file is read only when regular (a FIFO never
blocks), capped, through the jail's own reader."""

import hashlib
import os

from palaestra_jail import read_regular_bytes

_MAX_FILE = 1 << 20
_MAX_ENTRIES = 5000


def found(directory):
    """``({path: sha256}, problems)`` of what is under ``directory``, never through a link."""
    digests, problems, seen = {}, [], 0
    for here, dirs, names in os.walk(directory):
        for name in sorted(dirs + names):
            seen += 1
            if seen > _MAX_ENTRIES:
                return digests, problems + ["more than %d entries" % _MAX_ENTRIES]
            path = os.path.join(here, name)
            rel = os.path.relpath(path, directory)
            if os.path.islink(path):
                problems.append(rel + " is a symlink, not a file")
            elif name not in dirs:
                data = read_regular_bytes(path, _MAX_FILE)
                if data is None:
                    problems.append(rel + " is not a regular file")
                else:
                    digests[rel] = hashlib.sha256(data).hexdigest()
    return digests, problems


def check(ck, label, want, got, opts):
    """``want["path"]``, the folder looked at: with ``want["files"]``, it holds exactly those
    files (path -> SHA-256); with ``want["empty"]``, it holds no file if it is there. One
    check."""
    path = want["path"]
    if got["type"] not in ("dir", "absent"):  # "link": it, or a folder on it, is a link
        return ck.check(label, False, "%s is a %s" % (path, got["type"]))
    if got["type"] == "absent":
        ok = "empty" in want
        return ck.check(label, ok, "" if ok else path + " does not exist")
    digests, problems = found(path)
    if "empty" in want:
        problems += [rel + " is still there" for rel in sorted(digests)]
    else:
        for rel, digest in sorted(want["files"].items()):
            if rel not in digests:
                problems.append("missing archive/" + rel)
            elif digests[rel] != digest:
                problems.append("archive/%s has the wrong content" % rel)
        extra = sorted(set(digests) - set(want["files"]))
        problems += ["unexpected archive/" + rel for rel in extra]
    return ck.check(label, not problems, "; ".join(problems[:8]))
