"""What ``palaestra eval`` checks before any work: the policy can answer, the scaffold's tool is
installed, the run directory can take this run. Each failure is one line (:func:`fail`)."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

from palaestra.cli_errors import fail
from palaestra.env.registry import POLICIES, check_policy
from palaestra.llm.endpoint import EndpointError, check_openai_endpoint
from palaestra.llm.local_hf.loading import model_source, require_local_extra
from palaestra.run.store import RunMismatchError, check_resumable
from palaestra.sandbox.local.bwrap import BASE_ENV
from palaestra.scaffolds.harness import HARNESSES, HarnessNotReady, require_installed

#: Where the local sandbox looks for commands: the host's, under the sandbox's PATH.
LOCAL_SANDBOX_PATH = BASE_ENV["PATH"]


def check_policy_ready(policy: str, *, option: str = "--policy") -> None:
    """A known policy name, whose server answers (``openai:``) or whose model and packages are
    there (``hf:``); the cheap checks only, in well under 2 s."""
    try:
        check_policy(policy)
    except ValueError as e:
        fail(f"{option}: {e}")
    try:
        if policy.startswith("openai:"):
            check_openai_endpoint()
        elif policy.startswith("hf:"):
            require_local_extra()
            model_source(policy.removeprefix("hf:"))
    except (EndpointError, ValueError, ImportError) as e:
        fail(f"{option} {policy}: {e}")


def check_scaffold_tools(scaffold: str, sandbox: str, *, path: str = LOCAL_SANDBOX_PATH) -> None:
    """The program or package a scaffold runs is installed. ``path``: where the local sandbox
    finds commands (``terminus`` types into tmux there; a Docker image brings its own)."""
    if scaffold == "terminus" and sandbox == "local" and shutil.which("tmux", path=path) is None:
        fail(
            "--scaffold terminus types into tmux, which is not installed: install the tmux "
            "system package (apt-get install tmux), or pick another --scaffold"
        )
    if scaffold == "mini-swe-agent" and importlib.util.find_spec("minisweagent") is None:
        fail(
            "--scaffold mini-swe-agent runs mini-swe-agent, which is not installed: "
            "pip install mini-swe-agent==2.4.6 (the version palaestra is tested with)"
        )
    if scaffold in HARNESSES:
        try:
            require_installed(HARNESSES[scaffold])
        except HarnessNotReady as e:
            fail(str(e))
    if scaffold == "external":
        fail(
            "--scaffold external needs the command of your agent, which the command line cannot "
            "take: build ExternalScaffold(command=...) in Python (docs/proxy.md), or use "
            "--scaffold mini-swe-agent"
        )


def default_run_dir(env_id: str, policy: str, stamp: str) -> Path:
    """``runs/<env>-<policy>-<stamp>``, with every character a file name had better avoid
    (``:``, ``/``, ``@``, spaces) turned into ``_``."""

    def clean(part: str) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", part).strip("_") or "run"

    return Path("runs") / f"{clean(env_id)}-{clean(policy)}-{stamp}"


def check_run_dir(out_dir: Path, identity: dict[str, object]) -> None:
    """The run directory holds no run configured differently (refused before any work)."""
    try:
        check_resumable(out_dir, identity)
    except RunMismatchError as e:
        fail(str(e))


__all__ = [
    "POLICIES",
    "check_policy_ready",
    "check_run_dir",
    "check_scaffold_tools",
    "default_run_dir",
]
