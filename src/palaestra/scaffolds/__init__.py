"""Scaffolds: agent harnesses that run inside the environment, and the ``oracle`` and ``nop``
policies that speak their protocols."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from palaestra.scaffolds.base import EndReason, Outcome, Scaffold
from palaestra.scaffolds.bash import BashScaffold, BashScaffoldConfig
from palaestra.scaffolds.bash_compact import CompactBashScaffold, CompactBashScaffoldConfig
from palaestra.scaffolds.external import ExternalScaffold
from palaestra.scaffolds.external_config import ExternalScaffoldConfig
from palaestra.scaffolds.harness import HARNESSES, harness_scaffold
from palaestra.scaffolds.mini_swe_agent_preset import mini_swe_agent_scaffold
from palaestra.scaffolds.oracle import NopPolicy, OraclePolicy
from palaestra.scaffolds.terminus import TerminusScaffold, TerminusScaffoldConfig
from palaestra.scaffolds.tools import ToolsScaffold, ToolsScaffoldConfig

#: Scaffold factories by name. ``mini-swe-agent`` is the external scaffold preset that runs the
#: real mini-swe-agent (see :mod:`palaestra.scaffolds.mini_swe_agent`); each harness of
#: :data:`~palaestra.scaffolds.harness.HARNESSES` (real coding-agent CLIs) is one too.
SCAFFOLDS: dict[str, Callable[..., Scaffold]] = {
    "bash": BashScaffold,
    "bash-compact": CompactBashScaffold,
    "tools": ToolsScaffold,
    "terminus": TerminusScaffold,
    "external": ExternalScaffold,
    "mini-swe-agent": mini_swe_agent_scaffold,
    **{name: functools.partial(harness_scaffold, name) for name in HARNESSES},
}


def make_scaffold(name: str, **kwargs: Any) -> Scaffold:
    """A scaffold by name, configured by keyword arguments (e.g. ``step_limit=20``)."""
    try:
        cls = SCAFFOLDS[name]
    except KeyError:
        raise ValueError(
            f"unknown scaffold {name!r}; choose one of: {', '.join(sorted(SCAFFOLDS))}"
        ) from None
    return cls(**kwargs)


__all__ = [
    "BashScaffold",
    "EndReason",
    "BashScaffoldConfig",
    "CompactBashScaffold",
    "CompactBashScaffoldConfig",
    "ExternalScaffold",
    "ExternalScaffoldConfig",
    "NopPolicy",
    "OraclePolicy",
    "Outcome",
    "Scaffold",
    "SCAFFOLDS",
    "TerminusScaffold",
    "TerminusScaffoldConfig",
    "ToolsScaffold",
    "ToolsScaffoldConfig",
    "make_scaffold",
]
