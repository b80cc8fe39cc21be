"""The error catalogue: :class:`TaskError`, and the wording that turns a pydantic validation
error or a TOML syntax error into one line naming the file, the field and the fix."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


class TaskError(ValueError):
    """A task that cannot be loaded, or cannot run as asked: names the file, the field and the fix.

    ``path`` is the file (or directory) at fault, ``field`` the dotted task.toml field when there
    is one (``verifier.timeout_sec``), ``line`` the line when known, ``fix`` what to do.
    ``str()`` reads ``<path>[ line N]: [<section>] <key>: <problem>. Fix: <fix>``. An error that
    stands for several (all the problems of one task, or every task :func:`load_tasks` could
    not load) lists them in ``errors``.
    """

    def __init__(
        self,
        path: Path,
        problem: str,
        *,
        field: str | None = None,
        fix: str | None = None,
        line: int | None = None,
        errors: Sequence[TaskError] = (),
    ) -> None:
        self.path = path
        self.problem = problem
        self.field = field
        self.fix = fix
        self.line = line
        self.errors = tuple(errors)
        super().__init__(self._render())

    def _render(self) -> str:
        text = f"{self.path}"
        if self.line is not None:
            text += f" line {self.line}"
        text += ": "
        if self.field is not None:
            text += f"{field_label(self.field)}: "
        text += self.problem.rstrip(".")
        if self.fix:
            text += f". Fix: {self.fix}"
        for error in self.errors:
            text += "\n  - " + str(error).replace("\n", "\n    ")
        return text


def field_label(dotted: str) -> str:
    """How a dotted task.toml field is shown: ``verifier.timeout_sec`` -> ``[verifier] timeout_sec``."""
    table, _, key = dotted.rpartition(".")
    return f"[{table}] {key}" if table else key


def toml_syntax_error(path: Path, error: tomllib.TOMLDecodeError) -> TaskError:
    """A task.toml that is not TOML, with the line it fails at."""
    message = str(error)
    position = _TOML_POSITION.search(message)
    line = int(position.group(1)) if position else None
    if position:
        message = f"{message[: position.start()]} (column {position.group(2)})"
    return TaskError(
        path,
        f"invalid TOML: {message}",
        line=line,
        fix="correct the TOML syntax (strings need quotes, sections are written [section])",
    )


# Field-specific wording for validation errors: (problem, fix). A None problem keeps the
# validator's own message. Looked up by dotted field first, then by the last key.
_FIELD_HINTS: dict[str, tuple[str | None, str]] = {
    "timeout_sec": (
        "must be a positive number",
        "set timeout_sec to seconds, e.g. timeout_sec = 600.0",
    ),
    "build_timeout_sec": (
        "must be a positive number",
        "set build_timeout_sec to seconds, e.g. build_timeout_sec = 600.0",
    ),
    "cpus": ("must be a positive number", "set cpus to a number of CPUs, e.g. cpus = 2"),
    "memory_mb": ("must be a positive whole number of MB", "e.g. memory_mb = 4096"),
    "storage_mb": ("must be a positive whole number of MB", "e.g. storage_mb = 10240"),
    "gpus": ("must be a whole number, 0 or more", "e.g. gpus = 1"),
    "memory": (None, 'use memory_mb = 4096 (the legacy memory takes strings like "4G")'),
    "storage": (None, 'use storage_mb = 10240 (the legacy storage takes strings like "10G")'),
    "network_mode": (
        'must be "public", "no-network" or "allowlist"',
        'set network_mode = "public" or network_mode = "no-network"',
    ),
    "allowed_hosts": (None, 'set network_mode = "allowlist", or remove allowed_hosts'),
    "os": ('must be "linux" or "windows"', 'set os = "linux"'),
    "env": ("must be a table of strings", 'write env = { NAME = "value" }'),
    "schema_version": ("must be a string", 'quote it: schema_version = "1.4"'),
    "version": ("must be a string", 'quote it: schema_version = "1.4"'),
    "task.name": (None, 'name the task "org/name", e.g. name = "my-org/my-task"'),
    "user": ("must be a user name or a numeric UID", 'e.g. user = "root" or user = 1000'),
    "mcp_servers": (None, "give an sse or streamable-http server a url, a stdio server a command"),
    "source": (None, "name a path in the sandbox without '..' parts, e.g. source = \"/app/out\""),
    "destination": (
        None,
        'give a relative path inside the episode\'s artifacts/, e.g. destination = "logs/app"',
    ),
    "service": (
        'must be a Docker Compose service name (letters, digits, "_", "." and "-")',
        "leave service out: palaestra runs the main service only",
    ),
    "command": ("must be a shell command string", 'e.g. command = "pg_dump app > /logs/db.sql"'),
    "verifier.environment": (
        None,
        "remove [verifier.environment]: palaestra runs the verifier in the agent's sandbox",
    ),
}

_TYPE_FIXES = {
    "bool_type": "set {key} = true or false",
    "bool_parsing": "set {key} = true or false",
    "string_type": 'quote the value: {key} = "..."',
    "int_type": "set {key} to a whole number",
    "int_parsing": "set {key} to a whole number",
    "int_from_float": "set {key} to a whole number",
    "float_type": "set {key} to a number",
    "float_parsing": "set {key} to a number",
    "list_type": 'set {key} to a list, e.g. {key} = ["..."]',
    "dict_type": "make {key} a table",
    "model_type": "make {key} a table",
    "model_attributes_type": "make {key} a table",
    "missing": "add {key}",
    "string_too_short": "give {key} a non-empty value",
}


def validation_errors(path: Path, raw: dict[str, Any], error: ValidationError) -> list[TaskError]:
    problems: list[TaskError] = []
    seen: set[str | None] = set()
    details = [(_toml_field(raw, d), d) for d in error.errors(include_url=False)]
    fields = [dotted or "" for dotted, _ in details]
    for dotted, detail in details:
        if dotted in seen:
            continue  # one value failing each member of a union is one problem
        if detail["type"].endswith("_type") and any(
            f.startswith((f"{dotted}.", f"{dotted}[")) for f in fields
        ):
            continue  # a union member it is not (a table, not a string): its inner error says
        seen.add(dotted)
        key = re.sub(r"\[\d+\]$", "", (dotted or "").rpartition(".")[2])
        kind = detail["type"]
        hint_problem, hint_fix = (
            _FIELD_HINTS.get(dotted or "") or _FIELD_HINTS.get(key) or (None, None)
        )
        if kind == "missing":
            problem = "is required"
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            problem = "must be a table"
        elif hint_problem and kind != "value_error":
            problem = hint_problem
        else:
            problem = detail["msg"].removeprefix("Value error, ")
            problem = problem[:1].lower() + problem[1:]
        if kind not in ("missing", "value_error"):
            shown = repr(detail["input"])
            problem += f", got {shown if len(shown) <= 60 else shown[:57] + '...'}"
        if hint_fix is None and kind == "literal_error":
            hint_fix = f"use one of {detail['ctx']['expected']}"
        elif hint_fix is None:
            hint_fix = _TYPE_FIXES.get(kind, "correct {key}").format(key=key or "the value")
        problems.append(TaskError(path, problem, field=dotted, fix=hint_fix))
    return problems


def _toml_field(raw: dict[str, Any], detail: ErrorDetails) -> str | None:
    """The dotted TOML path of the value a pydantic error is about.

    pydantic's locations also name union members and model internals (``('cpus', 'int')``);
    walking the location through the TOML data keeps only the part the user wrote.
    """
    loc = list(detail["loc"])
    if loc[:1] == ["schema_version"] and "schema_version" not in raw and "version" in raw:
        loc[0] = "version"
    parts: list[str] = []
    node: Any = raw
    for i, item in enumerate(loc):
        if isinstance(node, dict) and isinstance(item, str) and item in node:
            parts.append(item)
            node = node[item]
        elif isinstance(node, dict) and isinstance(item, str) and item[:1].isupper():
            continue  # a union member's model name (``ArtifactConfig``): not a key
        elif isinstance(node, list) and isinstance(item, int) and item < len(node):
            parts[-1] += f"[{item}]"
            node = node[item]
        else:
            if detail["type"] == "missing" and i == len(loc) - 1 and isinstance(item, str):
                parts.append(item)
            break
    return ".".join(parts) or None
