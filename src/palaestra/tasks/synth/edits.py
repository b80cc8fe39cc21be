"""Source edits: a byte range of a file replaced by new text, applied, undone, shown as a diff.

Mutations are made as edits of the original text, not by unparsing the tree: the change is
as small as the bug (one operator, one constant, one removed line), formatting and comments
stay as they were, and the reverse patch is a few lines.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Edit:
    """Replace bytes ``start``..``end`` of a file's UTF-8 text with ``text``."""

    start: int
    end: int
    text: str


class Offsets:
    """Byte offsets of a source's lines, to turn ast positions into :class:`Edit` ranges."""

    def __init__(self, source: str) -> None:
        self.data = source.encode()
        self.starts = [0]
        for i, byte in enumerate(self.data):
            if byte == 0x0A:
                self.starts.append(i + 1)

    def at(self, line: int, col: int) -> int:
        """The offset of ast's (1-based line, UTF-8 byte column)."""
        return self.starts[line - 1] + col

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode()

    def line_text(self, line: int) -> str:
        end = self.starts[line] if line < len(self.starts) else len(self.data)
        return self.data[self.starts[line - 1] : end].decode()

    def line_start(self, line: int) -> int:
        return self.starts[line - 1]

    def line_end(self, line: int) -> int:
        """The offset just after ``line``'s newline."""
        return self.starts[line] if line < len(self.starts) else len(self.data)


def apply(source: str, edits: list[Edit]) -> str:
    """``source`` with ``edits`` applied (they must not overlap)."""
    data = source.encode()
    ordered = sorted(edits)
    for before, after in zip(ordered, ordered[1:], strict=False):
        if after.start < before.end:
            raise ValueError(f"overlapping edits {before} and {after}")
    for edit in reversed(ordered):
        data = data[: edit.start] + edit.text.encode() + data[edit.end :]
    return data.decode()


def unified_diff(path: str, before: str, after: str) -> str:
    """A ``patch -p1`` style diff of one file (``a/path``, ``b/path``), 3 lines of context."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def changed_lines(before: str, after: str) -> int:
    """How many lines differ (removed plus added)."""
    diff = difflib.ndiff(before.splitlines(), after.splitlines())
    return sum(1 for line in diff if line[:1] in "+-")
