"""``--scaffold mini-swe-agent``: the external scaffold preset that runs the real
mini-swe-agent (see :mod:`palaestra.scaffolds.mini_swe_agent` for its side of the bridge)."""

from __future__ import annotations

import posixpath
import sys
from typing import Any, Literal

from palaestra.sandbox.base import Mount
from palaestra.scaffolds.external import SANDBOX_AGENT_DIR, ExternalScaffold
from palaestra.scaffolds.host_process import host_python_mounts
from palaestra.scaffolds.mini_swe_agent import CONFIG, MINI_SWE_AGENT_ENV, mini_swe_agent_command


def mini_swe_agent_scaffold(
    *,
    where: Literal["sandbox", "host"] = "host",
    extra_config: list[str] | None = None,
    **overrides: Any,
) -> ExternalScaffold:
    """The external scaffold running the real mini-swe-agent (its ``mini`` CLI); its LLM calls
    go through the proxy, its commands run in the episode's sandbox (see
    :mod:`palaestra.scaffolds.mini_swe_agent`). ``where="host"``: mini-swe-agent on the host,
    commands sent to the sandbox by :class:`~palaestra.scaffolds.mini_swe_agent.
    SandboxEnvironment`. ``where="sandbox"``: mini-swe-agent itself in the sandbox (this Python
    mounted read-only, :func:`host_python_mounts`), commands run by its ``LocalEnvironment``.
    ``extra_config``: more mini-swe-agent ``-c`` specs, e.g. ``["agent.step_limit=20"]``."""
    env = {**MINI_SWE_AGENT_ENV, **overrides.pop("env", {})}
    if where == "host":
        env.setdefault("MSWEA_GLOBAL_CONFIG_DIR", ".")  # the episode's temp directory
        command = mini_swe_agent_command(extra_config=extra_config)
        scaffold = ExternalScaffold(command=command, where="host", env=env, **overrides)
        scaffold.label = "mini-swe-agent"
        return scaffold
    config_in_sandbox = "/.palaestra-mini/mini_swe_agent.yaml"
    env.setdefault("MSWEA_GLOBAL_CONFIG_DIR", f"{SANDBOX_AGENT_DIR}/mini-swe-agent")
    command = mini_swe_agent_command(
        python=sys.executable,
        config=config_in_sandbox,
        extra_config=["environment.environment_class=local", *(extra_config or ())],
        output=f"{SANDBOX_AGENT_DIR}/trajectory.json",
    )
    mounts = (
        *host_python_mounts(),
        Mount(source=CONFIG.parent, target=posixpath.dirname(config_in_sandbox)),
        *overrides.pop("mounts", ()),
    )
    scaffold = ExternalScaffold(
        command=command, where="sandbox", env=env, mounts=mounts, **overrides
    )
    scaffold.label = "mini-swe-agent"
    return scaffold
