"""Tool-use environments: :class:`ToolEnv` over generated scenarios (a CRM, a file store, a
calendar; the games of :mod:`palaestra.env.games` run on it too). See docs/tool-envs.md."""

from palaestra.env.tools.env import ToolEnv
from palaestra.env.tools.oracle import ToolOracle
from palaestra.env.tools.tool import Scenario, Tool, ToolError, ToolTask

__all__ = ["Scenario", "Tool", "ToolEnv", "ToolError", "ToolOracle", "ToolTask"]
