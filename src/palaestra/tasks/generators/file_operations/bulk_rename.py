"""bulk-rename: rename a folder's files from a rules file (regex => template), collision-safe.

The agent writes ``/app/rename.py DIR RULES``: the first rule whose regex fully matches a file
name gives its new name (``str.format`` with the named groups and a per-rule counter ``n``);
names wanted by several files, or held by a file that stays, are conflicts (the file keeps its
name); renames run so that no file is ever overwritten, chains and swaps included; a JSON report
is printed. The hidden test is data (``harness_spec``): fresh folders and rules drawn from the task's
secret at generation time, with the reference's report and final folder; the checker runs the
script as ``nobody`` on its own copy and compares the final folder (names and bytes: every
file's content is unique, so a lost or swapped file shows) and the report.

Difficulty knobs: folder size grows; easy has direct conflicts (a name taken by an unmatched
file, a name wanted twice, across rules); medium adds a rotation rule that makes rename chains
(``a.log -> a.log.1 -> a.log.2``) and ``--dry-run``; hard adds swap cycles
(``x-vs-y.csv <-> y-vs-x.csv``) and cascading conflicts (a file that stays because of a conflict
blocks the file that wanted its name, which sorts earlier).
"""

from __future__ import annotations

import os
import random
import textwrap

from palaestra.tasks.generators import family, solve_sh_writing
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_WORDS = ["cats", "dogs", "north", "south", "alpha", "beta", "red", "blue", "q", "zeta"]
_LOGS = ["app", "db", "worker", "cron", "proxy", "auth", "mail"]

# The reference: the solution, and the expected reports and folders made at generation time.
_REF = r"""
import json
import os
import re
import sys


def read_rules(path):
    rules = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            pattern, template = line.split(" => ", 1)
            rules.append((re.compile(pattern), template))
    return rules


def plan(names, rules):
    names = sorted(names)
    counters = [0] * len(rules)
    moving = {}
    for name in names:
        for i, (rx, template) in enumerate(rules):
            m = rx.fullmatch(name)
            if m:
                counters[i] += 1
                target = template.format(n=counters[i], **m.groupdict())
                if target != name:
                    moving[name] = target
                break
    conflicts, claimed = {}, set()
    for old in sorted(moving):
        if moving[old] in claimed:
            conflicts[old] = moving[old]
        claimed.add(moving[old])
    present = set(names)
    changed = True
    while changed:
        changed = False
        for old in sorted(moving):
            new = moving[old]
            if old not in conflicts and new in present and (new not in moving or new in conflicts):
                conflicts[old] = new
                changed = True
    renames = {old: new for old, new in moving.items() if old not in conflicts}
    return renames, conflicts


def apply(folder, renames):
    temps = []
    for i, (old, new) in enumerate(sorted(renames.items())):
        tmp = os.path.join(folder, ".rename-%d.tmp" % i)
        os.rename(os.path.join(folder, old), tmp)
        temps.append((tmp, new))
    for tmp, new in temps:
        os.rename(tmp, os.path.join(folder, new))


def main(argv):
    dry = "--dry-run" in argv
    folder, rules_path = [a for a in argv if a != "--dry-run"]
    names = [n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n))]
    renames, conflicts = plan(names, read_rules(rules_path))
    print(json.dumps({"renamed": sorted([o, n] for o, n in renames.items()),
                      "conflicts": sorted([o, n] for o, n in conflicts.items())}))
    if not dry:
        apply(folder, renames)
"""


def _case(rng, n, tier):
    """Rules text and {file name: content} for a folder. Content is unique per file."""
    rules = [
        (r"IMG_(?P<num>\d{4})\.JPG", "photo-{num}.jpg"),
        (r"scan_(?P<date>\d{8})\.pdf", "{date}-scan-{n:03d}.pdf"),
        (r"(?P<stem>[a-z0-9-]+)\.jpeg", "{stem}.jpg"),
    ]
    if tier != "easy":
        rules += [(r"(?P<s>[a-z]+)\.log", "{s}.log.1"), (r"(?P<s>[a-z]+)\.log\.1", "{s}.log.2")]
    if tier == "hard":
        rules.append((r"(?P<a>[a-z]+)-vs-(?P<b>[a-z]+)\.csv", "{b}-vs-{a}.csv"))
    rng.shuffle(rules)
    names = set()
    nums = rng.sample(range(10000), n + 2)
    for num in nums[:n]:
        names.add("IMG_%04d.JPG" % num)
    names.add("photo-%04d.jpg" % nums[0])  # taken by a file that stays
    names.add("photo-%04d.jpeg" % nums[1])  # wants the same name as IMG_<nums[1]>.JPG
    names.add("old_IMG_%04d.JPG" % nums[n])  # matches only if searched, not fully matched
    for _ in range(max(2, n // 2)):
        names.add("scan_2024%02d%02d.pdf" % (rng.randrange(1, 13), rng.randrange(1, 29)))
    names.add("scan_%d.pdf" % rng.randrange(100))
    for _ in range(max(2, n // 3)):
        stem = "%s-%d" % (rng.choice(_WORDS), rng.randrange(100))
        names.add(stem + ".jpeg")
        if rng.random() < 0.4:
            names.add(stem + ".jpg")  # taken
    names.add("notes.txt")
    if tier != "easy":
        for s in rng.sample(_LOGS, 3):
            names.update([s + ".log", s + ".log.1"])
        names.add(rng.choice(_LOGS) + ".log")
    if tier == "hard":
        a, b, c = rng.sample(_WORDS[:8], 3)
        names.update(["%s-vs-%s.csv" % (a, b), "%s-vs-%s.csv" % (b, a), "%s-vs-%s.csv" % (c, a)])
        s = rng.choice([x for x in _LOGS if x + ".log.1" not in names])
        names.update([s + ".log", s + ".log.1", s + ".log.2"])  # .log.1 blocked, then .log
    files = {}
    for name in sorted(names):
        files[name] = "%s #%d\n" % (name, rng.randrange(10**9))
    text = "# PATTERN => TEMPLATE (first full match wins)\n" + "".join(
        "%s => %s\n" % r for r in rules
    )
    return text, files


@family(
    "bulk-rename",
    category="file-operations",
    summary="Rename files by regex => template rules; conflicts, chains, swaps, dry-run",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    tier = spec.tier
    n = spec.iscale(6, 40)
    secret = rng.randrange(2**31)
    sample_rules, sample_files = _case(rng, 5, tier)

    rules = [
        "`RULES` has one rule a line, `PATTERN => TEMPLATE` (split at the first ` => `; blank "
        "lines and lines starting with `#` are ignored). Only regular files directly in `DIR` "
        "are renamed; sub-folders are left alone.",
        "Go through the file names in sorted order (plain string order). The **first** rule "
        "whose PATTERN (a Python regex) matches the **whole** name applies; no match, no rename. "
        "The new name is `TEMPLATE.format(n=..., **match.groupdict())`, where `n` counts the "
        "files this rule has matched so far, starting at 1 (each rule has its own counter; every "
        "match counts, even one that ends up not renamed). A new name equal to the old one is "
        "no rename.",
        "Conflicts (the file keeps its name): if several files want the same new name, the first "
        "in sorted order may take it and every later one is a conflict (even if the first turns "
        "out to be a conflict itself). A file whose new name is held by a file that is not renamed "
        "away (no rule, no-op, or itself a conflict) is a conflict; repeat this until nothing "
        "changes.",
        "Every other rename happens, whatever the order of names: a file may take a name another "
        "file is leaving"
        + (" (`a.log -> a.log.1 -> a.log.2`)" if tier != "easy" else "")
        + (", names may be swapped" if tier == "hard" else "")
        + ". No file's content may ever be lost or overwritten.",
        'Print one JSON object: `{"renamed": [[old, new], ...], "conflicts": [[old, wanted], '
        "...]}`, both lists sorted.",
    ]
    if tier != "easy":
        rules.append(
            "With `--dry-run` (anywhere on the command line), print the same report and change "
            "nothing."
        )
    instruction = textwrap.dedent(
        """\
        # Bulk rename with rules

        Write `/app/rename.py`, run as `python3 /app/rename.py DIR RULES`, that renames the files
        in the folder `DIR` following the rules in the file `RULES`:

        {rules}

        Try it on `/app/example/` with `/app/example.rules` (the rules will differ in order and
        the folders in content and size). Only the Python standard library is available.
        """
    ).format(rules="\n".join(textwrap.fill("- " + r, 90, subsequent_indent="  ") for r in rules))
    workspace = {f"example/{k}": v for k, v in sample_files.items()}
    workspace["example.rules"] = sample_rules
    workspace["rename.py"] = (
        '"""python3 rename.py DIR RULES"""\n\nraise SystemExit("not implemented yet")\n'
    )

    main = "\n\nif __name__ == '__main__':\n    main(sys.argv[1:])\n"
    right = _REF + main
    wrong = {
        # re.search instead of a whole-name match
        "search-not-fullmatch": _REF.replace("m = rx.fullmatch(name)", "m = rx.search(name)")
        + main,
        # one counter shared by every rule
        "global-counter": _REF.replace("counters[i] += 1", "counters[0] += 1").replace(
            "n=counters[i]", "n=counters[0]"
        )
        + main,
        # the last claimant of a name wins instead of the first
        "last-claimant-wins": _REF.replace(
            "    for old in sorted(moving):\n        if moving[old] in claimed:",
            "    for old in sorted(moving, reverse=True):\n        if moving[old] in claimed:",
        )
        + main,
        # renames onto names held by files that stay (overwrites them)
        "overwrites-held-names": _REF.replace(
            "if old not in conflicts and new in present and", "if False and"
        )
        + main,
    }
    if tier != "easy":
        # renames one by one in sorted order: a chain overwrites the next link
        wrong["sequential-rename"] = (
            _REF.replace(
                "    temps = []\n    for i, (old, new) in enumerate(sorted(renames.items())):",
                "    temps = []\n    for i, (old, new) in enumerate(sorted(renames.items())):\n"
                "        os.rename(os.path.join(folder, old), os.path.join(folder, new))\n"
                "        continue",
            )
            + main
        )
        wrong["dry-run-renames"] = _REF.replace("    if not dry:\n", "    if True:\n") + main
    if tier == "hard":
        # checks held names once instead of until nothing changes
        wrong["single-pass-conflicts"] = (
            _REF.replace(
                "    while changed:\n        changed = False\n", "    for _ in [0]:\n"
            ).replace("                changed = True\n", "")
            + main
        )
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=_tests(tier, n, secret),
        solution={
            "solve.sh": solve_sh_writing(
                {"rename.py": right}, note="plan, conflicts, two-phase rename"
            )
        },
        wrong_solutions={
            name: {"solve.sh": solve_sh_writing({"rename.py": src}, note=f"wrong: {name}")}
            for name, src in wrong.items()
        },
        tags=("python", "filesystem", "regex"),
        verifier_timeout_sec=240.0,
    )


_FOLDER, _SUB = "the folder", "IMG_0001.JPG.d"  # a space in DIR; a sub-folder stays


def _trial(rng, n: int, tier: str, dry: bool, label: str) -> hs.Case:
    """A fresh folder and rules, and the reference's report and folder afterwards, now."""
    import tempfile

    ns: dict = {}
    exec(_REF, ns)  # noqa: S102 - our own reference
    text, files = _case(rng, n, tier)
    with tempfile.TemporaryDirectory() as tmp:
        rules_path = os.path.join(tmp, "rules.txt")
        with open(rules_path, "w", encoding="utf-8") as f:
            f.write(text)
        renames, conflicts = ns["plan"](list(files), ns["read_rules"](rules_path))
    report = {
        "renamed": sorted([o, n] for o, n in renames.items()),
        "conflicts": sorted([o, n] for o, n in conflicts.items()),
    }
    after = {name: ["file", body] for name, body in files.items()}
    if not dry:
        after = {renames.get(name, name): entry for name, entry in after.items()}
    after[_SUB] = ["dir"]
    return hs.Case(
        label,
        want=[report, {"trees": {_FOLDER: after}}],
        files={"rules.txt": text, **{f"{_FOLDER}/{name}": body for name, body in files.items()}},
        tree={"dirs": [f"{_FOLDER}/{_SUB}"]},
    )


def _tests(tier: str, n: int, secret: int) -> dict[str, str | bytes]:
    """The hidden test, as data: fresh folders and rules drawn from the secret, with the
    reference's report and folder afterwards fixed now; rename.py runs on each as nobody,
    the folder its own, and its JSON report (key by key) and the folder are compared."""
    rng = random.Random(secret)
    trials = [(n, False), (max(4, n // 3), False)] + ([(n, True)] if tier != "easy" else [])
    cases = [_trial(rng, k, tier, dry, f"trial {t}") for t, (k, dry) in enumerate(trials)]
    compare = hs.compare(
        "each",
        of=[
            hs.compare(
                "json_keys",
                tol=0,
                parse_label="{label}: rename.py prints JSON",
                object_label="{label}: a JSON object",
                key_label="{label}: {key}",
            ),
            hs.compare("tree", tree_label="{label}: the folder afterwards (names and contents)"),
        ],
    )
    limits = hs.limits(timeout=60, cpu=10)

    def program(*flags: str) -> dict:
        argv = ["python3", "{app}/rename.py", *flags, "{in}/" + _FOLDER, "{in}/rules.txt"]
        return hs.program(argv, writable=True, trees=[_FOLDER])

    dry = [hs.part(answer=program("--dry-run"), cases=cases[2:], compare=compare, limits=limits)]
    return hs.tests(
        answer=program(),
        cases=cases[:2],
        compare=compare,
        limits=limits,
        also=dry if cases[2:] else (),
        timeout=200,
    )
