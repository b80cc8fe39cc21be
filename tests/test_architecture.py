"""The boundaries of docs/architecture.md, read from the imports themselves.

Every ``import palaestra...`` in the package, at module level, inside functions and under
``TYPE_CHECKING`` alike, must point down the layers; no module of palaestra's own code may grow
past 500 lines; and a palaestra module is imported inside a function only for a reason listed
here (an optional dependency that is slow or absent, or the CLI's start-up time), never to dodge
an import cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "palaestra"

#: package -> the palaestra packages its modules may import (itself always allowed).
ALLOWED: dict[str, set[str]] = {
    "sandbox": set(),
    "tasks": set(),
    "llm": set(),
    "scaffolds": {"llm", "sandbox", "tasks"},
    "verify": {"sandbox", "tasks"},
    "env": {"scaffolds", "verify", "llm", "sandbox", "tasks"},
    "run": {"env", "scaffolds", "verify", "llm", "sandbox", "tasks"},
    "rl": {"run", "env", "scaffolds", "verify", "llm", "sandbox", "tasks"},
    "serve": {"run", "env", "scaffolds", "verify", "llm", "sandbox", "tasks"},
}

#: (module, imported module) pairs imported inside a function on purpose, and why.
LAZY: dict[tuple[str, str], str] = {
    ("palaestra.env.registry", "palaestra.llm.openai_client"): "the openai SDK: ~340 ms to import",
    ("palaestra.llm", "palaestra.llm"): "llm.__getattr__ loads the openai client on first use",
    (
        "palaestra.sandbox",
        "palaestra.sandbox.docker",
    ): "aiodocker and aiohttp: ~160 ms, docker only",
    (
        "palaestra.scaffolds.tools",
        "palaestra.scaffolds.mcp_client",
    ): "the mcp SDK: ~1.3 s, the mcp extra, only for tasks declaring MCP servers",
}

MAX_LINES = 500
#: Generated task families embed whole task sources (workspaces, tests) as strings.
EXEMPT_FROM_SIZE = ("tasks/generators/", "tasks/packs/")


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "packs" not in p.relative_to(SRC).parts)


def _name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = ("palaestra", *rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, bool, int]]:
    """Every palaestra module ``path`` imports: (name, inside a function?, line)."""
    tree = ast.parse(path.read_text(), str(path))
    base = _name(path).split(".")
    if path.name != "__init__.py":
        base = base[:-1]
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            in_function.update(id(sub) for sub in ast.walk(node) if sub is not node)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                names = [".".join([*anchor, node.module] if node.module else anchor)]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            if name == "palaestra" or name.startswith("palaestra."):
                found.append((name, id(node) in in_function, node.lineno))
    return found


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_imports_point_down_the_layers() -> None:
    crossings = []
    for path in _modules():
        pkg = _package(_name(path))
        if pkg not in ALLOWED:  # cli, cli_tasks and the package root may import anything
            continue
        for name, _, line in _imports(path):
            target = _package(name)
            if target is not None and target != pkg and target not in ALLOWED[pkg]:
                crossings.append(f"{path.relative_to(SRC)}:{line} imports {name}")
    assert crossings == [], "imports across a boundary (docs/architecture.md):\n" + "\n".join(
        crossings
    )


def test_no_function_level_imports_without_a_reason() -> None:
    hidden = []
    for path in _modules():
        module = _name(path)
        for name, lazy, line in _imports(path):
            if lazy and (module, name) not in LAZY:
                hidden.append(f"{path.relative_to(SRC)}:{line} imports {name} inside a function")
    assert hidden == [], "\n".join(hidden)


def test_every_listed_lazy_import_still_exists() -> None:
    seen = {(_name(p), name) for p in _modules() for name, lazy, _ in _imports(p) if lazy}
    assert set(LAZY) - seen == set()


@pytest.mark.parametrize(
    "path",
    [p for p in _modules() if not str(p.relative_to(SRC)).startswith(EXEMPT_FROM_SIZE)],
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_no_module_is_oversized(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(SRC)} has {lines} lines; split it by concept"
