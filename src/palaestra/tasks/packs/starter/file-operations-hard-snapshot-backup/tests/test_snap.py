"""Hidden tests for snap.py: three backups of a tricky tree that changes in between, exact
restores of every snapshot, immutability, and object-store deduplication."""

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile


def describe(root):
    """Exact description of a tree: {relative path (bytes): entry} without following links."""
    out = {}
    broot = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(broot, followlinks=False):
        for name in [b"."] if dirpath == broot else []:
            st = os.lstat(dirpath)
            out[b"."] = ("dir", stat.S_IMODE(st.st_mode))
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, broot)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                out[rel] = ("file", stat.S_IMODE(st.st_mode), int(st.st_mtime), digest)
            else:
                out[rel] = ("other",)
    return out


def put(root, rel, data, mode=0o644, mtime=None):
    path = os.path.join(os.fsencode(root), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def build_tree(src):
    os.makedirs(src)
    put(src, b"etc/app.conf", b"port = 8080\n", 0o644, 1_600_000_000)
    put(src, b"etc/app.conf.bak", b"port = 8080\n", 0o600, 1_500_000_000)  # same content
    put(src, b"bin/run.sh", b"#!/bin/sh\necho run\n", 0o755, 1_650_000_123)
    put(src, b"bin/readonly.txt", b"do not edit\n", 0o444, 1_650_000_456)
    put(src, b"bin/setuid-ish", b"odd mode\n", 0o4711, 1_650_000_789)
    put(src, b"data/empty.txt", b"", 0o644, 1_640_000_000)
    put(src, b"data/big.bin", os.urandom(3 << 20), 0o640, 1_630_000_000)
    put(src, b"data/big copy.bin", open(os.path.join(src, "data/big.bin"), "rb").read(), 0o644)
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


def give_to_nobody(root):
    """The agent's code runs as nobody: it must own the tree it works on."""
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            os.lchown(os.path.join(here, name), 65534, 65534)
    os.lchown(root, 65534, 65534)


def snap(*args, timeout=60):
    return subprocess.run([sys.executable, "-E", "-s", "/app/snap.py", *args], cwd="/tmp", user=65534, group=65534, extra_groups=[],
                          capture_output=True, timeout=timeout)


def fail(msg):
    print("FAIL:", msg)
    return 1


def main():
    work = tempfile.mkdtemp()
    try:
        src, repo = os.path.join(work, "src"), os.path.join(work, "repo")
        build_tree(src)
        give_to_nobody(work)
        states, ids = [], []
        for step in range(3):
            before = describe(src)
            proc = snap("backup", src, repo)
            if proc.returncode != 0:
                return fail(f"backup {step + 1} exited {proc.returncode}: {proc.stderr[-1500:]!r}")
            lines = proc.stdout.decode(errors="replace").split("\n")
            if len(lines) != 2 or lines[1] != "" or not lines[0] or any(
                    c.isspace() or c == "/" for c in lines[0]):
                return fail(f"backup {step + 1} must print exactly one id line, got {proc.stdout!r}")
            if describe(src) != before:
                return fail(f"backup {step + 1} modified the source tree")
            states.append(before)
            ids.append(lines[0])
            if step == 0:
                mutate(src)
        if len(set(ids)) != 3:
            return fail(f"snapshot ids are not unique: {ids}")
        proc = snap("list", repo)
        if proc.returncode != 0 or proc.stdout.decode().split() != ids:
            return fail(f"list printed {proc.stdout!r}, expected {ids}")
        for n in (2, 0, 1):  # restore out of order: older snapshots must be intact
            dest = os.path.join(work, f"restore{n}")
            proc = snap("restore", repo, ids[n], dest)
            if proc.returncode != 0:
                return fail(f"restore of snapshot {n + 1} exited {proc.returncode}: "
                            f"{proc.stderr[-1500:]!r}")
            got = describe(dest)
            if got != states[n]:
                diffs = [k for k in sorted(set(got) | set(states[n]))
                         if got.get(k) != states[n].get(k)]
                for k in diffs[:6]:
                    print(f"  {k!r}: expected {states[n].get(k)}, got {got.get(k)}")
                return fail(f"restore of snapshot {n + 1} differs in {len(diffs)} entries")
        if snap("restore", repo, "no-such-snapshot", os.path.join(work, "nope")).returncode == 0:
            return fail("restoring an unknown snapshot must fail")
        contents = {e[3] for st in states for e in st.values() if e[0] == "file"}
        objects = []
        for dirpath, _, files in os.walk(os.path.join(repo, "objects")):
            for f in files:
                full = os.path.join(dirpath, f)
                if os.path.islink(full):
                    return fail(f"{full} in objects/ is a symlink")
                with open(full, "rb") as fh:
                    objects.append(hashlib.sha256(fh.read()).hexdigest())
        if sorted(objects) != sorted(contents):
            return fail(f"objects/ holds {len(objects)} files ({len(set(objects))} distinct "
                        f"contents); expected exactly one per distinct content ({len(contents)})")
        print(f"ok: 3 snapshots restored exactly, {len(objects)} objects")
        return 0
    finally:
        for dirpath, dirnames, _ in os.walk(work):
            for d in dirnames:
                try:
                    os.chmod(os.path.join(dirpath, d), 0o755)
                except OSError:
                    pass
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
