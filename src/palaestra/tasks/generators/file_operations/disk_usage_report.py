"""disk-usage-report: a script that summarises a directory tree as JSON (a small ``du``).

The agent writes ``/app/du.py ROOT``, printing one JSON object: file and byte totals, bytes per
top-level folder, a per-extension breakdown and the K largest files. The hidden test is data
(``harness_spec``): two fresh trees drawn from the task's secret (with hard links and symbolic
links at hard) and the reference's summary of each, made at generation time; the checker runs
the script on them as ``nobody`` and compares the parsed JSON key by key.

Difficulty knobs: tree size and depth grow; easy reports totals, extensions and the largest
files (ties by path); medium adds bytes per top-level folder and the list of folders holding no
file at any depth; hard counts a file with several hard links once (under its first path in
sorted order, the others listed under ``hardlinks``) and does not follow symbolic links (counted
apart, never sized), with K growing.
"""

from __future__ import annotations

import json
import os
import random
import textwrap

from palaestra.tasks import outcomes
from palaestra.tasks.generators import family, solve_sh_writing
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_DIRS = ["src", "assets", "logs", "data", "build", "docs", "cache", "vendor", "tmp", "media"]
_STEMS = ["index", "main", "report", "photo", "dump", "notes", "backup", "app", "core", "blob"]
_EXTS = ["txt", "log", "json", "png", "bin", "csv", "py", "gz", "Log", "PNG", ""]

# The reference: the solution, and the expected summaries made at generation time.
_REF = r"""
import json
import os
import sys


def ext_of(name):
    return name.rsplit(".", 1)[1].lower() if "." in name[1:] else ""


def summarise(root, top, tier):
    files, links, seen, hardlinks, empty = [], 0, {}, [], []
    for base, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names + [d for d in dirs if os.path.islink(os.path.join(base, d))]):
            path = os.path.join(base, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                links += 1
                continue
            st = os.stat(path)
            files.append((rel, st.st_size, (st.st_dev, st.st_ino)))
    files.sort()
    counted = []
    for rel, size, key in files:
        if tier == "hard" and key in seen:
            hardlinks.append([rel, seen[key]])
            continue
        seen[key] = rel
        counted.append((rel, size))
    out = {"files": len(counted), "bytes": sum(s for _, s in counted)}
    by_ext = {}
    for rel, size in counted:
        e = by_ext.setdefault(ext_of(os.path.basename(rel)), {"files": 0, "bytes": 0})
        e["files"] += 1
        e["bytes"] += size
    out["by_ext"] = by_ext
    ranked = sorted(counted, key=lambda f: (-f[1], f[0]))
    out["largest"] = [[rel, size] for rel, size in ranked[:top]]
    if tier != "easy":
        dirs = {}
        for rel, size in counted:
            head = rel.split(os.sep, 1)[0] if os.sep in rel else "."
            dirs[head] = dirs.get(head, 0) + size
        for name in os.listdir(root):
            p = os.path.join(root, name)
            if os.path.isdir(p) and not os.path.islink(p):
                dirs.setdefault(name, 0)
        out["dirs"] = dirs
        holding = set()
        for rel, _, _ in files:
            parts = rel.split(os.sep)[:-1]
            for i in range(1, len(parts) + 1):
                holding.add(os.sep.join(parts[:i]))
        for base, dirs_, _ in os.walk(root):
            for d in dirs_:
                p = os.path.join(base, d)
                r = os.path.relpath(p, root)
                if not os.path.islink(p) and r not in holding:
                    empty.append(r)
        out["empty_dirs"] = sorted(empty)
    if tier == "hard":
        out["hardlinks"] = sorted(hardlinks)
        out["symlinks"] = links
    return out
"""


def _tree(rng, n_files, depth, hard):
    """A generated tree: files {rel: size}, extra hard links {rel: existing rel}, symlinks
    {rel: target}, empty dirs. Always holds equal sizes among the largest (ties), upper-case
    extensions and, at hard, hard links and symlinks (one to a big file, one to a folder)."""
    dirs = [""]
    for _ in range(depth):
        parent = rng.choice(dirs)
        dirs.append((parent + "/" if parent else "") + rng.choice(_DIRS))
    files = {}
    while len(files) < n_files:
        folder = rng.choice(dirs)
        ext = rng.choice(_EXTS)
        name = rng.choice(_STEMS) + "_%d" % rng.randrange(1000) + ("." + ext if ext else "")
        if rng.random() < 0.08:
            name = "." + rng.choice(_STEMS)
        files[(folder + "/" if folder else "") + name] = rng.choice(
            [0, rng.randrange(1, 200), rng.randrange(200, 5000), rng.randrange(5000, 20000)]
        )
    names = sorted(files)
    big = max(files.values()) + rng.randrange(1, 500)
    for rel in rng.sample(names, 3):  # a three-way tie at the very top
        files[rel] = big
    files["%s/Upper_%d.TXT" % (rng.choice(_DIRS), rng.randrange(100))] = rng.randrange(10, 900)
    empty = ["%s/empty_%d" % (rng.choice(dirs) or "top", i) for i in range(2)]
    empty.append(rng.choice(_DIRS) + "_empty/nested")
    hardlinks, links = {}, {}
    if hard:
        names = sorted(files)
        for i in range(max(2, n_files // 10)):
            target = names[rng.randrange(len(names))] if i else max(names, key=files.get)
            hardlinks["%s/zz_link_%d.bin" % (rng.choice(_DIRS), i)] = target
            hardlinks["aa_first_%d.bin" % i] = target
        links["huge-shortcut"] = max(sorted(files), key=files.get)
        links["folder-link"] = rng.choice(dirs[1:])
        links[rng.choice(_DIRS) + "/dangling"] = "does/not/exist"
    return {"files": files, "hardlinks": hardlinks, "links": links, "empty": sorted(empty)}


def _content(rel: str, size: int) -> bytes:
    seed = sum(rel.encode())
    return bytes((seed + i * 7) % 251 for i in range(size))


@family(
    "disk-usage-report",
    category="file-operations",
    summary="Script that summarises a tree as JSON: totals, extensions, largest; hard links (hard)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    tier = spec.tier
    hard = tier == "hard"
    top = spec.iscale(3, 12)
    n_files = spec.iscale(20, 150)
    depth = spec.iscale(2, 9)
    secret = rng.randrange(2**31)
    sample = _tree(rng, spec.iscale(8, 18), 3, False)

    fields = [
        '- `"files"`: the number of regular files; `"bytes"`: the sum of their sizes '
        "(`st_size`, apparent size in bytes).",
        '- `"by_ext"`: an object from extension to `{"files": n, "bytes": b}`. The extension is '
        "the text after the last dot of the file name, in lower case; a name with no dot, or "
        'whose only dot is its first character (`.env`), has the extension `""`.',
        f'- `"largest"`: the {top} largest files as `[path, size]` pairs (path relative to ROOT, '
        "`/`-separated), biggest first; equal sizes in ascending order of path (plain string "
        "order). Fewer when the tree has fewer files.",
    ]
    if tier != "easy":
        fields += [
            '- `"dirs"`: an object from each top-level entry of ROOT that is a folder to the '
            'bytes of all files under it (at any depth; `0` if none), plus `"."` for the files '
            "directly in ROOT (only when there are any).",
            '- `"empty_dirs"`: the sorted relative paths of every folder (at any depth) with no '
            "file anywhere beneath it.",
        ]
    if hard:
        fields += [
            "- Hard links: a file with several names (same device and inode) is counted once, "
            "under its first path in sorted order, everywhere (totals, extensions, largest, "
            'dirs). `"hardlinks"`: the sorted list of `[other_path, counted_path]` pairs for the '
            "names not counted.",
            "- Symbolic links (to files or folders, dangling or not) are never followed, sized "
            'or counted as files; `"symlinks"` is how many there are. A folder holding only '
            "symbolic links counts as empty.",
        ]
    instruction = textwrap.dedent(
        """\
        # Where did the disk go?

        Write `/app/du.py`, run as `python3 /app/du.py ROOT`, that walks the folder `ROOT`
        recursively and prints **one JSON object** to stdout with these keys (and no others):

        {fields}

        The output is compared as JSON (key order and whitespace do not matter). Do not modify
        anything under ROOT. There is a small example tree in `/app/sample_tree/`; the script
        will be run on other, bigger trees. Only the Python standard library is available.
        """
    ).format(fields="\n".join(textwrap.fill(f, 90, subsequent_indent="  ") for f in fields))

    workspace: dict[str, str | bytes] = {
        f"sample_tree/{rel}": _content(rel, size) for rel, size in sample["files"].items()
    }
    for d in sample["empty"]:
        workspace[f"sample_tree/{d}/.keep"] = b""  # the workspace cannot hold empty folders
    workspace["du.py"] = (
        '"""python3 du.py ROOT: a JSON disk-usage summary."""\n\nraise SystemExit("not implemented yet")\n'
    )

    main = f"\n\nif __name__ == '__main__':\n    print(json.dumps(summarise(sys.argv[1], {top}, {tier!r})))\n"
    right = _REF + main
    wrong = {
        # ties among the largest come out in reverse path order
        "ties-reversed": _REF.replace(
            "key=lambda f: (-f[1], f[0])", "key=lambda f: (f[1], f[0]), reverse=True"
        )
        + main,
        # keeps the extension's case (PNG and png apart)
        "case-sensitive-ext": _REF.replace('.rsplit(".", 1)[1].lower()', '.rsplit(".", 1)[1]')
        + main,
        # one file short in "largest"
        "largest-off-by-one": _REF.replace("ranked[:top]", "ranked[: top - 1]") + main,
        "sample-only": _hardcoded(sample, top, tier),
    }
    if tier != "easy":
        # only counts files directly inside each top-level folder
        wrong["dirs-by-parent"] = (
            _REF.replace(
                'head = rel.split(os.sep, 1)[0] if os.sep in rel else "."',
                'head = os.path.dirname(rel) or "."',
            )
            + main
        )
    if hard:
        wrong["counts-hardlinks-twice"] = (
            _REF.replace('if tier == "hard" and key in seen:', "if False:") + main
        )
        wrong["follows-symlinks"] = (
            _REF.replace(
                "            if os.path.islink(path):\n                links += 1\n                continue\n",
                "            if os.path.islink(path):\n                links += 1\n                if not os.path.isfile(path):\n                    continue\n",
            )
            + main
        )
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=_tests(tier, top, n_files, depth, secret),
        solution={"solve.sh": solve_sh_writing({"du.py": right}, note="os.walk, inode set, sort")},
        wrong_solutions={
            n: {"solve.sh": solve_sh_writing({"du.py": src}, note=f"wrong: {n}")}
            for n, src in wrong.items()
        },
        tags=("python", "filesystem", "json"),
        reward_outcomes=outcomes.GRADED + outcomes.IO,
        verifier_timeout_sec=240.0,
    )


def _build(root: str, tree: dict) -> None:
    """Makes ``tree`` (see :func:`_tree`) under ``root``, as the checker's case directory."""
    case = _case(tree)
    for rel, data in case.files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    for rel in case.tree["dirs"]:
        os.makedirs(os.path.join(root, rel), exist_ok=True)
    for rel, target in case.tree["hardlinks"].items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        os.link(os.path.join(root, target), os.path.join(root, rel))
    for rel, target in case.tree["symlinks"].items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        os.symlink(target, os.path.join(root, rel))


_ROOT = "disk root"  # a space in ROOT, as a user's folder may have


def _case(tree: dict, label: str = "", want: object = None) -> hs.Case:
    """The hidden test's case of a tree: its files, links and empty folders under ``_ROOT``."""
    under = {
        "dirs": [f"{_ROOT}/{d}" for d in tree["empty"]],
        "hardlinks": {f"{_ROOT}/{r}": f"{_ROOT}/{t}" for r, t in tree["hardlinks"].items()},
        "symlinks": {f"{_ROOT}/{r}": t for r, t in tree["links"].items()},
    }
    files = {f"{_ROOT}/{rel}": _content(rel, size) for rel, size in tree["files"].items()}
    return hs.Case(label, want=want, files=files, tree=under)


def _summary(tree: dict, top: int, tier: str) -> dict:
    """The reference's summary of ``tree``, run now on a copy of it."""
    import tempfile

    ns: dict = {}
    exec(_REF, ns)  # noqa: S102 - our own reference
    with tempfile.TemporaryDirectory() as tmp:
        _build(tmp, tree)
        return ns["summarise"](os.path.join(tmp, _ROOT), top, tier)


def _hardcoded(sample: dict, top: int, tier: str) -> str:
    """Prints the reference's summary of the sample tree, whatever ROOT holds."""
    answer = _summary(sample, top, tier)
    return (
        f"import json\n\nANSWER = json.loads({json.dumps(answer)!r})\nprint(json.dumps(ANSWER))\n"
    )


def _tests(tier: str, top: int, n_files: int, depth: int, secret: int) -> dict[str, str | bytes]:
    """The hidden test, as data: two fresh trees drawn from the secret (links at hard) and
    the reference's summary of each, fixed now; du.py runs on them as nobody, one check a
    key of its JSON after one of the key set."""
    rng = random.Random(secret)
    cases = []
    for trial, (n, d) in enumerate([(n_files, depth), (max(8, n_files // 3), 2)]):
        tree = _tree(rng, n, d, tier == "hard")
        cases.append(_case(tree, f"trial {trial}", _summary(tree, top, tier)))
    return hs.tests(
        answer=hs.program(["python3", "{app}/du.py", "{in}/" + _ROOT], compile=["/app/du.py"]),
        cases=cases,
        compare=hs.compare(
            "json_keys",
            tol=0,
            parse_label="{label}: du.py prints JSON",
            object_label="{label}: a JSON object",
            keys_label="{label}: the same keys",
            key_label="{label}: {key}",
        ),
        limits=hs.limits(timeout=60, cpu=10),
        kind="io",
        timeout=200,
    )
