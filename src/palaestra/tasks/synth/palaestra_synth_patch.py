"""Apply a unified diff (``patch -p1`` style) with the standard library alone.

``python3 palaestra_synth_patch.py PATCH [ROOT]``: each hunk's old lines must be found where
the hunk says (or nearby); a hunk that does not match stops with exit code 1 and nothing
written for its file.
"""

import re
import sys
from pathlib import Path

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _files(lines):
    path, hunks, hunk = None, [], None
    for line in lines:
        if line.startswith("--- "):
            if path is not None:
                yield path, hunks
            path, hunks, hunk = None, [], None
        elif line.startswith("+++ "):
            path = line[4:].strip().split("\t")[0].split("/", 1)[1]
        elif m := _HUNK.match(line):
            hunk = (int(m.group(1)), [], [])
            hunks.append(hunk)
        elif hunk is not None and line[:1] in (" ", "-", "+"):
            if line[:1] in (" ", "-"):
                hunk[1].append(line[1:])
            if line[:1] in (" ", "+"):
                hunk[2].append(line[1:])
        elif line.startswith("\\") and hunk is not None:  # no newline at end of file
            for side in (hunk[1], hunk[2]):
                if side and side[-1].endswith("\n"):
                    side[-1] = side[-1][:-1]
    if path is not None:
        yield path, hunks


def apply(patch: str, root: Path) -> None:
    for path, hunks in _files(patch.splitlines(keepends=True)):
        target = root / path
        lines = target.read_text(encoding="utf-8").splitlines(keepends=True)
        shift = 0
        for start, old, new in hunks:
            at = start - 1 + shift
            for offset in sorted(range(-50, 51), key=abs):
                if at + offset >= 0 and lines[at + offset : at + offset + len(old)] == old:
                    at += offset
                    break
            else:
                sys.exit(f"hunk at line {start} of {path} does not match")
            lines[at : at + len(old)] = new
            shift += len(new) - len(old)
        target.write_text("".join(lines), encoding="utf-8")


if __name__ == "__main__":
    root = Path(sys.argv[2] if len(sys.argv) > 2 else ".")
    apply(Path(sys.argv[1]).read_text(encoding="utf-8"), root)
