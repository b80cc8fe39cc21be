"""Read a Dockerfile: its instructions, and Docker's shell-word rules for their arguments.

:func:`parse_dockerfile` splits a Dockerfile into :class:`Instruction` s (continuation lines
joined, comments and blank lines dropped; the parser directives ``# syntax=`` and ``# check=``
are ignored, ``# escape=`` other than ``\\`` is refused). :func:`split_words`,
:func:`expand_word` and :func:`json_list` read an instruction's arguments: quotes, escapes and
variables (``$NAME``, ``${NAME}``, ``${NAME:-default}``, ``${NAME-default}``, ``${NAME:+alt}``,
``${NAME+alt}``), and the exec (JSON) form. What the instructions do is up to the caller (see
:mod:`palaestra.sandbox.dockerfile_replay`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

_DIRECTIVE = re.compile(r"^\s*#\s*(syntax|escape|check)\s*=\s*(.*?)\s*$", re.IGNORECASE)
#: A valid ``ARG`` / ``ENV`` / ``$``-reference name.
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class DockerfileError(ValueError):
    """A Dockerfile the local backend cannot replay, or cannot read."""

    def __init__(self, problem: str, *, fix: str, line: int | None = None) -> None:
        self.problem = problem
        self.fix = fix
        self.line = line
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}{problem}. Fix: {fix}")


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction, continuation lines joined and comment lines removed."""

    line: int
    """1-based line number where the instruction starts."""
    keyword: str
    """The instruction, upper-cased: ``FROM``, ``COPY``..."""
    value: str
    """Everything after the keyword, verbatim (variables not substituted)."""


def parse_dockerfile(text: str) -> list[Instruction]:
    """Split a Dockerfile into instructions: continuations joined, comments and blanks dropped."""
    in_directives = True
    instructions: list[Instruction] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        if in_directives:
            directive = _DIRECTIVE.match(raw)
            if directive:
                name, value = directive.group(1).lower(), directive.group(2)
                if name == "escape" and value != "\\":
                    raise DockerfileError(
                        f"the escape directive {value!r} is not supported (it is meant for "
                        "Windows images)",
                        fix="remove the # escape= line and escape with \\",
                        line=number,
                    )
                continue
            in_directives = False
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue  # comments and empty lines are dropped, also between continuation lines
        if not parts:
            start = number
        body = raw.rstrip()
        if body.endswith("\\"):
            parts.append(body[:-1])
            continue
        parts.append(body)
        instructions.append(_instruction(start, "".join(parts)))
        parts = []
    if parts:
        instructions.append(_instruction(start, "".join(parts)))
    return instructions


def _instruction(line: int, text: str) -> Instruction:
    keyword, *rest = text.split(None, 1)
    return Instruction(line, keyword.upper(), rest[0].strip() if rest else "")


def json_list(text: str) -> list[str] | None:
    """The exec (JSON) form of an instruction's arguments, or None when it is not one."""
    if not text.startswith("["):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None  # Docker reads it in the shell form then
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def split_words(text: str) -> list[str]:
    """Split on whitespace outside quotes, keeping quotes and escapes for :func:`expand_word`."""
    words: list[str] = []
    current: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and quote != "'" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c.isspace():
            if current:
                words.append("".join(current))
                current = []
            i += 1
            continue
        current.append(c)
        i += 1
    if current:
        words.append("".join(current))
    return words


def expand_word(word: str, variables: Mapping[str, str | None]) -> str:
    """Docker's shell-word processing: quote removal, escapes and variable substitution."""
    out: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(word):
        c = word[i]
        if quote == "'":
            if c == "'":
                quote = None
            else:
                out.append(c)
            i += 1
        elif c == "\\" and i + 1 < len(word):
            following = word[i + 1]
            if quote == '"' and following not in '"$\\':
                out.append(c)  # inside double quotes only \" \$ \\ are escapes
            out.append(following)
            i += 2
        elif c in "'\"" and quote is None:
            quote = c
            i += 1
        elif c == '"' and quote == '"':
            quote = None
            i += 1
        elif c == "$":
            value, i = _substitute(word, i, variables)
            out.append(value)
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _substitute(word: str, start: int, variables: Mapping[str, str | None]) -> tuple[str, int]:
    """The value of the ``$...`` reference at ``word[start]`` and the index after it."""
    if word.startswith("${", start):
        depth, end = 0, start + 2
        while end < len(word):
            if word.startswith("${", end):
                depth += 1
                end += 1
            elif word[end] == "}":
                if depth == 0:
                    break
                depth -= 1
            end += 1
        else:
            raise ValueError(f"unterminated ${{...}} in {word!r}")
        body = word[start + 2 : end]
        name = VARIABLE_NAME.match(body)
        if name is None:
            raise ValueError(f"invalid variable reference ${{{body}}}")
        value = variables.get(name.group())
        operator, operand = _operator(body[name.end() :])
        if operator is None:
            if operand:
                raise ValueError(f"unsupported variable substitution ${{{body}}}")
            return value or "", end + 1
        is_set = value is not None and (value != "" or ":" not in operator)
        use_operand = not is_set if operator.endswith("-") else is_set
        if use_operand:
            return expand_word(operand, variables), end + 1
        return ((value or "") if operator.endswith("-") else ""), end + 1
    name = VARIABLE_NAME.match(word, start + 1)
    if name is None:
        return "$", start + 1
    return variables.get(name.group()) or "", name.end()


def _operator(rest: str) -> tuple[str | None, str]:
    for operator in (":-", ":+", "-", "+"):
        if rest.startswith(operator):
            return operator, rest[len(operator) :]
    return None, rest
