"""log-rotate-js: a Node.js ``logrotate``: rotate the logs over a size limit, keep N archives.

The agent writes ``/app/main.js``, run as ``node main.js DIR MAX_BYTES KEEP``: every log
(a regular file named ``*.log``) larger than ``MAX_BYTES`` becomes archive 1, each archive moves
up one number (none ever overwritten), archives that would pass ``KEEP`` are deleted, a new empty
log with the old one's permission bits takes its place, and a report (rotated logs in code point
order of their paths, then a total) is printed.

Difficulty knobs: the number of logs grows; easy is one flat folder with contiguous archives, a
log of exactly ``MAX_BYTES`` (not rotated) and look-alike names (``catalog``, ``app.log.bak``);
medium recurses into sub-folders, has symbolic links to skip (a ``*.log`` link, a link to a
folder, a dangling one), a folder named ``*.log``, gaps in the archive numbers and archives
already past ``KEEP``, and logs whose permission bits a default-mode new file would not match;
hard stores archives 2 and up gzip-compressed (``app.log.2.gz``: archive 1 stays plain) and has
non-ASCII names (a fullwidth and an emoji name: JavaScript's default sort orders them by UTF-16
code units, not code points). The hidden test is data (``harness_spec``): fresh trees drawn from
the task's secret with a Python reference's report and tree afterwards, made at generation
time; the checker plants each, runs the agent's program with Node as ``nobody`` and compares
the report and the whole tree afterwards (names, kinds, permission bits, contents, gzip
archives decompressed).
"""

from __future__ import annotations

import gzip
import random
import textwrap

from palaestra.tasks.generators import family
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators._toolchains import NODE, REWARD_OUTCOMES, one_file_solutions
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.optimization._bench import apply_edits

_STUB = """\
// rotate: node main.js DIR MAX_BYTES KEEP (the task says what it must do)
"use strict";

process.stderr.write("not implemented yet\\n");
process.exit(1);
"""

_ORACLE = """\
// rotate: node main.js DIR MAX_BYTES KEEP. Rotates every log over MAX_BYTES, keeps KEEP
// archives and prints the rotated logs (path, size) in code point order, then a total.
"use strict";
const fs = require("fs");
const path = require("path");
const zlib = require("zlib");

const NESTED = NESTED_VALUE;
const GZIP = GZIP_VALUE;

function byCodePoint(a, b) {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

function findLogs(dir, rel, out) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const name = rel === "" ? entry.name : rel + "/" + entry.name;
    if (entry.isDirectory()) {
      if (NESTED) findLogs(path.join(dir, entry.name), name, out);
    } else if (entry.isFile() && entry.name.endsWith(".log")) {
      out.push(name);
    }
  }
  return out;
}

function archive(log, n) {
  return GZIP && n >= 2 ? `${log}.${n}.gz` : `${log}.${n}`;
}

function archiveNumbers(log) {
  const base = path.basename(log) + ".";
  const found = [];
  for (const entry of fs.readdirSync(path.dirname(log), { withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.startsWith(base)) continue;
    const m = /^([1-9][0-9]*)(\\.gz)?$/.exec(entry.name.slice(base.length));
    if (m === null) continue;
    const n = Number(m[1]);
    if ((m[2] !== undefined) === (GZIP && n >= 2)) found.push(n);
  }
  return found.sort((a, b) => b - a);
}

function moveUp(log, n) {
  const from = archive(log, n);
  const to = archive(log, n + 1);
  if (GZIP && n === 1) {
    const mode = fs.statSync(from).mode & 0o7777;
    fs.writeFileSync(to, zlib.gzipSync(fs.readFileSync(from)), { mode });
    fs.chmodSync(to, mode);
    fs.unlinkSync(from);
  } else {
    fs.renameSync(from, to);
  }
}

function rotate(log, keep) {
  for (const n of archiveNumbers(log)) {
    if (n >= keep) fs.unlinkSync(archive(log, n));
    else moveUp(log, n);
  }
  const mode = fs.statSync(log).mode & 0o7777;
  fs.renameSync(log, archive(log, 1));
  fs.writeFileSync(log, "", { mode });
  fs.chmodSync(log, mode);
}

function main([dir, maxBytes, keep]) {
  const out = [];
  let bytes = 0;
  for (const rel of findLogs(dir, "", []).sort(byCodePoint)) {
    const log = path.join(dir, rel);
    const size = fs.lstatSync(log).size;
    if (size > Number(maxBytes)) {
      rotate(log, Number(keep));
      out.push(`${rel}\\t${size}\\n`);
      bytes += size;
    }
  }
  out.push(`TOTAL\\t${out.length}\\t${bytes}\\n`);
  process.stdout.write(out.join(""));
}

main(process.argv.slice(2));
"""

# Python run at generation time: the trees (the sample's too) and the reference's result.
_CASES = r"""
import os
import re

TIER, N_LOGS = {params}
NESTED, GZIP = TIER != "easy", TIER == "hard"
NAMES = ["app", "web", "db", "worker", "cron", "auth", "mail", "proxy", "queue", "billing"]
WIDE = ["\uff57\uff45\uff42", "\u30b8\u30e7\u30d6", "caf\u00e9 orders"]  # fullwidth, katakana
ASTRAL = ["\U0001f680deploy", "\U0001f4e6builds"]
FOLDERS = ["app", "app/jobs", "nginx", "nginx/sites", "old.log"]
MODES = [0o600, 0o640, 0o644, 0o664]


def archive(log, n):
    return "{{}}.{{}}.gz".format(log, n) if GZIP and n >= 2 else "{{}}.{{}}".format(log, n)


def body(rng, path, size):
    text, k = "", 0
    while len(text.encode()) < size:
        k += 1
        text += "2024-05-{{:02d}}T{{:02d}}:00 {{}} #{{}} {{}}\n".format(
            rng.randint(1, 28), rng.randint(0, 23), path, k, rng.randrange(10**6))
    return text.encode()[:size]


def make_tree(rng, n_logs):
    # {{path: ("dir",) | ("file", bytes, mode) | ("link", target)}}, MAX_BYTES, KEEP
    max_bytes, keep = rng.choice([64, 100, 128, 200]), rng.randint(2, 4 if TIER == "easy" else 5)
    tree = {{}}
    dirs = [""] + (FOLDERS if NESTED else [])
    for d in dirs[1:]:
        tree[d] = ("dir",)
    names = NAMES + (WIDE + ASTRAL if GZIP else [])

    def put(path, size, mode):
        tree[path] = ("file", body(rng, path, size), mode)

    def mode():
        return rng.choice(MODES) if NESTED else 0o644

    def log(d, name, size, archives, log_mode):
        path = (d + "/" if d else "") + name + ".log"
        if path in tree:
            return path
        put(path, size, log_mode)
        for n in archives:
            put(archive(path, n), rng.randint(1, 3 * max_bytes), mode())
        return path

    odd = 0o640 if NESTED else 0o644  # a default-mode new file would be 0644
    # the planted traps: a log of exactly MAX_BYTES; a full chain (shifts in order, drops KEEP)
    log("", rng.choice(NAMES[:3]), max_bytes, range(1, rng.randint(1, keep) + 1), mode())
    full = log(rng.choice(dirs), NAMES[3], max_bytes + rng.randint(1, 200), range(1, keep + 1), odd)
    if NESTED:  # a gap, an archive past KEEP
        log(rng.choice(dirs[1:]), NAMES[4], max_bytes + 1, [1, 3, keep + 2], odd)
    if GZIP:  # orders apart by code point and by UTF-16 unit, both rotated
        d = rng.choice(dirs)
        log(d, WIDE[0], max_bytes + 5, [1, 2], mode())
        log(d, rng.choice(ASTRAL), max_bytes + 9, [1], mode())
    for _ in range(n_logs):
        size = rng.choice([0, max_bytes - rng.randint(1, max_bytes - 1), max_bytes,
                           max_bytes + rng.randint(1, 400)])
        n = rng.randint(0, keep)
        archives = range(1, n + 1)
        if NESTED and rng.random() < 0.4:
            archives = sorted(rng.sample(range(1, keep + 3), n))
        log(rng.choice(dirs), rng.choice(names), size, archives, mode())
    for d in dirs:
        base = d + "/" if d else ""
        for other in ["catalog", "README", "app.log.bak", "notes.txt"]:
            if rng.random() < 0.5:
                put(base + other, rng.randint(0, 3 * max_bytes), 0o644)
        if NESTED and rng.random() < 0.5:
            put(base + "web.log.1.bak", rng.randint(1, 3 * max_bytes), 0o644)
    if NESTED:
        tree["current.log"] = ("link", full)  # a link to a log that is rotated
        tree["archive"] = ("link", "nginx")
        tree["nginx/gone.log"] = ("link", "../nowhere.log")
    return tree, max_bytes, keep


def make_cases(rng):
    return [("tree {{}} ({{}} logs)".format(k + 1, n), make_tree(rng, n), None)
            for k, n in enumerate([2, N_LOGS, N_LOGS])]


def archive_numbers(tree, log):
    d, base = os.path.split(log)
    prefix = (d + "/" if d else "") + os.path.basename(log) + "."
    found = []
    for path, entry in tree.items():
        if entry[0] != "file" or not path.startswith(prefix) or "/" in path[len(prefix):]:
            continue
        m = re.fullmatch(r"([1-9][0-9]*)(\.gz)?", path[len(prefix):])
        if m and (m.group(2) is not None) == (GZIP and int(m.group(1)) >= 2):
            found.append(int(m.group(1)))
    return sorted(found, reverse=True)


def expected(case):
    tree, max_bytes, keep = case
    tree = dict(tree)
    logs = sorted(p for p, e in tree.items()
                  if e[0] == "file" and p.endswith(".log") and (NESTED or "/" not in p))
    report, total = [], 0
    for log in logs:
        size = len(tree[log][1])
        if size <= max_bytes:
            continue
        for n in archive_numbers(tree, log):
            old = tree.pop(archive(log, n))
            if n < keep:
                tree[archive(log, n + 1)] = old
        tree[archive(log, 1)] = tree[log]
        tree[log] = ("file", b"", tree[log][2])
        report.append("{{}}\t{{}}".format(log, size))
        total += size
    report.append("TOTAL\t{{}}\t{{}}".format(len(report), total))
    return report, tree
"""


def _rules(tier: str) -> list[str]:
    where = "directly in `DIR` (not in sub-folders)" if tier == "easy" else "anywhere under `DIR`"
    rules = [
        f"A *log* is a regular file whose name ends in `.log`, {where}."
        + (
            " Symbolic links are never followed, rotated, moved or deleted (a link named "
            "`x.log`, a link to a folder); a folder named `x.log` is a folder."
            if tier != "easy"
            else ""
        ),
        "A log is rotated when its size is **more than** `MAX_BYTES` bytes.",
        "The archives of `P.log` are the regular files beside it named `P.log.N`, N a number "
        "from 1 without leading zeros"
        + (
            "; archives 2 and up are gzip-compressed and named `P.log.N.gz` (archive 1 is "
            "`P.log.1`, plain)"
            if tier == "hard"
            else ""
        )
        + ". Nothing else is an archive (`P.log.bak`, `P.log.1.bak`).",
        "Rotating `P.log`: every archive N moves up to N+1"
        + (" (archive 1 is gzip-compressed on its way to `P.log.2.gz`)" if tier == "hard" else "")
        + ", except that an archive whose new number would be more than `KEEP` is deleted; then "
        "`P.log` becomes archive 1 and a new, empty `P.log` with the same permission bits as "
        "the old one takes its place. No archive is ever overwritten"
        + (
            "; numbers may have gaps (each archive moves up by one all the same) and archives "
            "already past `KEEP` are deleted"
            if tier != "easy"
            else ""
        )
        + ". Every file keeps its permission bits.",
        "Logs not rotated, their archives and every other file are left alone.",
        "Print one line per rotated log, `PATH<TAB>SIZE` (its path relative to `DIR` with `/` "
        "between folders, its size before rotation), sorted by path in Unicode code point "
        "order (the byte order of their UTF-8), then `TOTAL<TAB>COUNT<TAB>BYTES`.",
    ]
    return rules


@family(
    "log-rotate-js",
    category="file-operations",
    summary="Node.js logrotate: size limit, keep N, gaps, symlinks, modes, gzip archives",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    tier = spec.tier
    cases = _CASES.format(params=repr((tier, spec.iscale(4, 24))))
    scope: dict = {}
    exec(cases, scope)
    sample, max_bytes, keep = scope["make_tree"](rng, 3)
    workspace = {"main.js": _STUB}
    for path, entry in sorted(sample.items()):
        if entry[0] == "file" and path.isascii() and not path.endswith(".gz"):
            workspace[f"sample/{path}"] = entry[1].decode()
    oracle = _ORACLE.replace("NESTED_VALUE", str(tier != "easy").lower()).replace(
        "GZIP_VALUE", str(tier == "hard").lower()
    )
    wrongs = {
        # a log of exactly MAX_BYTES is rotated too
        "rotates-at-the-limit": apply_edits(
            oracle, [("if (size > Number(maxBytes))", "if (size >= Number(maxBytes))")]
        ),
        # archives moved up lowest first: each overwrites the next
        "shifts-lowest-first": apply_edits(
            oracle, [("return found.sort((a, b) => b - a);", "return found.sort((a, b) => a - b);")]
        ),
        # archive KEEP is kept and moved to KEEP + 1
        "keeps-one-too-many": apply_edits(oracle, [("if (n >= keep)", "if (n > keep)")]),
        # no new empty log
        "no-new-log": apply_edits(
            oracle, [('  fs.writeFileSync(log, "", { mode });\n  fs.chmodSync(log, mode);\n', "")]
        ),
    }
    if tier != "easy":
        # follows symbolic links (stat instead of the entry's own type)
        wrongs["follows-symlinks"] = apply_edits(
            oracle,
            [
                (
                    "    if (entry.isDirectory()) {",
                    "    const st = fs.statSync(path.join(dir, entry.name), "
                    "{ throwIfNoEntry: false });\n"
                    "    if (st === undefined) continue;\n"
                    "    if (st.isDirectory()) {",
                ),
                ("} else if (entry.isFile() && entry", "} else if (st.isFile() && entry"),
            ],
        )
        # the new log gets the default mode (0644 under the usual umask)
        wrongs["new-log-default-mode"] = apply_edits(
            oracle,
            [
                (
                    '  fs.writeFileSync(log, "", { mode });\n  fs.chmodSync(log, mode);\n',
                    '  fs.writeFileSync(log, "");\n',
                )
            ],
        )
        # counts archives up from 1 and stops at the first gap
        wrongs["stops-at-a-gap"] = apply_edits(
            oracle,
            [
                (
                    "  return found.sort((a, b) => b - a);",
                    "  const run = [];\n"
                    "  while (found.includes(run.length + 1)) run.push(run.length + 1);\n"
                    "  return run.reverse();",
                )
            ],
        )
    if tier == "hard":
        # JavaScript's default sort: UTF-16 code units, not code points
        wrongs["utf16-order"] = apply_edits(
            oracle, [('findLogs(dir, "", []).sort(byCodePoint)', 'findLogs(dir, "", []).sort()')]
        )
        # archive 1 renamed to P.log.2.gz but never compressed
        wrongs["renames-without-gzip"] = apply_edits(
            oracle, [("  if (GZIP && n === 1) {", "  if (false) {")]
        )
    instruction = textwrap.dedent(
        """\
        # Rotate the logs

        Write `/app/main.js`, run as `node main.js DIR MAX_BYTES KEEP` (Node.js from the
        distribution, no npm packages), that rotates the logs under the folder `DIR`:

        {rules}

        {example}
        """
    ).format(
        rules="\n".join(textwrap.fill("- " + r, 90, subsequent_indent="  ") for r in _rules(tier)),
        example=textwrap.fill(
            f"`/app/sample/` is a small example tree for `node main.js sample {max_bytes} {keep}`"
            + (
                " (links, compressed archives and non-ASCII names left out)"
                if tier != "easy"
                else ""
            )
            + ". The trees it will be run on differ in names, sizes, permissions, `MAX_BYTES` "
            "and `KEEP`, and `DIR` may contain spaces.",
            90,
        ),
    )
    solution, wrong = one_file_solutions(NODE.source, oracle, wrongs, note="logrotate by hand")
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=_tests(scope, rng.randrange(2**31)),
        solution=solution,
        wrong_solutions=wrong,
        tags=("javascript", "node", "filesystem"),
        verifier_timeout_sec=420.0,
        reward_outcomes=REWARD_OUTCOMES,
        packages=NODE.packages,
    )


_ROOT = "var log"  # a space in DIR


def _case(label: str, tree: dict, max_bytes: int, keep: int, expected) -> hs.Case:
    """A tree planted under ``_ROOT`` (the run's, as a user's logs would be), and the
    reference's report and tree afterwards, made now."""
    files, dirs, links, modes = {}, [], {}, {}
    for path, entry in sorted(tree.items()):
        where = f"{_ROOT}/{path}"
        if entry[0] == "dir":
            dirs.append(where)
        elif entry[0] == "link":
            links[where] = entry[1]
        else:
            data = gzip.compress(entry[1], mtime=0) if path.endswith(".gz") else entry[1]
            files[where], modes[where] = data, entry[2]
    report, after = expected((tree, max_bytes, keep))
    want_tree = {}
    for path, entry in after.items():
        if entry[0] == "file":
            want_tree[path] = ["file", entry[1].decode("utf-8", "replace"), entry[2]]
        else:
            want_tree[path] = list(entry)
    return hs.Case(
        label,
        want=[{"lines": report}, {"trees": {_ROOT: want_tree}}],
        files=files,
        tree={"dirs": dirs, "symlinks": links, "modes": modes},
        args=["{in}/" + _ROOT, str(max_bytes), str(keep)],
    )


def _tests(scope: dict, secret: int) -> dict[str, str | bytes]:
    """The hidden test, as data: fresh trees drawn from the secret with the reference's
    report and tree afterwards (every file's permission bits, gzip archives decompressed);
    main.js runs on each with Node as nobody."""
    cases = [
        _case(label, *case, scope["expected"])
        for label, case, _ in scope["make_cases"](random.Random(secret))
    ]
    answer = hs.program(
        ["node", "{app}/main.js"], writable=True, trees=[_ROOT], tree_modes=True, gunzip=True
    )
    compare = hs.compare(
        "each",
        of=[
            hs.compare("lines", what="report line", label="{label}: report"),
            hs.compare("tree", tree_label="{label}: the tree afterwards"),
        ],
    )
    return hs.tests(
        answer=answer,
        cases=cases,
        compare=compare,
        limits=hs.limits(timeout=60),
        kind="io",
        timeout=400,
    )
