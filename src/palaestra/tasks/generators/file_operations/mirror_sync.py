"""mirror-sync: a one-way sync tool that makes DST an exact mirror of SRC, with an action log.

The agent writes ``/app/sync.py SRC DST``: copy new files, update changed ones (by content, not
size or time), delete what SRC no longer has (a whole extra folder as one action), leave
unchanged files alone (not even rewritten), and print the sorted action log. The hidden test
is data (``harness_spec``): fresh SRC/DST pairs drawn from the task's secret at generation
time, with the reference's log and DST tree; the checker runs the script as ``nobody`` and
compares the log, the resulting DST tree, SRC (untouched) and the unchanged files' inode and
mtime.

Difficulty knobs: tree size and the amount of drift grow; medium adds ``--dry-run`` (print the
log, change nothing); hard adds a ``.syncignore`` in SRC (glob patterns by
name or by path; ignored paths are neither copied nor deleted) and type changes (a file in SRC
where DST has a folder).
"""

from __future__ import annotations

import os
import random
import textwrap

from palaestra.tasks.generators import family, solve_sh_writing
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_DIRS = ["photos", "docs", "music", "projects", "notes", "backup", "work", "misc", "2024"]
_STEMS = ["index", "todo", "scan", "track", "draft", "plan", "cv", "budget", "readme", "log"]
_EXTS = ["txt", "md", "jpg", "mp3", "json", "tmp", "bak", "pdf"]

# The reference: the solution, and the expected logs and trees made at generation time.
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
        tests=_tests(tier, n_files, drift, secret),
        solution={"solve.sh": solve_sh_writing({"sync.py": right}, note="plan, log, apply")},
        wrong_solutions={
            n: {"solve.sh": solve_sh_writing({"sync.py": src}, note=f"wrong: {n}")}
            for n, src in wrong.items()
        },
        tags=("python", "filesystem", "sync"),
        verifier_timeout_sec=240.0,
    )


_SRC, _DST = "src", "dst dir"  # a space in DST


def _trial(rng, n: int, drift: float, dry: bool, tier: str, label: str) -> hs.Case:
    """A fresh SRC/DST pair and, made now, the reference's log, DST afterwards, and the DST
    files it leaves alone."""
    import tempfile

    pair = _pair(rng, n, drift, tier)
    files = {f"{_SRC}/{rel}": body for rel, body in pair["src"].items()}
    files.update({f"{_DST}/{rel}": body for rel, body in pair["dst"].items()})
    dirs = [f"{_SRC}/{d}" for d in pair["src_dirs"]] + [f"{_DST}/{d}" for d in pair["dst_dirs"]]
    ns: dict = {"USE_IGNORE": tier == "hard"}
    exec(_REF, ns)  # noqa: S102 - our own reference
    with tempfile.TemporaryDirectory() as tmp:
        for rel, body in files.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            with open(os.path.join(tmp, rel), "w") as f:
                f.write(body)
        for d in dirs:
            os.makedirs(os.path.join(tmp, d), exist_ok=True)
        src, dst = os.path.join(tmp, _SRC), os.path.join(tmp, _DST)
        before = hs.tree_of(src)
        actions = ns["plan"](src, dst, ns["USE_IGNORE"])
        if not dry:
            ns["apply"](src, dst, actions)
        after = hs.tree_of(dst)
    touched = {rel for _, rel in actions}
    kept = sorted(r for r in pair["dst"] if r not in touched and after.get(r, [""])[0] == "file")
    return hs.Case(
        label,
        want=[
            {"lines": ["%s %s" % a for a in actions]},
            {"trees": {_DST: after, _SRC: before}},
            {"kept": {_DST: kept}},
        ],
        files=files,
        tree={"dirs": dirs},
    )


def _tests(tier: str, n_files: int, drift: float, secret: int) -> dict[str, str | bytes]:
    """The hidden test, as data: fresh SRC/DST pairs drawn from the secret, the reference's
    log and DST afterwards fixed now; sync.py runs on each as nobody (both trees its own), and
    its log, DST and SRC whole, and the DST files it should leave alone are compared."""
    rng = random.Random(secret)
    trials = [(n_files, drift, False), (max(8, n_files // 3), 0.3, False)]
    if tier != "easy":
        trials.append((max(8, n_files // 2), 0.2, True))
    cases = [_trial(rng, n, d, dry, tier, f"trial {t}") for t, (n, d, dry) in enumerate(trials)]
    compare = hs.compare(
        "each",
        of=[
            hs.compare("lines", what="action log line", label="{label}: action log"),
            hs.compare("tree", tree_label="{label}: {name} as expected"),
            hs.compare("kept", kept_label="{label}: unchanged files not rewritten"),
        ],
    )
    limits = hs.limits(timeout=60, cpu=10)

    def program(*flags: str) -> dict:
        argv = ["python3", "{app}/sync.py", *flags, "{in}/" + _SRC, "{in}/" + _DST]
        return hs.program(argv, writable=True, trees=[_DST, _SRC], kept=[_DST])

    dry = [hs.part(answer=program("--dry-run"), cases=cases[2:], compare=compare, limits=limits)]
    return hs.tests(
        answer=program(),
        cases=cases[:2],
        compare=compare,
        limits=limits,
        also=dry if cases[2:] else (),
        timeout=200,
    )
