"""Codex (``@openai/codex``, pinned) as a scaffold: ``codex exec`` in the episode's sandbox,
its model a custom provider at the episode's proxy over the OpenAI Responses API.

Codex is a static Rust executable in the npm package's platform sub-package, so the sandbox
needs no Node.js: the install (``npm install @openai/codex@0.171.0`` into
:func:`codex_dir`, made by :func:`install_codex`) is mounted read-only at
:data:`SANDBOX_CODEX_DIR` and its binary run directly.

Its configuration is all on the command line (``-c`` overrides, no ``config.toml`` to write):
the provider ``palaestra`` (``base_url`` the episode's proxy, ``wire_api = "responses"``, the
key from ``OPENAI_API_KEY``, no retries: a failed call ends the episode instead of asking the
policy again); approvals and Codex's own sandbox off (palaestra's sandbox contains it); no
update check, analytics, feedback, history, web search, apps, plugins, sub-agents or goals, so
every call it makes is a turn of the task and nothing else is tried. Its home (sessions, logs)
is a fresh directory in the sandbox.

With a model it has no metadata for, Codex 0.171.0 offers ``exec_command`` (a command, ``cmd``),
``write_stdin``, ``request_user_input`` and ``view_image``; files are edited by running
``apply_patch`` through ``exec_command``, which Codex applies itself. :class:`CodexActions` is
that protocol for the scripted policies (``oracle``, ``nop``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from palaestra.llm.types import LLMRequest, LLMResponse, ToolCall
from palaestra.sandbox.base import Mount
from palaestra.scaffolds.actions import SCRIPTED_MODEL, ProtocolActions, text_response
from palaestra.scaffolds.external import SANDBOX_AGENT_DIR, ExternalScaffold

CODEX_PACKAGE = "@openai/codex"
CODEX_VERSION = "0.171.0"
#: Where the install appears in the sandbox (read-only).
SANDBOX_CODEX_DIR = "/.palaestra-codex"
#: Codex's home in the sandbox, per episode.
CODEX_HOME = f"{SANDBOX_AGENT_DIR}/codex-home"
#: The longest Codex lets a command run before it answers with a session to poll (ms).
MAX_YIELD_MS = 30_000

#: ``-c`` overrides: key -> TOML value. ``{base_url}`` is the episode's proxy URL.
CONFIG: dict[str, str] = {
    "model_provider": '"palaestra"',
    "model_providers.palaestra": (
        '{ name = "palaestra", base_url = "{base_url}", env_key = "OPENAI_API_KEY", '
        'wire_api = "responses", request_max_retries = 0, stream_max_retries = 0 }'
    ),
    "approval_policy": '"never"',
    "sandbox_mode": '"danger-full-access"',
    "check_for_update_on_startup": "false",
    "web_search": '"disabled"',
    "analytics.enabled": "false",
    "feedback.enabled": "false",
    "history.persistence": '"none"',
    "features.multi_agent": "false",
    "features.goals": "false",
    "features.apps": "false",
    "features.plugins": "false",
    "features.shell_snapshot": "false",
    "features.image_generation": "false",
    "features.memories": "false",
}


def codex_dir() -> Path:
    """Where Codex is (or will be) installed on this machine."""
    return Path("~/.cache/palaestra/harnesses").expanduser() / f"codex-{CODEX_VERSION}"


def codex_binary(prefix: Path) -> Path | None:
    """The platform executable inside an install (``vendor/<target>/bin/codex``), if any."""
    found = sorted(prefix.glob("node_modules/@openai/codex-*/vendor/*/bin/codex"))
    return found[0] if found else None


def install_codex(prefix: Path | None = None) -> Path:
    """Install the pinned Codex with npm into ``prefix`` (default :func:`codex_dir`) unless it
    is there; blocking (seconds to a minute). Returns the prefix."""
    prefix = prefix or codex_dir()
    if codex_binary(prefix) is not None:
        return prefix
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("cannot install codex: npm is not installed (apt-get install npm)")
    prefix.mkdir(parents=True, exist_ok=True)
    spec = f"{CODEX_PACKAGE}@{CODEX_VERSION}"
    done = subprocess.run(
        [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", spec],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0 or codex_binary(prefix) is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no executable"]
        raise RuntimeError(f"cannot install codex: npm install {spec} failed: {tail[0]}")
    return prefix


class CodexActions(ProtocolActions):
    """Codex's tool protocol for the scripted policies: a command is one ``exec_command``
    call (given the longest wait, so short commands finish within the call); ending is a plain
    answer with no tool call, after which ``codex exec`` exits."""

    def run(self, request: LLMRequest, command: str, why: str = "") -> LLMResponse:
        names = {t.get("function", {}).get("name") for t in request.tools or ()}
        if "exec_command" not in names:
            raise ValueError(
                f"Codex's exec_command is not among the request's tools {sorted(filter(None, names))}"
            )
        arguments = json.dumps({"cmd": command, "yield_time_ms": MAX_YIELD_MS})
        turn = request.metadata.get("turn", 0)
        call = ToolCall(id=f"call_{turn}_exec", name="exec_command", arguments=arguments)
        return LLMResponse(
            content=why or None, tool_calls=[call], finish_reason="tool_calls", model=SCRIPTED_MODEL
        )

    def submit(self, request: LLMRequest) -> LLMResponse:
        return text_response("Done.")


class CodexScaffold(ExternalScaffold):
    """Codex as the episode's scaffold (``--scaffold codex``). ``install_dir``: the install on
    the host (default :func:`codex_dir`; :func:`install_codex` makes it). Other keyword
    arguments configure the external scaffold (``model``, ``timeout_s``, ``idle_timeout_s``)."""

    name = "codex"
    actions = CodexActions()

    def __init__(self, *, install_dir: Path | None = None, **overrides: Any) -> None:
        self.install_dir = install_dir or codex_dir()
        binary = codex_binary(self.install_dir)
        if binary is None:
            raise ValueError(
                f"--scaffold codex: {CODEX_PACKAGE}@{CODEX_VERSION} is not installed in "
                f"{self.install_dir}: install it with `python -c 'from palaestra.scaffolds.codex "
                "import install_codex; install_codex()'` (needs npm)"
            )
        inside = f"{SANDBOX_CODEX_DIR}/{binary.relative_to(self.install_dir)}"
        overrides_args = [a for key, value in CONFIG.items() for a in ("-c", f"{key}={value}")]
        # the instruction goes in on stdin: no argv length limit, no quoting
        script = (
            'task="$1"; shift; mkdir -p "$CODEX_HOME" && exec "$0" exec --skip-git-repo-check '
            '--ephemeral --color never "$@" - < "$task"'
        )
        command = [
            "sh",
            "-c",
            script,
            inside,
            "{instruction_file}",
            "-m",
            "{model}",
            *overrides_args,
        ]
        mounts = (Mount(source=self.install_dir, target=SANDBOX_CODEX_DIR),)
        env = {"CODEX_HOME": CODEX_HOME}
        super().__init__(
            command=command,
            where="sandbox",
            mounts=(*mounts, *overrides.pop("mounts", ())),
            env={**env, **overrides.pop("env", {})},
            **overrides,
        )
