"""What a mutator works with: the :class:`Site` it proposes, the :class:`Scope` it asks about a
node (source text, parents, enclosing function, edits of the original text), and the
:class:`Mutator` base class. The mutators themselves are :mod:`~.mutators`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

from palaestra.tasks.synth.edits import Edit, Offsets


@dataclass(frozen=True)
class Site:
    """One place one mutator can change: ``(path, mutator, index)`` names it."""

    path: str
    mutator: str
    index: int
    line: int
    function: int
    """The first line of the enclosing function's code object (its first decorator's)."""
    function_name: str
    edit: Edit

    @property
    def key(self) -> str:
        return f"{self.path}:{self.mutator}:{self.index}"


class Scope:
    """What a mutator may ask about a node: the source, the parents, its function."""

    def __init__(self, source: str, tree: ast.AST) -> None:
        self.offsets = Offsets(source)
        self.function: ast.AST | None = None
        self.parents: dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent

    def span(self, node: ast.AST) -> tuple[int, int]:
        o = self.offsets
        return o.at(node.lineno, node.col_offset), o.at(node.end_lineno, node.end_col_offset)

    def text(self, node: ast.AST) -> str:
        return self.offsets.text(*self.span(node))

    def replace(self, node: ast.AST, text: str) -> Edit:
        return Edit(*self.span(node), text)

    def one_line(self, *nodes: ast.AST) -> bool:
        return all(n.lineno == n.end_lineno == nodes[0].lineno for n in nodes)

    def gap_edit(self, left: ast.AST, right: ast.AST, pattern: str, new: str) -> Edit | None:
        """Replace the operator ``pattern`` found between ``left`` and ``right``."""
        start, end = self.span(left)[1], self.span(right)[0]
        found = re.search(pattern, self.offsets.text(start, end))
        if found is None:
            return None
        begin = start + len(self.offsets.text(start, end)[: found.start()].encode())
        return Edit(begin, begin + len(found.group(0).encode()), new)

    def owns_lines(self, first: ast.stmt, last: ast.stmt) -> bool:
        """Whether the statements ``first``..``last`` are alone on their lines."""
        before = self.offsets.line_text(first.lineno)[: first.col_offset]
        after = self.offsets.line_text(last.end_lineno).encode()[last.end_col_offset :].decode()
        return not before.strip() and (not after.strip() or after.strip().startswith("#"))

    def remove_lines(self, first: ast.stmt, last: ast.stmt, *, keep_pass: bool) -> Edit:
        start = self.offsets.line_start(first.lineno)
        end = self.offsets.line_end(last.end_lineno)
        indent = self.offsets.line_text(first.lineno)[: first.col_offset]
        return Edit(start, end, f"{indent}pass\n" if keep_pass else "")

    def body_of(self, stmt: ast.stmt) -> list[ast.stmt] | None:
        parent = self.parents.get(stmt)
        for name in ("body", "orelse", "finalbody", "handlers"):
            body = getattr(parent, name, None)
            if isinstance(body, list) and stmt in body:
                return body
        return None


class Mutator:
    name = ""

    def edits(self, node: ast.AST, scope: Scope) -> Iterator[Edit]:
        raise NotImplementedError
