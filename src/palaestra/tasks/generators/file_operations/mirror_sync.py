"""mirror-sync: a one-way sync tool that makes DST an exact mirror of SRC, with an action log.

The agent writes ``/app/sync.py SRC DST``: copy new files, update changed ones (by content, not
size or time), delete what SRC no longer has (a whole extra folder as one action), leave
unchanged files alone (not even rewritten), and print the sorted action log. The checker
regenerates fresh SRC/DST pairs from the task's secret, runs the script as ``nobody`` and
compares the resulting DST tree, the log, SRC (untouched) and the unchanged files' inode and
mtime with its own reference.

Difficulty knobs: tree size and the amount of drift grow; medium adds ``--dry-run`` (print the
log, change nothing); hard adds a ``.syncignore`` in SRC (glob patterns by
name or by path; ignored paths are neither copied nor deleted) and type changes (a file in SRC
where DST has a folder).
"""

from __future__ import annotations

import textwrap

from palaestra.tasks.generators import family, python_test_sh, solve_sh_writing
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_DIRS = ["photos", "docs", "music", "projects", "notes", "backup", "work", "misc", "2024"]
_STEMS = ["index", "todo", "scan", "track", "draft", "plan", "cv", "budget", "readme", "log"]
_EXTS = ["txt", "md", "jpg", "mp3", "json", "tmp", "bak", "pdf"]

# The reference, shared verbatim by the solution and the checker (which embeds its own copy).
_REF = r"""
import fnmatch
import os
import shutil
import sys


def load_ignore(src, use_ignore):
    if not use_ignore:
        return []
    path = os.path.join(src, ".syncignore")
    if not os.path.isfile(path):
        return [".syncignore"]
    with open(path, encoding="utf-8") as f:
        pats = [l.strip() for l in f if l.strip() and not l.strip().startswith("#")]
    return pats + [".syncignore"]


def ignored(rel, pats):
    for pat in pats:
        if "/" in pat:
            if fnmatch.fnmatchcase(rel, pat):
                return True
        elif any(fnmatch.fnmatchcase(part, pat) for part in rel.split("/")):
            return True
    return False


def listing(root, pats):
    # rel -> "file" | "dir" for everything under root that is not ignored (pruned)
    out = {}
    for base, dirs, files in os.walk(root):
        keep = []
        for d in sorted(dirs):
            rel = os.path.relpath(os.path.join(base, d), root).replace(os.sep, "/")
            if not ignored(rel, pats):
                out[rel] = "dir"
                keep.append(d)
        dirs[:] = keep
        for name in files:
            rel = os.path.relpath(os.path.join(base, name), root).replace(os.sep, "/")
            if not ignored(rel, pats):
                out[rel] = "file"
    return out


def same(a, b):
    if os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def plan(src, dst, use_ignore):
    pats = load_ignore(src, use_ignore)
    s, d = listing(src, pats), listing(dst, pats) if os.path.isdir(dst) else {}
    actions = []
    gone = []  # folders deleted whole: nothing beneath them is listed again
    for rel in sorted(d):
        if any(rel.startswith(g + "/") for g in gone):
            continue
        if s.get(rel) != d[rel]:
            actions.append(("delete", rel + ("/" if d[rel] == "dir" else "")))
            if d[rel] == "dir":
                gone.append(rel)
    for rel in sorted(s):
        if s[rel] != "file":
            continue
        if d.get(rel) != "file" or any(rel.startswith(g + "/") for g in gone):
            actions.append(("copy", rel))
        elif not same(os.path.join(src, rel), os.path.join(dst, rel)):
            actions.append(("update", rel))
    return sorted(actions, key=lambda a: (a[1].rstrip("/"), a[0] != "delete"))


def apply(src, dst, actions):
    os.makedirs(dst, exist_ok=True)
    for verb, rel in actions:
        target = os.path.join(dst, rel.rstrip("/"))
        if verb == "delete":
            if rel.endswith("/"):
                shutil.rmtree(target)
            else:
                os.remove(target)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(os.path.join(src, rel), target)
    # folders of SRC that DST lacks (empty ones included)
    for rel, kind in listing(src, load_ignore(src, USE_IGNORE)).items():
        if kind == "dir":
            os.makedirs(os.path.join(dst, rel), exist_ok=True)


def main(argv):
    dry = "--dry-run" in argv
    src, dst = [a for a in argv if a != "--dry-run"]
    actions = plan(src, dst, USE_IGNORE)
    for verb, rel in actions:
        print(verb, rel)
    if not dry:
        apply(src, dst, actions)
"""


def _pair(rng, n_files, drift, tier):
    """A generated SRC/DST pair: {"src": {rel: text}, "dst": {rel: text}, "src_dirs": [...],
    "dst_dirs": [...]}. Holds new, changed (same-size edits from medium), deleted files, an
    extra folder with content, and at hard a .syncignore with name and path patterns whose
    matches exist on both sides, and a file in SRC where DST has a folder."""
    dirs = [""]
    for _ in range(max(2, n_files // 6)):
        parent = rng.choice(dirs)
        dirs.append((parent + "/" if parent else "") + rng.choice(_DIRS))

    def text():
        return "".join(
            "%s %d\n" % (rng.choice(_STEMS), rng.randrange(10**6))
            for _ in range(rng.randrange(1, 5))
        )

    src = {}
    while len(src) < n_files:
        folder = rng.choice(dirs)
        name = "%s_%d.%s" % (rng.choice(_STEMS), rng.randrange(100), rng.choice(_EXTS))
        src[(folder + "/" if folder else "") + name] = text()
    names = sorted(src)
    dst = dict(src)
    for rel in rng.sample(names, max(2, int(n_files * drift))):  # new in SRC
        del dst[rel]
    names = sorted(dst)
    for rel in rng.sample(names, max(2, int(n_files * drift))):  # changed
        body = dst[rel]
        if tier != "easy" and rng.random() < 0.6:  # same size, other bytes
            i = rng.randrange(len(body) - 1)
            dst[rel] = body[:i] + ("X" if body[i] != "X" else "Y") + body[i + 1 :]
        else:
            dst[rel] = body + "old line\n"
    body = dst[names[0]]  # at least one same-size edit
    dst[names[0]] = body[:-2] + ("Q" if body[-2] != "Q" else "R") + "\n"
    for i in range(max(2, int(n_files * drift))):  # extra files in DST
        folder = rng.choice(dirs)
        dst["%s%s_gone_%d.txt" % (folder + "/" if folder else "", rng.choice(_STEMS), i)] = text()
    extra = "old_%s_%d" % (rng.choice(_DIRS), rng.randrange(100))
    for i in range(3):
        dst["%s/%s/f%d.txt" % (extra, rng.choice(_DIRS), i)] = text()
    src_dirs = ["empty_in_src_%d" % rng.randrange(100)]
    dst_dirs = ["stale_empty_%d" % rng.randrange(100)]
    if tier == "hard":
        pats = ["*.tmp", "cache", "%s/*.bak" % rng.choice(dirs[1:])]
        src[".syncignore"] = "# not mirrored\n*.tmp\n\ncache\n%s\n" % pats[2]
        dst[".syncignore"] = "stale ignore file\n"
        for side in (src, dst):
            side["%s/cache/blob_%d.bin" % (rng.choice(_DIRS), rng.randrange(100))] = text()
            side["%s_%d.tmp" % (rng.choice(_STEMS), rng.randrange(1000))] = text()
            side[pats[2].replace("*", "keep_%d" % rng.randrange(100))] = text()
        dst["cache/only_in_dst.txt"] = text()
        clash = rng.choice(
            [n for n in sorted(src) if "/" in n and not n.endswith((".tmp", ".bak"))]
        )
        dst = {k: v for k, v in dst.items() if k != clash}
        dst[clash + "/inner.txt"] = text()
    return {"src": src, "dst": dst, "src_dirs": src_dirs, "dst_dirs": dst_dirs}


@family(
    "mirror-sync",
    category="file-operations",
    summary="One-way mirror tool: copy new/changed, delete extra, action log; dry-run, ignores",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    tier = spec.tier
    n_files = spec.iscale(15, 120)
    drift = spec.scale(0.1, 0.25)
    secret = rng.randrange(2**31)
    sample = _pair(rng, 10, 0.2, tier)

    rules = [
        "Every regular file of SRC ends up in DST at the same relative path with the same "
        "bytes; every folder of SRC exists in DST (empty ones too).",
        "Files and folders in DST that SRC does not have are deleted. A folder of DST that SRC "
        "does not have is removed whole, as **one** action.",
        "A file already in DST with identical bytes is left alone: not rewritten (keep its "
        "inode and modification time). Compare contents, not sizes or times.",
        "Print the action log to stdout, one line per action: `copy REL` (new in DST), "
        "`update REL` (exists, different bytes), `delete REL` for a file or `delete REL/` for a "
        "folder (trailing slash). REL is relative to SRC/DST, `/`-separated. Lines are sorted "
        "by REL (without the trailing slash, plain string order); for the same REL, `delete` "
        "comes first. Nothing beneath a deleted folder is listed.",
        "Never modify SRC.",
    ]
    if tier != "easy":
        rules.append(
            "`python3 /app/sync.py --dry-run SRC DST` (the flag may come anywhere) prints the "
            "same log and changes nothing."
        )
    if tier == "hard":
        rules += [
            "If SRC has a file `.syncignore`, each non-blank line not starting with `#` is a "
            "glob pattern (`fnmatch.fnmatchcase` rules). A pattern without `/` ignores every path "
            "with a component matching it (`*.tmp`, `cache`); a pattern with `/` is matched "
            "against the whole relative path. Ignored paths (and everything beneath an ignored "
            "folder) are neither copied, nor deleted, nor listed, on either side. `.syncignore` "
            "itself is always ignored.",
            "Where SRC has a file and DST a folder of the same name (or the reverse), delete the "
            "DST one first (`delete REL/`, then `copy REL`).",
        ]
    instruction = textwrap.dedent(
        """\
        # Mirror a folder

        Write `/app/sync.py`, run as `python3 /app/sync.py SRC DST`, that makes `DST` an exact
        mirror of `SRC` (create `DST` if missing):

        {rules}

        Example pair to try it on: `/app/example/src` and `/app/example/dst`. It will be run on
        other, bigger pairs. Only the Python standard library is available.
        """
    ).format(rules="\n".join(textwrap.fill("- " + r, 90, subsequent_indent="  ") for r in rules))

    workspace: dict[str, str] = {}
    for side in ("src", "dst"):
        for rel, body in sample[side].items():
            workspace[f"example/{side}/{rel}"] = body
        for d in sample[f"{side}_dirs"]:
            workspace[f"example/{side}/{d}/.gitkeep"] = ""
    workspace["sync.py"] = (
        '"""python3 sync.py SRC DST: mirror SRC into DST."""\n\nraise SystemExit("not implemented yet")\n'
    )

    head = f"USE_IGNORE = {tier == 'hard'!r}\n"
    main = "\n\nif __name__ == '__main__':\n    main(sys.argv[1:])\n"
    right = head + _REF + main
    wrong = {
        # decides "changed" by size only
        "size-only-compare": head
        + _REF.replace("        return fa.read() == fb.read()", "        return True")
        + main,
        # never deletes anything
        "no-delete": head
        + _REF.replace(
            '            if rel.endswith("/"):\n                shutil.rmtree(target)\n            else:\n                os.remove(target)',
            "            pass",
        ).replace(
            '            actions.append(("delete", rel + ("/" if d[rel] == "dir" else "")))',
            "            pass",
        )
        + main,
        # rewrites every file (the log is right, unchanged files get new mtimes)
        "rewrites-everything": head
        + _REF.replace(
            "            os.makedirs(os.path.join(dst, rel), exist_ok=True)",
            "            os.makedirs(os.path.join(dst, rel), exist_ok=True)\n"
            "        else:\n"
            "            os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)\n"
            "            shutil.copyfile(os.path.join(src, rel), os.path.join(dst, rel))",
        )
        + main,
        # lists every file inside an extra folder instead of one `delete dir/`
        "lists-folder-contents": head
        + _REF.replace("                gone.append(rel)\n", "                pass\n")
        .replace("shutil.rmtree(target)", "shutil.rmtree(target, ignore_errors=True)")
        .replace(
            "                os.remove(target)",
            "                if os.path.exists(target):\n                    os.remove(target)",
        )
        + main,
    }
    if tier != "easy":
        wrong["dry-run-writes"] = head + _REF.replace("    if not dry:\n", "    if True:\n") + main
    if tier == "hard":
        # ignore patterns protect SRC paths only: DST's ignored files get deleted
        wrong["deletes-ignored-in-dst"] = (
            head
            + _REF.replace(
                "s, d = listing(src, pats), listing(dst, pats) if",
                "s, d = listing(src, pats), listing(dst, ['.syncignore']) if",
            )
            + main
        )
        # matches every pattern against names only
        wrong["patterns-by-name-only"] = (
            head
            + _REF.replace(
                '        if "/" in pat:\n            if fnmatch.fnmatchcase(rel, pat):\n                return True\n        elif',
                "        if",
            )
            + main
        )
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests={
            "test.sh": python_test_sh(timeout=200),
            "test_hidden.py": _hidden(tier, n_files, drift, secret),
        },
        solution={"solve.sh": solve_sh_writing({"sync.py": right}, note="plan, log, apply")},
        wrong_solutions={
            n: {"solve.sh": solve_sh_writing({"sync.py": src}, note=f"wrong: {n}")}
            for n, src in wrong.items()
        },
        tags=("python", "filesystem", "sync"),
        verifier_timeout_sec=240.0,
    )


def _hidden(tier: str, n_files: int, drift: float, secret: int) -> str:
    import inspect

    return (
        '"""Hidden test for sync.py: fresh SRC/DST pairs from a secret, run as nobody."""\n'
        + f"USE_IGNORE = {tier == 'hard'!r}\n"
        + _REF
        + "\nimport random\n\nfrom palaestra_check import (Checker, copy_tree_for_child, make_private_dir,\n"
        + "                              read_regular_bytes, run_command)\n"
        + f"_DIRS, _STEMS, _EXTS = {(_DIRS, _STEMS, _EXTS)!r}\n"
        + f"TIER, SECRET = {tier!r}, {secret}\n\n"
        + inspect.getsource(_pair)
        + textwrap.dedent(
            f"""

            OLD = 1_000_000_000  # the mtime every DST file starts with


            def build(root, files, dirs):
                os.makedirs(root, exist_ok=True)
                for rel, body in files.items():
                    path = os.path.join(root, rel)
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    with open(path, "w") as f:
                        f.write(body)
                    os.utime(path, (OLD, OLD))
                for d in dirs:
                    os.makedirs(os.path.join(root, d), exist_ok=True)


            def snapshot(root):
                # never through a link, never blocked by a FIFO: a link is its target's name
                out = {{}}
                for base, dirs, files in os.walk(root):
                    for name in dirs + files:
                        path = os.path.join(base, name)
                        rel = os.path.relpath(path, root)
                        if os.path.islink(path):
                            out[rel] = ("link", os.readlink(path))
                        elif name in dirs:
                            out[rel + "/"] = "dir"
                        else:
                            out[rel] = read_regular_bytes(path, 16 << 20)
                return out


            def stamps(root):
                out = {{}}
                for base, _, files in os.walk(root):
                    for name in files:
                        st = os.lstat(os.path.join(base, name))
                        out[os.path.relpath(os.path.join(base, name), root)] = (st.st_ino, st.st_mtime)
                return out


            ck = Checker()
            rng = random.Random(SECRET)
            trials = [({n_files}, {drift}, False), (max(8, {n_files} // 3), 0.3, False)]
            if TIER != "easy":
                trials.append((max(8, {n_files} // 2), 0.2, True))
            expected = []  # every expected value before any agent code runs, on root's trees
            for n, drift, dry in trials:
                pair = _pair(rng, n, drift, TIER)
                trees = []
                for _ in range(2):  # the agent's copy is made from the first; the second is the reference's
                    base = os.path.join(make_private_dir("pair-"), "pair")
                    build(os.path.join(base, "src"), pair["src"], pair["src_dirs"])
                    build(os.path.join(base, "dst dir"), pair["dst"], pair["dst_dirs"])
                    trees.append(base)
                base, ref = trees
                actions = plan(os.path.join(ref, "src"), os.path.join(ref, "dst dir"), USE_IGNORE)
                if not dry:
                    apply(os.path.join(ref, "src"), os.path.join(ref, "dst dir"), actions)
                expected.append((base, actions, snapshot(os.path.join(ref, "dst dir"))))
            for trial, ((n, drift, dry), (base, actions, want)) in enumerate(zip(trials, expected)):
                want_log = ["%s %s" % a for a in actions]
                work = copy_tree_for_child(base)
                src, dst = os.path.join(work, "src"), os.path.join(work, "dst dir")
                src_before, dst_before = snapshot(src), stamps(dst)
                argv = ["python3", "/app/sync.py", src, dst]
                if dry:
                    argv.insert(2, "--dry-run")
                res = run_command(argv, cwd="/tmp", timeout=60, cpu_seconds=10)
                ck.check(f"trial {{trial}}: sync.py exits 0", res.ok, res.error)
                ck.equal(f"trial {{trial}}: action log", res.stdout.splitlines(), want_log)
                got = snapshot(dst)
                ck.check(f"trial {{trial}}: DST is the mirror" + (" (dry run: unchanged)" if dry else ""),
                         got == want,
                         sorted(k for k in set(got) ^ set(want))[:5]
                         or sorted(k for k in got if got[k] != want[k])[:5])
                ck.check(f"trial {{trial}}: SRC untouched", snapshot(src) == src_before)
                touched = {{a[1] for a in actions}}
                after = stamps(dst)
                rewritten = sorted(r for r, s in dst_before.items()
                                   if r not in touched and r in after and after[r] != s)
                ck.check(f"trial {{trial}}: unchanged files not rewritten", not rewritten, rewritten[:5])
            ck.finish()
            """
        )
    )
