"""Codex (``@openai/codex``) as a harness: the OpenAI Responses API, streamed, with function
calls (``exec_command``, ...) and reasoning items.

One run is ``codex exec --skip-git-repo-check --ephemeral -m <model> -c ... -`` with the
instruction on stdin, in the task's working directory. Codex is a static Rust executable in
the package's platform sub-package (``@openai/codex-linux-x64``): it is run directly, not
through the package's Node.js launcher. Its configuration is all ``-c`` overrides: the proxy
as the custom provider ``palaestra`` (``wire_api = "responses"``, the key from
``OPENAI_API_KEY``, no request or stream retries, so a failed call ends the episode instead of
asking the policy again); approvals and Codex's own sandbox off (palaestra's sandbox contains
it); no update check, analytics, feedback or history; web search, apps, plugins, sub-agents,
goals, memories, image generation and shell snapshots off. Its home is the episode's; a
task's MCP servers are ``[mcp_servers.<name>]`` tables of the config.toml there.

With a model it has no metadata for, Codex 0.171.0 offers ``exec_command`` (``cmd``),
``write_stdin``, ``request_user_input`` and ``view_image``; files are edited by running
``apply_patch`` through ``exec_command``, which Codex applies itself.
"""

from __future__ import annotations

from palaestra.scaffolds.harness.base import Harness, HarnessRun, ShellToolActions
from palaestra.scaffolds.mcp_config import render_mcp_config

PROVIDER = "palaestra"
#: The longest Codex waits for a command before answering with a session to poll (ms).
MAX_YIELD_MS = 30_000
#: Where the platform executable lies in an install (the glob's one match).
NATIVE = "node_modules/@openai/codex-*/vendor/*/bin/codex"


def overrides(run: HarnessRun) -> dict[str, str]:
    """Codex's configuration as ``-c`` overrides: key -> TOML value."""
    provider = (
        f'{{ name = "{PROVIDER}", base_url = "{run.proxy_url}/v1", env_key = "OPENAI_API_KEY", '
        'wire_api = "responses", request_max_retries = 0, stream_max_retries = 0 }'
    )
    return {
        "model_provider": f'"{PROVIDER}"',
        f"model_providers.{PROVIDER}": provider,
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


class Codex(Harness):
    name = "codex"
    package = "@openai/codex"
    version = "0.171.0"
    bin = "codex"
    wire = "openai-responses"
    actions = ShellToolActions("exec_command", "cmd", yield_time_ms=MAX_YIELD_MS)
    summary = "Codex over the OpenAI Responses API (function calls, reasoning, streaming)"

    def command(self, run: HarnessRun) -> list[str]:
        config = [a for key, value in overrides(run).items() for a in ("-c", f"{key}={value}")]
        script = (
            f'task="$1"; shift; for native in "$0"/{NATIVE}; do :; done; '
            'exec "$native" exec --skip-git-repo-check --ephemeral --color never "$@" - < "$task"'
        )
        return ["sh", "-c", script, run.install_dir, run.instruction_file, "-m", run.model, *config]

    def env(self, run: HarnessRun) -> dict[str, str]:
        return {"CODEX_HOME": run.home, "OPENAI_API_KEY": run.api_key}

    def files(self, run: HarnessRun) -> dict[str, str]:
        """The task's MCP servers as ``[mcp_servers.<name>]`` tables of its config.toml."""
        if not run.mcp_servers:
            return {}
        return {f"{run.home}/config.toml": render_mcp_config(self.name, run.mcp_servers)}
