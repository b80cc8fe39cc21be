"""The snapshot-backup test as data: ``TREE`` is Python both sides run (the checker's child
builds the tricky tree from it, backs it up three times with a change after the first, and
restores each snapshot; the spec's builder builds the same tree here to fix each snapshot's
exact description), and ``check`` judges what the child saw (the harness's ``function``
comparison). The tree's every mode and mtime is set, so its description is the same wherever
it is built."""

import os
import tempfile

TREE = r'''
import hashlib, os, random, stat


def describe(root):
    """Exact description of a tree: {relative path (fsdecoded): entry} without following
    links."""
    out = {}
    broot = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(broot, followlinks=False):
        for name in [b"."] if dirpath == broot else []:
            st = os.lstat(dirpath)
            out["."] = ["dir", stat.S_IMODE(st.st_mode)]
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.fsdecode(os.path.relpath(full, broot))
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ["link", os.fsdecode(os.readlink(full))]
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ["dir", stat.S_IMODE(st.st_mode)]
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                out[rel] = ["file", stat.S_IMODE(st.st_mode), int(st.st_mtime), digest]
            else:
                out[rel] = ["other"]
    return out


def put(root, rel, data, mode=0o644, mtime=None):
    path = os.path.join(os.fsencode(root), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def build_tree(src, big_seed):
    os.umask(0o022)
    os.makedirs(src)
    put(src, b"etc/app.conf", b"port = 8080\n", 0o644, 1_600_000_000)
    put(src, b"etc/app.conf.bak", b"port = 8080\n", 0o600, 1_500_000_000)  # same content
    put(src, b"bin/run.sh", b"#!/bin/sh\necho run\n", 0o755, 1_650_000_123)
    put(src, b"bin/readonly.txt", b"do not edit\n", 0o444, 1_650_000_456)
    put(src, b"bin/setuid-ish", b"odd mode\n", 0o4711, 1_650_000_789)
    put(src, b"data/empty.txt", b"", 0o644, 1_640_000_000)
    put(src, b"data/big.bin", random.Random(big_seed).randbytes(3 << 20), 0o640, 1_630_000_000)
    with open(os.path.join(src, "data/big.bin"), "rb") as f:
        put(src, b"data/big copy.bin", f.read(), 0o644, 1_630_000_001)
    weird = [b"space name.txt", b"tab\there", b"new\nline", b"-leading-dash", b"back\\slash",
             "ünïcødé ✓.txt".encode(), b"latin1-\xe9.txt", b"\xff\xfe raw", b"x" * 200]
    for i, name in enumerate(weird):
        put(src, b"names/" + name, f"file {i}\n".encode(), 0o644, 1_620_000_000 + i)
    os.makedirs(os.path.join(src, "empty/nested/deeper"))
    os.makedirs(os.path.join(src, "private"))
    put(src, b"private/key", b"secret\n", 0o600, 1_610_000_000)
    os.chmod(os.path.join(src, "private"), 0o700)
    os.makedirs(os.path.join(src, "locked"))
    put(src, b"locked/inside.txt", b"inside a read-only dir\n", 0o644, 1_610_000_001)
    os.chmod(os.path.join(src, "locked"), 0o555)
    os.symlink("../etc/app.conf", os.path.join(src, "bin/config-link"))
    os.symlink("etc", os.path.join(src, "etc-link"))               # link to a directory
    os.symlink("/etc/hostname", os.path.join(src, "absolute-link"))
    os.symlink("missing/target", os.path.join(src, "dangling-link"))
    os.symlink(b"names/latin1-\xe9.txt", os.path.join(os.fsencode(src), b"bytes-link"))


def mutate(src):
    put(src, b"etc/app.conf", b"port = 9090\n", 0o644, 1_700_000_000)
    os.remove(os.path.join(src, "etc/app.conf.bak"))
    os.chmod(os.path.join(src, "bin/run.sh"), 0o700)
    os.utime(os.path.join(src, "bin/readonly.txt"), (1_700_000_100, 1_700_000_100))
    put(src, b"new/file.txt", b"port = 8080\n", 0o644, 1_700_000_200)  # old content again
    os.remove(os.path.join(src, "dangling-link"))
    os.symlink("elsewhere", os.path.join(src, "dangling-link"))
    os.remove(os.path.join(src, "data/empty.txt"))
    os.symlink("big.bin", os.path.join(src, "data/empty.txt"))  # a file became a link
    os.rmdir(os.path.join(src, "empty/nested/deeper"))
'''


def states():
    """The source tree's description before each of the three backups."""
    ns = {}
    exec(TREE, ns)
    umask = os.umask(0o022)
    with tempfile.TemporaryDirectory(prefix="palaestra-snap-") as work:
        src = os.path.join(work, "src")
        ns["build_tree"](src, 1)
        first = ns["describe"](src)
        ns["mutate"](src)
        second = ns["describe"](src)
        for dirpath, dirnames, _ in os.walk(work):  # read-only folders, for the clean-up
            for d in dirnames:
                os.chmod(os.path.join(dirpath, d), 0o755)
    os.umask(umask)
    return [first, second, second]


def _line(value):
    return ascii(value)[:300]


def problems(want, got):
    """What is wrong in the child's report (the first problems), or []."""
    states = want["states"]
    found, ids = [], []
    for step, (backup, state) in enumerate(zip(got["backups"], states)):
        if backup["rc"] != 0:
            return [f"backup {step + 1} exited {backup['rc']}: {_line(backup['stderr'])}"]
        lines = backup["stdout"].split("\n")
        if len(lines) != 2 or lines[1] != "" or not lines[0] or any(
                c.isspace() or c == "/" for c in lines[0]):
            return [f"backup {step + 1} must print exactly one id line, got "
                    f"{_line(backup['stdout'])}"]
        if backup["source"] != state:
            return [f"backup {step + 1} modified the source tree"]
        ids.append(lines[0])
    if len(got["backups"]) != 3:
        return ["the backups did not all run"]
    if len(set(ids)) != 3:
        return [f"snapshot ids are not unique: {_line(ids)}"]
    listed = got["list"]
    if listed["rc"] != 0 or listed["stdout"].split() != ids:
        return [f"list printed {_line(listed['stdout'])}, expected {_line(ids)}"]
    for n, restore in zip((2, 0, 1), got["restores"]):
        if restore["rc"] != 0:
            return [f"restore of snapshot {n + 1} exited {restore['rc']}: "
                    f"{_line(restore['stderr'])}"]
        tree = restore["tree"]
        if tree != states[n]:
            diffs = [k for k in sorted(set(tree) | set(states[n]))
                     if tree.get(k) != states[n].get(k)]
            found += [f"{_line(k)}: expected {_line(states[n].get(k))}, got {_line(tree.get(k))}"
                      for k in diffs[:4]]
            return [f"restore of snapshot {n + 1} differs in {len(diffs)} entries"] + found
    if got["unknown_rc"] == 0:
        return ["restoring an unknown snapshot must fail"]
    objects = got["objects"]
    if isinstance(objects, dict):
        return [f"{_line(objects['link'])} in objects/ is a symlink"]
    if sorted(objects) != want["contents"]:
        return [f"objects/ holds {len(objects)} files ({len(set(objects))} distinct contents); "
                f"expected exactly one per distinct content ({len(want['contents'])})"]
    return []


def check(ck, label, want, got, options):
    """One check: the three snapshots made, listed and restored exactly, the store deduped."""
    try:
        found = problems(want, got)
    except (KeyError, TypeError, AttributeError, IndexError) as e:
        found = [f"reported {_line(got)[:200]} ({e!r})"]
    ck.check(label, not found, "; ".join(found))
