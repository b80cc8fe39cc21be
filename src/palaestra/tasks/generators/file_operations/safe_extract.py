"""safe-extract: unpack an untrusted tar archive, verified against a SHA-256 manifest.

The agent writes ``/app/extract.py ARCHIVE MANIFEST DEST``: extract only members that are safe
(no absolute paths, no escape through ``..``, no links or special files) and listed in the
manifest with a matching checksum, print a JSON report (extracted, rejected with a reason,
corrupt, missing) and exit 1 when anything was wrong. The hidden test is data (``harness_spec``):
fresh archives drawn from the task's secret at generation time (absolute members aim at paths
under ``/tmp`` named by the secret, ``..`` members land next to DEST), with the reference's
report; the checker runs the script as ``nobody`` on its own copy and compares the exit status,
the report, the case folder (DEST's files, nothing beside it) and that nothing landed at the
absolute paths.

Difficulty knobs: archive size grows; easy is a plain tar with traversal, absolute and corrupt
members; medium is gzip-compressed with symlinks, hard links, files missing from the archive and
a manifest in ``sha256sum`` binary-mode syntax with comments; hard also normalises paths (a
``..`` that stays inside DEST is fine), rejects special files and has duplicate members (the last
one wins, as with tar).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import random
import tarfile
import textwrap

from palaestra.tasks.generators import family, solve_sh_writing
from palaestra.tasks.generators import harness_spec as hs
from palaestra.tasks.generators.base import GeneratedTask, GenSpec

_DIRS = ["etc", "lib", "share", "docs", "bin", "data", "conf", "assets"]
_STEMS = ["config", "readme", "app", "plugin", "index", "schema", "logo", "notes", "VERSION"]
_EXTS = [".txt", ".json", ".py", ".cfg", ".md", ""]

# The reference: the solution, and the expected reports and folders made at generation time.
_REF = r"""
import hashlib
import json
import os
import posixpath
import sys
import tarfile


def read_manifest(path):
    sums = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            digest, name = line.split(" ", 1)
            if name.startswith(" "):
                name = name[1:]
            elif name.startswith("*"):
                name = name[1:]
            sums[name] = digest.lower()
    return sums


def classify(m, tier):
    name = m.name
    if name.startswith("/"):
        return None, "absolute"
    norm = posixpath.normpath(name)
    if tier == "hard":
        if norm == ".." or norm.startswith("../"):
            return None, "traversal"
    elif ".." in name.split("/"):
        return None, "traversal"
    if m.issym() or m.islnk():
        return None, "link"
    if not (m.isfile() or m.isdir()):
        return None, "special"
    return norm, None


def extract(archive, manifest, dest, tier):
    sums = read_manifest(manifest)
    rejected, files, dirs = [], {}, []
    with tarfile.open(archive) as tar:
        for m in tar:
            norm, why = classify(m, tier)
            if why:
                rejected.append([m.name, why])
            elif m.isdir():
                dirs.append(norm)
            else:
                files[norm] = tar.extractfile(m).read()  # a later duplicate replaces it
    extracted, corrupt = [], []
    os.makedirs(dest, exist_ok=True)
    for d in dirs:
        os.makedirs(os.path.join(dest, d), exist_ok=True)
    for norm in sorted(files):
        if norm not in sums:
            rejected.append([norm, "unlisted"])
        elif hashlib.sha256(files[norm]).hexdigest() != sums[norm]:
            corrupt.append(norm)
        else:
            path = os.path.join(dest, norm)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(files[norm])
            extracted.append(norm)
    report = {"extracted": extracted, "rejected": sorted(rejected), "corrupt": corrupt}
    if tier != "easy":
        report["missing"] = sorted(set(sums) - set(files))
    return report


def main(argv, tier):
    report = extract(argv[0], argv[1], argv[2], tier)
    print(json.dumps(report))
    return 1 if report["rejected"] or report["corrupt"] or report.get("missing") else 0
"""


def _archive(rng, n_files, tier, abs_root, clean=False):
    """Members [name, kind, payload] and the manifest text. Unless ``clean``: traversal,
    absolute (into ``abs_root``), corrupt and unlisted members, and by tier links, missing
    files, an inner ``..`` that stays inside, a special file and a duplicate."""
    members, sums, used = [], [], set()

    def body():
        return "".join(
            "%s=%d\n" % (rng.choice(_STEMS), rng.randrange(10**6))
            for _ in range(rng.randrange(1, 6))
        )

    def fresh():
        while True:
            folder = "/".join(rng.choice(_DIRS) for _ in range(rng.randrange(0, 3)))
            name = (
                (folder + "/" if folder else "")
                + rng.choice(_STEMS)
                + "_%d" % rng.randrange(100)
                + rng.choice(_EXTS)
            )
            if name not in used:
                used.add(name)
                return name

    for _ in range(n_files):
        name, data = fresh(), body()
        members.append([name, "file", data])
        sums.append([name, data])
    if tier != "easy":
        members.insert(0, [rng.choice(_DIRS), "dir", ""])
    if not clean:
        k = 1 + n_files // 15
        for i in range(k):
            members.append(["../escaped_%d.txt" % i, "file", body()])
            members.append(["%s/../../up_%d.txt" % (rng.choice(_DIRS), i), "file", body()])
            members.append(["%s/abs_%d.txt" % (abs_root, i), "file", body()])
            name, data = fresh(), body()
            members.append([name, "file", data])
            sums.append([name, data + "tampered\n"])
            members.append([fresh(), "file", body()])  # not in the manifest
        if tier != "easy":
            members.append([fresh(), "symlink", "../../outside"])
            members.append([fresh(), "symlink", sums[0][0].rsplit("/", 1)[-1]])
            members.append([fresh(), "hardlink", sums[1][0]])
            for _ in range(k):
                sums.append([fresh(), body()])  # listed, never archived
        if tier == "hard":
            name, data = fresh(), body()
            folder = rng.choice(_DIRS)
            members.append(["%s/../%s" % (folder, name), "file", data])  # stays inside
            sums.append([name, data])
            members.append(
                ["%s/./../../deep_%d.txt" % (folder, rng.randrange(100)), "file", body()]
            )
            members.append([fresh(), "fifo", ""])
    rng.shuffle(members)
    if tier == "hard" and not clean:  # the same path twice: the later copy is the listed one
        dup, data = fresh(), body()
        first = rng.randrange(len(members) + 1)
        members.insert(first, [dup, "file", body()])
        members.insert(rng.randrange(first + 1, len(members) + 1), [dup, "file", data])
        sums.append([dup, data])
    lines = []
    for i, (name, data) in enumerate(sums):
        digest = hashlib.sha256(data.encode()).hexdigest()
        if tier == "easy":
            lines.append("%s  %s" % (digest, name))
        else:
            lines.append("%s %s%s" % (digest, "*" if i == 0 else rng.choice(["*", " "]), name))
    rng.shuffle(lines)
    if tier != "easy":
        lines.insert(0, "# sha256 manifest")
        lines.insert(rng.randrange(1, len(lines)), "")
    return members, "\n".join(lines) + "\n"


def _tar_bytes(members, gz):
    """Deterministic archive bytes: fixed owners and times, gzip without a timestamp."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = (
                1700000000,
                0,
                0,
                "root",
                "root",
            )
            data = None
            if kind == "file":
                data = payload.encode()
                info.size, info.mode = len(data), 0o644
            elif kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, payload
            elif kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, payload
            else:
                info.type, info.mode = tarfile.FIFOTYPE, 0o644
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    if not gz:
        return raw.getvalue()
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as f:
        f.write(raw.getvalue())
    return out.getvalue()


@family(
    "safe-extract",
    category="file-operations",
    summary="Safe tar extraction: checksum manifest, path traversal/links rejected, JSON report",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    tier = spec.tier
    n_files = spec.iscale(8, 60)
    secret = rng.randrange(2**31)
    gz = tier != "easy"
    ext = ".tar.gz" if gz else ".tar"
    sample_members, sample_manifest = _archive(rng, 6, tier, "/tmp")

    rules = [
        "Never write anything outside DEST (create DEST if missing). A member whose name is "
        'absolute (starts with `/`) is rejected with the reason `"absolute"`.',
        (
            'A member whose path has a `..` component is rejected as `"traversal"`.'
            if tier != "hard"
            else "Member paths are normalised (`posixpath.normpath`): one that then starts with "
            '`..` (it would leave DEST) is rejected as `"traversal"`; one that stays inside (`a/../b` '
            "is `b`) is extracted at its normalised path, and reported and matched against the "
            "manifest under that path."
        ),
    ]
    if tier != "easy":
        rules.append(
            'Symbolic and hard links are rejected as `"link"` (never created)'
            + (
                ', any other non-regular member (FIFO, device) as `"special"`.'
                if tier == "hard"
                else "."
            )
        )
    rules += [
        "Directory members are created. A regular file is extracted only if its path is listed "
        'in the manifest (otherwise rejected as `"unlisted"`) and the SHA-256 of its bytes '
        "matches; a mismatch is *corrupt*: it must not appear in DEST at all.",
    ]
    if tier == "hard":
        rules.append(
            "When several members have the same (normalised) path, only the last one counts, as "
            "with `tar`: earlier ones are ignored entirely."
        )
    manifest_fmt = (
        "one line per file: the hex digest, two spaces, the path (what `sha256sum` prints)"
        if tier == "easy"
        else "what `sha256sum` prints: the hex digest, a space, then a space (text mode) or `*` "
        "(binary mode), then the path; blank lines and lines starting with `#` are ignored"
    )
    keys = [
        '`"extracted"`: sorted paths written to DEST',
        '`"rejected"`: sorted `[member name, reason]` pairs (the name exactly as in the archive, '
        "except `unlisted` ones, which use the path checked against the manifest)",
        '`"corrupt"`: sorted paths whose checksum did not match',
    ]
    if tier != "easy":
        keys.append('`"missing"`: sorted manifest paths with no regular-file member in the archive')
    instruction = textwrap.dedent(
        """\
        # Unpack vendor drops safely

        We receive {kind} archives from a vendor with a SHA-256 manifest next to them, and the
        archives cannot be trusted. Write `/app/extract.py`, run as
        `python3 /app/extract.py ARCHIVE MANIFEST DEST`.

        The manifest has {manifest_fmt}.

        {rules}

        Print one JSON object to stdout with exactly these keys: {keys}. Paths use `/`.
        Exit with status 1 if anything was rejected, corrupt{missing}, else 0.

        Example: `/app/sample/drop{ext}` with `/app/sample/SHA256SUMS`. The script will be run on
        other, bigger archives. Only the Python standard library is available.
        """
    ).format(
        kind="gzip-compressed tar" if gz else "tar",
        manifest_fmt=manifest_fmt,
        rules="\n".join(textwrap.fill("- " + r, 90, subsequent_indent="  ") for r in rules),
        keys="; ".join(keys),
        missing=" or missing" if tier != "easy" else "",
        ext=ext,
    )
    workspace = {
        f"sample/drop{ext}": _tar_bytes(sample_members, gz),
        "sample/SHA256SUMS": sample_manifest,
        "extract.py": '"""python3 extract.py ARCHIVE MANIFEST DEST"""\n\nraise SystemExit("not implemented yet")\n',
    }
    main = f"\n\nif __name__ == '__main__':\n    sys.exit(main(sys.argv[1:], {tier!r}))\n"
    right = _REF + main
    wrong = {
        # lets traversal and absolute members through, like a bare extractall()
        "trusts-names": _REF.replace('        return None, "absolute"', "        pass")
        .replace('            return None, "traversal"', "            pass")
        .replace(
            "path = os.path.join(dest, norm)",
            "path = os.path.join(dest, norm) if not norm.startswith('/') else norm",
        )
        + main,
        # reports corrupt files but leaves them in DEST
        "keeps-corrupt": _REF.replace(
            "            corrupt.append(norm)\n",
            "            corrupt.append(norm)\n            path = os.path.join(dest, norm)\n            os.makedirs(os.path.dirname(path), exist_ok=True)\n            with open(path, 'wb') as f:\n                f.write(files[norm])\n",
        )
        + main,
        # always exits 0
        "exit-zero": _REF.replace(
            '    return 1 if report["rejected"] or report["corrupt"] or report.get("missing") else 0',
            "    return 0",
        )
        + main,
        # extracts files missing from the manifest instead of rejecting them
        "extracts-unlisted": _REF.replace(
            '        if norm not in sums:\n            rejected.append([norm, "unlisted"])\n        elif hashlib',
            "        if norm in sums and hashlib",
        )
        + main,
    }
    if tier != "easy":
        # splits manifest lines on whitespace and keeps a leading "*" in the path
        wrong["naive-manifest-parse"] = (
            _REF.replace(
                '            digest, name = line.split(" ", 1)\n            if name.startswith(" "):\n                name = name[1:]\n            elif name.startswith("*"):\n                name = name[1:]\n',
                "            digest, name = line.split()\n",
            )
            + main
        )
    if tier == "hard":
        wrong["rejects-inner-dotdot"] = (
            _REF.replace('if tier == "hard":\n        if norm', "if False:\n        if norm") + main
        )
        wrong["first-duplicate-wins"] = (
            _REF.replace(
                "                files[norm] = tar.extractfile(m).read()  # a later duplicate replaces it",
                "                files.setdefault(norm, tar.extractfile(m).read())",
            )
            + main
        )
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=_tests(tier, n_files, secret),
        solution={
            "solve.sh": solve_sh_writing({"extract.py": right}, note="classify, verify, write")
        },
        wrong_solutions={
            n: {"solve.sh": solve_sh_writing({"extract.py": src}, note=f"wrong: {n}")}
            for n, src in wrong.items()
        },
        tags=("python", "security", "archives"),
        verifier_timeout_sec=240.0,
    )


_DEST = "unpacked/here"  # DEST's parent exists (the run's), DEST does not yet


def _trial(rng, n: int, tier: str, clean: bool, abs_root: str, label: str) -> hs.Case:
    """A fresh archive and manifest, and, made now, the reference's exit status, report and
    case folder afterwards (the inputs, DEST's verified files, nothing else)."""
    import tempfile

    ext = ".tar" if tier == "easy" else ".tar.gz"
    members, manifest = _archive(rng, n, tier, abs_root, clean)
    files = {"vendor drop" + ext: _tar_bytes(members, tier != "easy"), "SHA256SUMS": manifest}
    ns: dict = {}
    exec(_REF, ns)  # noqa: S102 - our own reference
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in files.items():
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
        os.mkdir(os.path.join(tmp, os.path.dirname(_DEST)))
        archive, sums = (os.path.join(tmp, name) for name in files)
        report = ns["extract"](archive, sums, os.path.join(tmp, _DEST), tier)
        after = hs.tree_of(tmp)
    status = 1 if report["rejected"] or report["corrupt"] or report.get("missing") else 0
    outside = {f"{abs_root}/abs_{i}.txt": "absent" for i in range(1 + n // 15)}
    return hs.Case(
        label,
        want=[{"status": status}, report, {"trees": {".": after}}, {"paths": outside}],
        files=files,
        tree={"dirs": [os.path.dirname(_DEST)]},
    )


def _tests(tier: str, n_files: int, secret: int) -> dict[str, str | bytes]:
    """The hidden test, as data: fresh archives drawn from the secret, the reference's exit
    status, report and folder fixed now; extract.py runs on each as nobody, and its exit
    status, report (key by key), the case folder (DEST exactly the verified files, nothing
    next to it) and the absolute paths the archive aims at are compared."""
    rng = random.Random(secret)
    trials = [(n_files, False), (max(4, n_files // 3), False), (5, True)]
    ext = ".tar" if tier == "easy" else ".tar.gz"
    cases = [  # absolute members aim at a folder of /tmp named by the secret
        _trial(rng, n, tier, clean, f"/tmp/drop-{secret}-{t}", f"trial {t}")
        for t, (n, clean) in enumerate(trials)
    ]
    argv = ["python3", "{app}/extract.py", "{in}/vendor drop" + ext, "{in}/SHA256SUMS"]
    looked = sorted(p for case in cases for p in case.want[3]["paths"])
    return hs.tests(
        answer=hs.program(
            [*argv, "{in}/" + _DEST], status=True, writable=True, trees=["."], look=looked
        ),
        cases=cases,
        compare=hs.compare(
            "each",
            of=[
                hs.compare("status", label="{label}: exit status"),
                hs.compare(
                    "json_keys",
                    tol=0,
                    parse_label="{label}: extract.py prints JSON",
                    object_label="{label}: a JSON object",
                    keys_label="{label}: report keys",
                    key_label="{label}: {key}",
                ),
                hs.compare(
                    "tree",
                    tree_label="{label}: DEST holds exactly the verified files, nothing beside it",
                ),
                hs.compare("paths", label="{label}: nothing written at the absolute paths"),
            ],
        ),
        limits=hs.limits(timeout=60, cpu=10),
        timeout=200,
    )
