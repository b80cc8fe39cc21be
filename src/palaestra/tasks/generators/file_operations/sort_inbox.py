"""sort-inbox: a script that files a messy drop folder into a clean tree.

The agent writes ``/app/organize.py SRC DEST``. The hidden test is data (``harness_spec``): fresh,
different inboxes drawn from the task's secret with the reference's DEST for each, made at
generation time; the checker runs the script on them as ``nobody`` and compares the whole
DEST tree (paths, folders and bytes, never through a link), and checks SRC was left untouched.

Difficulty knobs: easy files by extension with collision suffixes; medium files by the date in
each file's header (``undated/`` otherwise), deeper inboxes; hard also deduplicates identical
content (first by path wins, the rest listed in ``duplicates.csv``), skips symlinks, and has names
with spaces and non-ASCII letters. Inbox size grows with difficulty.
"""

from __future__ import annotations

import json
import os
import random
import textwrap

from palaestra.tasks.generators import attacks, family, solve_sh_writing
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_STEMS = ["report", "notes", "invoice", "scan", "draft", "summary", "minutes", "budget",
          "plan", "photo", "receipt", "memo", "export", "backup", "letter"]  # fmt: skip
_EXTS = ["txt", "log", "csv", "md", "json", "pdf"]
_DIRS = ["inbox", "old", "misc", "from-phone", "downloads", "team", "archive", "tmp stuff"]
_FANCY = ["résumé", "café menu", "naïve plan", "straße", "déjà vu"]

# The reference rules: the solution, and the expected DEST trees made at generation time.
_RULES = r"""
import csv
import hashlib
import os
import re
import shutil
import sys

DATE = re.compile(rb"^date: (\d{4})-(\d{2})-(\d{2})\s*$")


def sources(src):
    found = []
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for name in files:
            path = os.path.join(root, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            found.append(os.path.relpath(path, src))
    return sorted(found)


def bucket(rel, data, mode):
    name = os.path.basename(rel)
    if mode == "ext":
        ext = name.rsplit(".", 1)[1].lower() if "." in name[1:] else "no_ext"
        return ext
    first = data.split(b"\n", 1)[0]
    m = DATE.match(first)
    return f"{m.group(1).decode()}/{m.group(2).decode()}" if m else "undated"


def plan(src, mode, dedupe):
    placed, used, dupes, seen = {}, set(), [], {}
    for rel in sources(src):
        with open(os.path.join(src, rel), "rb") as f:
            data = f.read()
        if dedupe:
            digest = hashlib.sha256(data).hexdigest()
            if digest in seen:
                dupes.append((rel, seen[digest]))
                continue
            seen[digest] = rel
        folder = bucket(rel, data, mode)
        name = os.path.basename(rel)
        stem, dot, ext = name.rpartition(".") if "." in name[1:] else (name, "", "")
        target, n = f"{folder}/{name}", 0
        while target in used:
            n += 1
            target = f"{folder}/{stem}-{n}{dot}{ext}"
        used.add(target)
        placed[target] = rel
    return placed, dupes


def organize(src, dest, mode, dedupe):
    placed, dupes = plan(src, mode, dedupe)
    for target, rel in placed.items():
        os.makedirs(os.path.dirname(os.path.join(dest, target)), exist_ok=True)
        shutil.copyfile(os.path.join(src, rel), os.path.join(dest, target))
    if dedupe:
        os.makedirs(dest, exist_ok=True)
        with open(os.path.join(dest, "duplicates.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["duplicate", "original"])
            w.writerows(dupes)
"""


def _inbox(rng, n_files, depth, mode, hard):
    """A generated inbox: {relative path: content} plus symlinks {path: target}. It always holds
    name collisions, an upper-case extension, (date mode) a date that is not on the first line,
    and (hard) exact duplicates and symlinks: the cases the rules are about."""
    files, links = {}, {}
    dirs = [""] + [rng.choice(_DIRS) for _ in range(depth)]
    dirs += [rng.choice(_DIRS) + "/" + rng.choice(_DIRS) for _ in range(depth // 2)]
    stems = _STEMS + (_FANCY if hard else [])

    def body():
        header = ""
        roll = rng.random()
        if mode == "date" and roll < 0.7:
            header = "date: %d-%02d-%02d\n" % (
                rng.randrange(2019, 2026),
                rng.randrange(1, 13),
                rng.randrange(1, 29),
            )
        elif mode == "date" and roll < 0.85:  # a title first: the date does not count
            header = "Notes\ndate: %d-01-01\n" % rng.randrange(2019, 2026)
        elif roll < 0.9:
            header = "date: someday\n"
        lines = "".join(
            "%s line %d\n" % (rng.choice(_STEMS), rng.randrange(10**6))
            for _ in range(rng.randrange(1, 6))
        )
        return header + lines

    def name():
        stem = rng.choice(stems) + ("" if rng.random() < 0.5 else "_%d" % rng.randrange(100))
        ext = rng.choice(_EXTS + [""])
        return stem + "." + ext if ext else stem

    while len(files) < n_files:
        folder = rng.choice(dirs)
        rel = (folder + "/" if folder else "") + name()
        files.setdefault(rel, body())
    names = sorted(files)
    for _ in range(max(2, n_files // 6)):  # the same name in two folders, and the same bucket:
        rel = names[rng.randrange(len(names))]  # (the original's first line, so its date too)
        base = rel.rsplit("/", 1)[-1]
        folder = rng.choice([d for d in dirs if not rel.startswith(d + "/")] or ["extra"])
        first = files[rel].split("\n", 1)[0]
        files.setdefault((folder + "/" if folder else "") + base, first + "\n" + body())
    files[f"{rng.choice(_DIRS)}/{rng.choice(_STEMS)}.TXT"] = body()
    if hard:
        names = sorted(files)
        for i in range(max(2, n_files // 8)):  # exact duplicates under other names
            original = names[rng.randrange(len(names))]
            files["%s/copy of %s_%d" % (rng.choice(_DIRS), rng.choice(_STEMS), i)] = files[original]
        names = sorted(files)
        for i in range(3):
            links["link-%d.txt" % i] = names[rng.randrange(len(names))]
    return {"files": files, "links": links}


@family(
    "sort-inbox",
    category="file-operations",
    summary="Script that files a messy drop folder by type or header date; dedupes (hard)",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    mode = "ext" if spec.tier == "easy" else "date"
    dedupe = spec.tier == "hard"
    n_files = spec.iscale(15, 160)
    depth = spec.iscale(2, 7)
    sample = _inbox(rng, spec.iscale(8, 20), 2, mode, dedupe)
    secret = rng.randrange(2**31)

    if mode == "ext":
        rule = (
            "Copy every regular file to `DEST/<ext>/<name>`, where `<ext>` is the file name's "
            "extension in lower case (the text after the last dot; a name with no dot, or whose "
            "only dot is its first character, goes to `DEST/no_ext/`)."
        )
    else:
        rule = (
            "Copy every regular file to `DEST/<YYYY>/<MM>/<name>` using the date on the file's "
            "**first line**, which reads exactly `date: YYYY-MM-DD` (trailing whitespace "
            "allowed). A file whose first line is anything else goes to `DEST/undated/<name>`."
        )
    extra = ""
    if dedupe:
        extra = textwrap.dedent(
            """
            - Files with byte-identical content are copied **once**: the one whose path
              (relative to SRC) sorts first, as a Python string, is kept; every other copy is
              skipped and listed in `DEST/duplicates.csv` with the header `duplicate,original`
              and one row per skipped file (`duplicate` its relative path, `original` the kept
              file's), in sorted order of `duplicate`. Write the file even when it has no rows.
            - Symbolic links are ignored (neither followed nor copied). Names may contain
              spaces and non-ASCII letters.
            """
        )
    instruction = textwrap.dedent(
        """\
        # File the inbox

        Our shared drop folder is a mess. Write a script `/app/organize.py` that we run as
        `python3 /app/organize.py SRC DEST` to file everything under `SRC` (recursively) into a
        clean tree under `DEST`.

        - {rule}
        - If two files would land on the same path, process files in sorted order of their path
          relative to `SRC` (plain Python string order): the first keeps its name, the next
          ones get `-1`, `-2`, ... inserted before the extension (`notes.txt`, `notes-1.txt`,
          `notes-2.txt`; `README`, `README-1`). Suffixes count per target folder.
        - Copy bytes exactly; create folders as needed. Never modify or delete anything in
          `SRC`. Create `DEST` if it does not exist; nothing else may appear in it.{extra}

        There is a small example inbox in `/app/sample_inbox/` to try the script on; it will be
        run on other inboxes, bigger and different. Only the standard library is available.
        """
    ).format(rule=textwrap.fill(rule, 90, subsequent_indent="  "), extra=extra.rstrip())
    workspace: dict[str, str] = {
        f"sample_inbox/{rel}": body for rel, body in sample["files"].items()
    }
    workspace["organize.py"] = (
        '"""File the inbox: python3 organize.py SRC DEST."""\n\nraise SystemExit("not implemented yet")\n'
    )
    main = f"\n\nif __name__ == '__main__':\n    organize(sys.argv[1], sys.argv[2], {mode!r}, {dedupe!r})\n"
    right = _RULES + main

    plant = (
        "\n\nif __name__ == '__main__':\n"
        f"    organize(sys.argv[1], sys.argv[2], {mode!r}, {dedupe!r})\n"
        "    found = sorted(os.path.join(b, n) for b, _, fs in os.walk(sys.argv[2]) for n in fs)\n"
        "    for i, path in enumerate(found[:2]):\n"
        "        _plant(path, i == 0)\n"
    )
    wrong = {
        # an attack (issue 29): the right files, but the first a FIFO, the next a link to /tests
        "fifo-and-link-in-dest": _RULES + attacks.PLANT_IN_OUTPUT + plant,
        # later files overwrite earlier ones instead of getting suffixes
        "overwrites-collisions": _RULES.replace(
            "        while target in used:\n", "        while False:\n"
        )
        + main,
        # numbers suffixes from 0 (notes-0.txt) instead of 1
        "suffix-off-by-one": _RULES.replace(
            'target, n = f"{folder}/{name}", 0', 'target, n = f"{folder}/{name}", -1'
        )
        + main,
        # hard-coded: copies the listing it would produce for the sample inbox only
        "sample-only": _hardcoded(sample, mode, dedupe),
    }
    if mode == "ext":  # keeps the extension's case (TXT and txt end up apart)
        wrong["case-sensitive-ext"] = (
            _RULES.replace('.rsplit(".", 1)[1].lower()', '.rsplit(".", 1)[1]') + main
        )
    else:  # looks for the date anywhere in the file, not only on the first line
        wrong["date-anywhere"] = (
            _RULES.replace(
                'first = data.split(b"\\n", 1)[0]',
                'first = next((l for l in data.split(b"\\n") if l.startswith(b"date: ")), b"")',
            )
            + main
        )
    if dedupe:  # keeps the last copy of duplicates rather than the first
        wrong["keeps-last-duplicate"] = (
            _RULES.replace(
                "    for rel in sources(src):", "    for rel in sorted(sources(src), reverse=True):"
            )
            + main
        )
        wrong["follows-symlinks"] = (
            _RULES.replace(
                "if os.path.islink(path) or not os.path.isfile(path):",
                "if not os.path.isfile(path):",
            )
            + main
        )

    tests = _tests(mode, dedupe, n_files, depth, secret)
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=tests,
        solution={
            "solve.sh": solve_sh_writing({"organize.py": right}, note="walk, bucket, suffix, copy")
        },
        wrong_solutions={
            name: {"solve.sh": solve_sh_writing({"organize.py": src}, note=f"wrong: {name}")}
            for name, src in wrong.items()
        },
        tags=("python", "filesystem", "scripting"),
        verifier_timeout_sec=240.0,
    )


def _hardcoded(sample: dict, mode: str, dedupe: bool) -> str:
    """Replays the reference's result for the sample inbox, whatever SRC holds."""
    import tempfile
    from pathlib import Path

    ns: dict = {}
    exec(_RULES, ns)  # noqa: S102 - our own reference rules
    with tempfile.TemporaryDirectory() as tmp:
        for rel, body in sample["files"].items():
            p = Path(tmp) / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(body)
        placed, dupes = ns["plan"](tmp, mode, dedupe)
    return _RULES + textwrap.dedent(
        f"""

        PLACED = {json.dumps(sorted(placed.items()))}
        DUPES = {json.dumps(dupes)}

        if __name__ == "__main__":
            src, dest = sys.argv[1], sys.argv[2]
            for target, rel in PLACED:
                if os.path.exists(os.path.join(src, rel)):
                    os.makedirs(os.path.dirname(os.path.join(dest, target)), exist_ok=True)
                    shutil.copyfile(os.path.join(src, rel), os.path.join(dest, target))
            if {dedupe!r}:
                with open(os.path.join(dest, "duplicates.csv"), "w", newline="") as f:
                    w = csv.writer(f)
                    w.writerow(["duplicate", "original"])
                    w.writerows(DUPES)
        """
    )


_SRC, _DEST = "in box", "out/sorted"  # spaces in SRC; DEST's parent exists, DEST not yet


def _trial(rng, n: int, depth: int, mode: str, dedupe: bool, label: str) -> hs.Case:
    """A fresh inbox and the reference's DEST for it, made now; SRC must stay as it is."""
    import tempfile

    inbox = _inbox(rng, n, depth, mode, dedupe)
    ns: dict = {}
    exec(_RULES, ns)  # noqa: S102 - our own reference rules
    with tempfile.TemporaryDirectory() as tmp:
        src, dest = os.path.join(tmp, "src"), os.path.join(tmp, "dest")
        for rel, body in inbox["files"].items():
            os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
            with open(os.path.join(src, rel), "w") as f:
                f.write(body)
        for rel, target in inbox["links"].items():
            os.symlink(target, os.path.join(src, rel))
        before = hs.tree_of(src)
        ns["organize"](src, dest, mode, dedupe)
        after = hs.tree_of(dest)
    return hs.Case(
        label,
        want={"trees": {_DEST: after, _SRC: before}},
        files={f"{_SRC}/{rel}": body for rel, body in inbox["files"].items()},
        tree={
            "dirs": [os.path.dirname(_DEST)],
            "symlinks": {f"{_SRC}/{rel}": t for rel, t in inbox["links"].items()},
        },
    )


def _tests(mode: str, dedupe: bool, n_files: int, depth: int, secret: int) -> dict:
    """The hidden test, as data: two fresh inboxes drawn from the secret, with the
    reference's DEST for each fixed now; organize.py runs on each as nobody (SRC and DEST's
    parent its own, as a user's would be), and DEST, then SRC, are compared whole."""
    rng = random.Random(secret)
    trials = [(n_files, depth), (max(6, n_files // 3), 1)]
    argv = ["python3", "{app}/organize.py", "{in}/" + _SRC, "{in}/" + _DEST]
    return hs.tests(
        answer=hs.program(argv, writable=True, trees=[_DEST, _SRC]),
        cases=[_trial(rng, n, d, mode, dedupe, f"trial {t}") for t, (n, d) in enumerate(trials)],
        compare=hs.compare("tree", tree_label="{label}: {name} as expected"),
        limits=hs.limits(timeout=60, cpu=10),
        timeout=200,
    )
