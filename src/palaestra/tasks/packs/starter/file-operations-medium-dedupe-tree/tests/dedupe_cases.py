"""The dedupe-tree cases: two hidden trees (from the test's fixed seeds) as data, what the
reference says dedupe.py must make of them and of /app/shared, and the comparison (the
harness's ``function`` comparison): 8 checks a tree and one for /app/shared, 17 in all.

``TREE`` is Python both sides run: the checker's child builds the trees from it and looks at
them, and the spec's builder builds them here to fix the expected values."""

import hashlib
import json
import os
import random

EMPTY = hashlib.sha256(b"").hexdigest()
CHECKS = ("runs", "content", "unique", "keepers", "links", "untouched", "report", "idempotent")

TREE = r'''
import hashlib, os, random, stat


def build(root, desc):
    """Write the tree ``desc`` (files: rel -> hex, big: paths of one large random file made
    from big_seed, links: rel -> target) under the new directory ``root``."""
    big = random.Random(desc["big_seed"]).randbytes(1 << 21)
    files = {rel: bytes.fromhex(data) for rel, data in desc["files"].items()}
    files.update({rel: big for rel in desc["big"]})
    os.makedirs(root)
    for rel, data in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    for rel, target in desc["links"].items():
        os.symlink(target, os.path.join(root, rel))


def snapshot(root):
    """{rel: ["file", sha256] | ["link", target] | ["dir"] | ["other"]}, never following a
    link nor opening what is not a regular file."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ["link", os.readlink(full)]
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ["dir"]
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    out[rel] = ["file", hashlib.sha256(f.read()).hexdigest()]
            else:
                out[rel] = ["other"]
    return out


def content(root, rel):
    """The SHA-256 of what ``rel`` reads as, through links (None: not a regular file)."""
    try:
        path = os.path.join(root, rel)
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None
'''


def describe(rng, scale, big_seed):
    """A hidden tree as data, drawn as the test always drew it."""
    blobs = [bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))) for _ in range(8 * scale)]
    blobs += [b"same size A" * 9, b"same size B" * 9, b"\x00" * 64, b"\x00" * 63 + b"\x01"]
    dirs = ["a", "a b", "a-b", "B", "a/deep/er/still", "photos/2024", "photos/2024 copy",
            "docs/été", "docs/日本", "x"]
    names = ["x.txt", "img 1.jpg", "notes.md", "data.bin", "é.txt", "Z.txt", "a.txt"]
    files = {}
    for i in range(30 * scale):
        rel = f"{rng.choice(dirs)}/{i % 5}-{rng.choice(names)}"
        files[rel] = rng.choice(blobs).hex()
    # keeper ordering traps: ' ' and '-' sort before '/', uppercase before lowercase
    for rel in ("a/trap.txt", "a b/trap.txt", "a-b/trap.txt", "B/trap.txt"):
        files[rel] = b"ordering trap\n".hex()
    for rel in ("empty1", "a/empty2", "B/empty3"):
        files[rel] = ""
    # existing links: to a duplicate file, to a directory full of duplicates, dangling
    links = {"link-to-trap": "a/trap.txt", "x/photos-link": "../photos",
             "dangling": "nowhere/at/all"}
    return {"files": files, "big": ["media/big.iso", "media/backup/big copy.iso"],
            "big_seed": big_seed, "links": links}


def expected_state(before):
    groups = {}
    for rel, entry in before.items():
        if entry[0] == "file" and entry[1] != EMPTY:
            groups.setdefault(entry[1], []).append(rel)
    after, report, dup_groups = dict(before), [], []
    for members in groups.values():
        if len(members) < 2:
            continue
        keeper = min(members)
        dup_groups.append([keeper, sorted(m for m in members if m != keeper)])
        for m in members:
            if m != keeper:
                after[m] = ["link", os.path.relpath(keeper, os.path.dirname(m) or ".")]
                report.append(f"{m}\t{keeper}")
    return after, sorted(report), dup_groups


def cases(tmp):
    """The call's input (the two trees) and each case's expected value, the trees built under
    ``tmp`` to look at them; the last case is /app/shared."""
    trees, wants = [], []
    for n, scale in ((1, 1), (2, 3)):
        desc = describe(random.Random(1000 + n), scale, 2000 + n)
        ns = {}
        exec(TREE, ns)
        root = os.path.join(tmp, f"tree{n}")
        ns["build"](root, desc)
        before = ns["snapshot"](root)
        after, report, groups = expected_state(before)
        originals = sorted(rel for rel, e in before.items() if e[0] == "file")
        trees.append(desc)
        wants.append({"before": before, "after": after, "report": report, "groups": groups,
                      "originals": originals})
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "shared_manifest.json")) as f:
        manifest = json.load(f)
    before = {rel: ["file", digest] for rel, digest in manifest.items()}
    for rel in manifest:  # the directories
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            before["/".join(parts[:i])] = ["dir"]
    wants.append({"shared": expected_state(before)[0]})
    return trees, wants


def tree_checks(want, got):
    """The eight checks of one tree: name -> (ok, detail)."""
    first, after, before = got["first"], got["after"], want["before"]
    groups, expect = want["groups"], want["after"]
    results = {"runs": (first["rc"] == 0, f"exit status {first['rc']}: {first['stderr']}")}
    results["content"] = (all(got["content"].get(rel) == before[rel][1]
                              for rel in want["originals"]), "a file reads otherwise")
    regular = [e[1] for e in after.values() if e[0] == "file" and e[1] != EMPTY]
    results["unique"] = (len(regular) == len(set(regular)), "duplicates left")
    results["keepers"] = (bool(groups) and all(
        after.get(k, ["?"])[0] == "file" and all(after.get(m, ["?"])[0] == "link" for m in ms)
        for k, ms in groups), "a keeper is not a file, or a duplicate not a link")
    results["links"] = (all(after.get(m) == expect[m] for _, ms in groups for m in ms),
                        "a link's target is not the relative path to its keeper")
    dup_paths = {m for _, ms in groups for m in ms}
    results["untouched"] = (set(after) == set(before) and all(
        after[rel] == e for rel, e in before.items() if rel not in dup_paths),
        "something else changed")
    lines = first["stdout"].splitlines()
    results["report"] = (lines == want["report"],
                         f"first lines {lines[:3]} expected {want['report'][:3]}")
    second = got["second"]
    results["idempotent"] = (second["rc"] == 0 and second["stdout"] == ""
                             and got["again"] == after, "a second run changed or printed")
    return results


def check(ck, label, want, got, options):
    """A tree's eight checks, or /app/shared's one."""
    if "shared" in want:
        ok = isinstance(got, dict) and got.get("shared") == want["shared"]
        ck.check("/app/shared deduplicated", ok, "" if ok else "not as expected")
        return
    try:
        results = tree_checks(want, got)
    except (KeyError, TypeError, AttributeError, IndexError) as e:
        results = {name: (False, f"reported {str(got)[:100]} ({e!r})") for name in CHECKS}
    for name in CHECKS:
        ok, detail = results[name]
        ck.check(f"{label}: {name}", bool(ok), "" if ok else detail[-500:])
