"""Score /app/dedupe.py: 8 checks on each of two hidden trees plus the state of /app/shared.
Writes /logs/verifier/reward.json with the fraction of checks passed."""

import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile

REWARD = "/logs/verifier/reward.json"


def snapshot(root):
    """{relative path: ("file", sha256) | ("link", target) | ("dir",)} without following links."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                out[rel] = ("link", os.readlink(full))
            elif os.path.isdir(full):
                out[rel] = ("dir",)
            else:
                with open(full, "rb") as f:
                    out[rel] = ("file", hashlib.sha256(f.read()).hexdigest())
    return out


EMPTY = hashlib.sha256(b"").hexdigest()


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
        dup_groups.append((keeper, sorted(m for m in members if m != keeper)))
        for m in members:
            if m != keeper:
                after[m] = ("link", os.path.relpath(keeper, os.path.dirname(m) or "."))
                report.append(f"{m}\t{keeper}")
    return after, sorted(report), dup_groups


def write(root, rel, data):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def make_tree(root, rng, scale):
    blobs = [bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))) for _ in range(8 * scale)]
    blobs += [b"same size A" * 9, b"same size B" * 9, b"\x00" * 64, b"\x00" * 63 + b"\x01"]
    dirs = ["a", "a b", "a-b", "B", "a/deep/er/still", "photos/2024", "photos/2024 copy",
            "docs/été", "docs/日本", "x"]
    names = ["x.txt", "img 1.jpg", "notes.md", "data.bin", "é.txt", "Z.txt", "a.txt"]
    for i in range(30 * scale):
        rel = f"{rng.choice(dirs)}/{i % 5}-{rng.choice(names)}"
        write(root, rel, rng.choice(blobs))
    # keeper ordering traps: ' ' and '-' sort before '/', uppercase before lowercase
    for rel in ("a/trap.txt", "a b/trap.txt", "a-b/trap.txt", "B/trap.txt"):
        write(root, rel, b"ordering trap\n")
    big = os.urandom(1 << 21)
    write(root, "media/big.iso", big)
    write(root, "media/backup/big copy.iso", big)
    for rel in ("empty1", "a/empty2", "B/empty3"):
        write(root, rel, b"")
    # existing links: to a duplicate file, to a directory full of duplicates, dangling
    os.symlink("a/trap.txt", os.path.join(root, "link-to-trap"))
    os.symlink("../photos", os.path.join(root, "x", "photos-link"))
    os.symlink("nowhere/at/all", os.path.join(root, "dangling"))


def run(root):
    return subprocess.run([sys.executable, "-E", "-s", "/app/dedupe.py", root], cwd="/app", user=65534, group=65534, extra_groups=[],
                          capture_output=True, text=True, timeout=60)


def give_to_nobody(root):
    """The agent's code runs as nobody: it must own the tree it works on."""
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            os.lchown(os.path.join(here, name), 65534, 65534)
    os.lchown(root, 65534, 65534)


def check_tree(root, label):
    results = {}
    before = snapshot(root)
    want, want_report, dup_groups = expected_state(before)
    try:
        proc = run(root)
    except (subprocess.TimeoutExpired, OSError) as e:
        print(f"FAIL {label}: could not run dedupe.py: {e}")
        return {f"{label}_{k}": 0 for k in
                ("runs", "content", "unique", "keepers", "links", "untouched", "report",
                 "idempotent")}
    results["runs"] = proc.returncode == 0
    if proc.returncode != 0:
        print(f"FAIL {label}: exit status {proc.returncode}\n{proc.stderr[-1500:]}")
    after = snapshot(root)

    def content(rel):
        try:
            with open(os.path.join(root, rel), "rb") as f:
                return hashlib.sha256(f.read()).hexdigest()
        except OSError:
            return None

    results["content"] = all(content(rel) == e[1] for rel, e in before.items() if e[0] == "file")
    regular = [e[1] for e in after.values() if e[0] == "file" and e[1] != EMPTY]
    results["unique"] = len(regular) == len(set(regular))
    results["keepers"] = bool(dup_groups) and all(
        after.get(k, ("?",))[0] == "file" and all(after.get(m, ("?",))[0] == "link" for m in ms)
        for k, ms in dup_groups)
    results["links"] = all(after.get(m) == want[m] for _, ms in dup_groups for m in ms)
    dup_paths = {m for _, ms in dup_groups for m in ms}
    results["untouched"] = set(after) == set(before) and all(
        after[rel] == e for rel, e in before.items() if rel not in dup_paths)
    got_report = proc.stdout.splitlines()
    results["report"] = got_report == want_report
    if not results["report"]:
        print(f"  {label} report: first lines {got_report[:3]} expected {want_report[:3]}")
    try:
        again = run(root)
        results["idempotent"] = (again.returncode == 0 and again.stdout == ""
                                 and snapshot(root) == after)
    except (subprocess.TimeoutExpired, OSError):
        results["idempotent"] = False
    for k, v in results.items():
        print(f"{'ok  ' if v else 'FAIL'} {label}: {k}")
    return {f"{label}_{k}": int(bool(v)) for k, v in results.items()}


def check_workspace():
    with open("/tests/shared_manifest.json") as f:
        manifest = json.load(f)
    before = {rel: ("file", digest) for rel, digest in manifest.items()}
    for rel in manifest:  # the directories
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            before["/".join(parts[:i])] = ("dir",)
    want, _, _ = expected_state(before)
    ok = os.path.isdir("/app/shared") and snapshot("/app/shared") == want
    print(f"{'ok  ' if ok else 'FAIL'} /app/shared deduplicated")
    return {"workspace_deduplicated": int(ok)}


def main():
    checks = {}
    try:
        if not os.path.isfile("/app/dedupe.py"):
            print("FAIL: /app/dedupe.py does not exist")
        with tempfile.TemporaryDirectory() as d:
            os.chown(d, 65534, 65534)  # the agent's code runs as nobody
            for n, scale in ((1, 1), (2, 3)):
                root = os.path.join(d, f"tree{n}")
                os.mkdir(root)
                make_tree(root, random.Random(1000 + n), scale)
                give_to_nobody(root)
                checks.update(check_tree(root, f"tree{n}"))
        checks.update(check_workspace())
    except Exception as e:  # a verifier bug or an unexpected tree state: no credit for the rest
        print(f"FAIL: {type(e).__name__}: {e}")
    total = 17
    passed = sum(checks.values()) if os.path.isfile("/app/dedupe.py") else 0
    with open(REWARD, "w") as f:
        json.dump({"reward": round(passed / total, 4), "checks_passed": passed,
                   "checks_total": total}, f)
    print(f"{passed}/{total} checks passed")


if __name__ == "__main__":
    main()
