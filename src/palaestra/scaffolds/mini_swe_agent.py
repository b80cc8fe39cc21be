"""mini-swe-agent as an ``external`` harness whose shell commands run in palaestra's sandbox.

mini-swe-agent runs on the host (``where="host"``) and calls its model through litellm, pointed
at the episode's proxy URL, so each of its LLM calls is an observation. Its shell commands must
run in the episode's sandbox, never on the host: :class:`SandboxEnvironment` is a
mini-swe-agent environment class that sends each command to the episode's exec URL
(``PALAESTRA_EXEC_URL``, set by the external scaffold). :data:`CONFIG` is a mini-swe-agent
config using the text protocol of palaestra's ``bash`` scaffold (one fenced ```` ```bash ````
block per response, ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` to submit), so the same
policies drive both.

With ``where="sandbox"`` (:func:`palaestra.scaffolds.mini_swe_agent_preset.mini_swe_agent_scaffold`)
mini-swe-agent runs inside the sandbox instead, with this Python and its packages mounted
read-only, and its own ``LocalEnvironment`` runs the commands there.

:class:`SandboxEnvironment` is imported by mini-swe-agent's process, not by palaestra: it
imports ``minisweagent`` (the ``dev`` extra installs it) and uses only the standard library
otherwise.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

CONFIG = Path(__file__).with_name("mini_swe_agent.yaml")
SUBMIT_SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def mini_swe_agent_command(
    *,
    python: str = "{python}",
    config: str = str(CONFIG),
    extra_config: list[str] | None = None,
    output: str = "trajectory.json",
) -> list[str]:
    """The argv that runs mini-swe-agent's ``mini`` CLI for one episode of the external
    scaffold: palaestra's config (``config``, plus ``extra_config`` specs), the model
    ``openai/{model}`` at the episode's proxy, the task's instruction, no confirmations, its
    trajectory written to ``output``. Cost tracking is off (litellm does not know the proxy's
    model; palaestra records usage and cost itself)."""
    argv = [python, "-m", "minisweagent.run.mini", "-c", config]
    for spec in extra_config or ():
        argv += ["-c", spec]
    return [
        *argv,
        "-m",
        "openai/{model}",
        "-t",
        "{instruction}",
        "--yolo",
        "--exit-immediately",
        "-o",
        output,
    ]


#: Environment variables mini-swe-agent needs to run unattended and offline.
MINI_SWE_AGENT_ENV = {
    "MSWEA_CONFIGURED": "true",
    "MSWEA_SILENT_STARTUP": "1",
    "MSWEA_COST_TRACKING": "ignore_errors",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}


class SandboxEnvironment:
    """A mini-swe-agent environment whose ``execute`` runs the command in the palaestra
    sandbox of the episode, through the external scaffold's exec URL."""

    def __init__(
        self,
        *,
        exec_url: str | None = None,
        cwd: str = "",
        env: dict[str, str] | None = None,
        timeout: int = 180,
        **_: Any,
    ) -> None:
        url = exec_url or os.environ.get("PALAESTRA_EXEC_URL")
        if not url:
            raise ValueError(
                "SandboxEnvironment needs the episode's exec URL: run mini-swe-agent through "
                "palaestra's external scaffold with where='host' (it sets PALAESTRA_EXEC_URL)"
            )
        self.exec_url = url
        self.config = {"cwd": cwd, "env": dict(env or {}), "timeout": timeout}

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        command = action.get("command", "")
        limit = timeout or self.config["timeout"]
        body = json.dumps(
            {
                "command": command,
                "cwd": cwd or self.config["cwd"] or None,
                "env": self.config["env"],
                "timeout": limit,
            }
        ).encode()
        request = urllib.request.Request(
            self.exec_url, data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=limit + 60) as r:
                result = json.loads(r.read())
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            raise RuntimeError(f"palaestra exec failed: HTTP {e.code}: {detail}") from e
        stdout, stderr = result["stdout"], result["stderr"]
        output = stdout + ("" if not stdout or stdout.endswith("\n") else "\n") + stderr
        if result["timed_out"]:
            return {
                "output": output,
                "returncode": -1,
                "exception_info": f"The command timed out after {limit} seconds and was killed.",
            }
        out = {"output": output, "returncode": result["exit_code"], "exception_info": ""}
        self._check_finished(out)
        return out

    @staticmethod
    def _check_finished(output: dict[str, Any]) -> None:
        """Raise mini-swe-agent's ``Submitted`` when the output starts with the sentinel (as
        its ``LocalEnvironment`` does)."""
        from minisweagent.exceptions import Submitted

        lines = output["output"].lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_SENTINEL and output["returncode"] == 0:
            submission = "".join(lines[1:])
            raise Submitted(
                {
                    "role": "exit",
                    "content": submission,
                    "extra": {"exit_status": "Submitted", "submission": submission},
                }
            )

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {**self.config, **platform.uname()._asdict(), **kwargs}

    def serialize(self) -> dict[str, Any]:
        cls = f"{type(self).__module__}.{type(self).__name__}"
        return {"info": {"config": {"environment": self.config, "environment_type": cls}}}


if __name__ == "__main__":  # pragma: no cover - a debugging aid
    print(" ".join(mini_swe_agent_command(python=sys.executable)))
