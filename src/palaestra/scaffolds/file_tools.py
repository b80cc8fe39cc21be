"""The ``tools`` scaffold's file tools, ``view`` and ``edit``, over the sandbox API.

They reach any path the agent can write (commands run in the sandbox read and write the file);
a problem is a :class:`~palaestra.scaffolds.tool_calls.ToolCallError` whose text answers the
call. The protocol around them (schemas, dispatch, format errors) is
:mod:`palaestra.scaffolds.tools`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from palaestra.sandbox.base import Sandbox
from palaestra.scaffolds.tool_calls import ToolCallError


def numbered(lines: list[str], first: int) -> str:
    """Lines prefixed with their 1-based numbers, like ``cat -n``."""
    return "\n".join(f"{n:6d}\t{line}" for n, line in enumerate(lines, start=first))


def match_lines(text: str, needle: str) -> list[int]:
    """The 1-based line numbers where each (possibly overlapping) occurrence of needle starts."""
    lines, start = [], text.find(needle)
    while start != -1:
        lines.append(text.count("\n", 0, start) + 1)
        start = text.find(needle, start + 1)
    return lines


# Prints "D" and a listing, "F", the octal mode and the content, "O" for anything else (a
# device, a socket), or "N" when absent.
_VIEW_SCRIPT = """\
if [ -d "$1" ]; then echo D; cd -- "$1" && find . -mindepth 1 -maxdepth 2 -not -path '*/.*' | sort
elif [ -f "$1" ]; then echo F; stat -c %a -- "$1"; cat -- "$1"
elif [ -e "$1" ]; then echo O
else echo N; fi"""


async def read_path(sandbox: Sandbox, path: str) -> tuple[str, str, str]:
    """(kind, mode, body): kind is D (directory), F (file), O (other) or N (absent)."""
    res = await sandbox.exec(["sh", "-c", _VIEW_SCRIPT, "sh", path], timeout=60)
    kind, _, rest = res.stdout.partition("\n")
    if kind not in ("D", "F", "O", "N"):
        raise ToolCallError(f"Error: cannot read {path}: {res.output.strip()}")
    if res.truncated:
        raise ToolCallError(
            f"Error: {path} is too large for this tool; use `bash` (head, sed -n, grep)."
        )
    if kind == "F":
        mode, _, body = rest.partition("\n")
        if res.exit_code != 0:
            raise ToolCallError(f"Error: cannot read {path}: {res.stderr.strip()}")
        return kind, mode, body
    return kind, "", rest


async def view_path(
    sandbox: Sandbox, path: str, args: dict[str, Any], view_lines: int, cap: Callable[[str], str]
) -> str:
    """The ``view`` tool on the absolute ``path``: a directory's listing (two levels, hidden
    entries left out), or a file's numbered lines (``args["view_range"]``, else the first
    ``view_lines``); ``cap`` shortens what is long."""
    kind, _, body = await read_path(sandbox, path)
    if kind == "N":
        raise ToolCallError(f"Error: {path} does not exist.")
    if kind == "O":
        raise ToolCallError(f"Error: {path} is neither a regular file nor a directory.")
    if kind == "D":
        if "view_range" in args:
            raise ToolCallError("Error: view_range applies to files, not directories.")
        listing = "\n".join(line.removeprefix("./") for line in body.splitlines())
        return cap(
            f"Files and directories in {path}, two levels deep (hidden ones left out):\n{listing}"
        )
    if "\0" in body:
        return f"{path} is a binary file; inspect it with `bash` (xxd, file, od)."
    lines = body.splitlines()
    total = len(lines)
    if "view_range" in args:
        first, last = args["view_range"]
        last = total if last == -1 else last
        if not 1 <= first <= max(total, 1) or last < first or last > total:
            raise ToolCallError(
                f"Error: view_range {args['view_range']} is invalid for {path}, which has "
                f"{total} lines: give [first, last] with 1 <= first <= last <= {total} "
                "(last may be -1 for the end)."
            )
        return cap(numbered(lines[first - 1 : last], first))
    if total == 0:
        return f"{path} is empty."
    shown = lines[:view_lines]
    text = numbered(shown, 1)
    if total > len(shown):
        text += (
            f"\n[{path} has {total} lines; lines 1-{len(shown)} shown. "
            f"Use view_range to see more, e.g. [{len(shown) + 1}, {total}].]"
        )
    return cap(text)


async def edit_path(
    sandbox: Sandbox, path: str, old: str, new: str, cap: Callable[[str], str]
) -> str:
    """The ``edit`` tool on the absolute ``path``: replace ``old``, which must occur exactly
    once, by ``new``, keeping the file's mode; an empty ``old`` creates a file that does not
    exist yet. Its answer shows the edited lines."""
    kind, mode, text = await read_path(sandbox, path)
    if kind in ("D", "O"):
        raise ToolCallError(f"Error: {path} is not a regular file; edit works on files.")
    if old == "":
        if kind == "F":
            raise ToolCallError(
                f"Error: {path} already exists; an empty old_str only creates new files. "
                "To change it, give the exact text to replace as old_str (view it first)."
            )
        await sandbox.write_file(path, new)
        return f"Created {path} ({len(new.splitlines())} lines)."
    if kind == "N":
        raise ToolCallError(
            f"Error: {path} does not exist. To create it, call edit with an empty old_str."
        )
    if "\ufffd" in text:
        raise ToolCallError(
            f"Error: {path} holds bytes that are not UTF-8 text; edit it with `bash`."
        )
    where = match_lines(text, old)
    if not where:
        raise ToolCallError(
            f"Error: old_str was not found in {path} (0 matches). It must match exactly, "
            "whitespace and indentation included; view the file and copy the text."
        )
    if len(where) > 1:
        raise ToolCallError(
            f"Error: old_str occurs {len(where)} times in {path} (starting on lines "
            f"{', '.join(map(str, where))}); it must occur exactly once. Include more "
            "surrounding lines in old_str to make it unique."
        )
    updated = text.replace(old, new, 1)
    await sandbox.write_file(path, updated, mode=int(mode or "644", 8))
    first = where[0]
    lines = updated.splitlines()
    start = max(first - 3, 1)
    end = min(first + new.count("\n") + 3, len(lines))
    snippet = numbered(lines[start - 1 : end], start)
    return cap(f"Edited {path}. Lines {start}-{end} now read:\n{snippet}")
