"""Real coding-agent CLIs as scaffolds (``--scaffold claude-code``, ``opencode``, ...): the
framework is :mod:`.base` (how a harness plugs in), installing them :mod:`.install`."""

from __future__ import annotations

from palaestra.scaffolds.harness.base import (
    SANDBOX_HARNESS_DIR,
    Harness,
    HarnessRun,
    HarnessScaffold,
    ShellToolActions,
)
from palaestra.scaffolds.harness.claude_code import ClaudeCode
from palaestra.scaffolds.harness.codex import Codex
from palaestra.scaffolds.harness.install import (
    HarnessNotReady,
    harness_dir,
    install,
    require_installed,
)
from palaestra.scaffolds.harness.opencode import OpenCode

#: The registered harnesses by scaffold name.
HARNESSES: dict[str, Harness] = {h.name: h for h in (ClaudeCode(), OpenCode(), Codex())}


def harness_scaffold(name: str, **kwargs: object) -> HarnessScaffold:
    """The scaffold of harness ``name`` (keyword arguments: :class:`HarnessScaffold`'s)."""
    try:
        harness = HARNESSES[name]
    except KeyError:
        raise ValueError(
            f"unknown harness {name!r}; choose one of: {', '.join(sorted(HARNESSES))}"
        ) from None
    return HarnessScaffold(harness, **kwargs)  # type: ignore[arg-type]


__all__ = [
    "HARNESSES",
    "SANDBOX_HARNESS_DIR",
    "Harness",
    "HarnessNotReady",
    "HarnessRun",
    "HarnessScaffold",
    "ShellToolActions",
    "harness_dir",
    "harness_scaffold",
    "install",
    "require_installed",
]
