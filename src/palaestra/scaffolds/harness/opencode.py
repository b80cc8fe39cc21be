"""OpenCode (``opencode-ai``) as a harness: OpenAI chat completions with tool calls (its
``bash``, ``read``, ``edit``, ``write``, ``glob``, ``grep``, ... tools), streamed.

One run is ``opencode run --pure --auto --format json -m palaestra/<model> -- <instruction>``:
the proxy is an ``@ai-sdk/openai-compatible`` provider (bundled in the executable, so nothing
is fetched) defined in ``OPENCODE_CONFIG_CONTENT``; ``--title`` names the session, so no side
request asks the model for a title; ``--auto`` approves its tools' permissions; ``--pure``
loads no external plugin. Update checks, the models.dev catalogue, sharing, LSP downloads,
default plugins and Claude Code compatibility (reading ``~/.claude``) are turned off by
environment variables; its configuration, data and caches live in the episode's home. A
task's MCP servers are the configuration's ``mcp`` key: OpenCode starts a stdio server in the
sandbox and offers its tools as ``<server>_<tool>``.

Start-up cost (``docs/proxy.md``): the models catalogue it reads is an empty one written in
the home (``OPENCODE_MODELS_PATH``), not the models.dev snapshot bundled in the executable,
whose hundreds of providers it would otherwise load and merge on every run (about a third of
its start-up CPU and 110 MB of memory; the proxy's provider is defined by the configuration
alone), and its file watcher is off (a one-shot run reacts to no file change). Its
configuration directory holds a package manifest and lockfile that already list
``@opencode-ai/plugin``: at every start OpenCode otherwise installs that package there with
the npm bundled in its executable (loading npm, reading ``.npmrc`` files, asking
registry.npmjs.org, in the background of the run; it fails offline anyway, and nothing here
uses it). And Bun's top JIT tier (JavaScriptCore's FTL) is off: a run is a few seconds of
start-up code, whose FTL compiles cost more CPU than they win back (about a sixth of a run's
CPU; the DFG tier still optimises hot code).
"""

from __future__ import annotations

import json

from palaestra.scaffolds.external import last_error_line
from palaestra.scaffolds.harness.base import Harness, HarnessRun, ShellToolActions
from palaestra.scaffolds.mcp_config import render_mcp_config

PROVIDER = "palaestra"
#: The package OpenCode installs into its configuration directory at every start.
PLUGIN_PACKAGE = "@opencode-ai/plugin"


class OpenCode(Harness):
    name = "opencode"
    package = "opencode-ai"
    version = "1.18.33"
    bin = "opencode"
    wire = "openai-chat"
    actions = ShellToolActions("bash", description="Run a shell command")
    summary = "OpenCode over OpenAI chat completions (tool calls, streaming)"

    def command(self, run: HarnessRun) -> list[str]:
        return [
            "sh",
            "-c",
            'exec "$0" run --title palaestra --pure --auto --format json -m "$2" -- "$(cat "$1")"',
            run.executable,
            run.instruction_file,
            f"{PROVIDER}/{run.model}",
        ]

    def config(self, run: HarnessRun) -> dict[str, object]:
        """OpenCode's configuration: the proxy as its one provider and model."""
        return {
            "$schema": "https://opencode.ai/config.json",
            "provider": {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "palaestra proxy",
                    "options": {"baseURL": f"{run.proxy_url}/v1", "apiKey": run.api_key},
                    "models": {run.model: {"name": run.model, "tool_call": True}},
                }
            },
            "model": f"{PROVIDER}/{run.model}",
            "small_model": f"{PROVIDER}/{run.model}",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"},
            **self.mcp(run),
        }

    def mcp(self, run: HarnessRun) -> dict[str, object]:
        """The task's MCP servers as OpenCode's ``mcp`` key (none: no key)."""
        if not run.mcp_servers:
            return {}
        return json.loads(render_mcp_config(self.name, run.mcp_servers))

    def models_file(self, run: HarnessRun) -> str:
        return f"{run.home}/.cache/palaestra-models.json"

    def files(self, run: HarnessRun) -> dict[str, str]:
        return {self.models_file(run): "{}\n", **self.plugin_manifest(run)}

    def plugin_manifest(self, run: HarnessRun) -> dict[str, str]:
        """Its configuration directory as OpenCode leaves it once ``@opencode-ai/plugin`` is
        installed there (a ``node_modules`` directory, a manifest and a lockfile listing the
        package), so it starts no npm install of it. Only the names are compared; the
        directory stays empty (no plugin or custom tool of the home needs the package)."""
        config = f"{run.home}/.config/opencode"
        dependencies = {PLUGIN_PACKAGE: self.version}
        return {
            f"{config}/node_modules/.palaestra": "",
            f"{config}/package.json": json.dumps({"dependencies": dependencies}) + "\n",
            f"{config}/package-lock.json": json.dumps(
                {"packages": {"": {"dependencies": dependencies}}}
            )
            + "\n",
        }

    def env(self, run: HarnessRun) -> dict[str, str]:
        return {
            "OPENCODE_CONFIG_CONTENT": json.dumps(self.config(run)),
            "OPENCODE_MODELS_PATH": self.models_file(run),
            "OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER": "1",
            "XDG_CONFIG_HOME": f"{run.home}/.config",
            "XDG_DATA_HOME": f"{run.home}/.local/share",
            "XDG_CACHE_HOME": f"{run.home}/.cache",
            "XDG_STATE_HOME": f"{run.home}/.local/state",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_CLAUDE_CODE": "1",
            "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
            "OPENCODE_DISABLE_TERMINAL_TITLE": "1",
            "BUN_JSC_useFTLJIT": "0",
        }

    def last_error(self, output: str) -> str:
        """The message of its last ``error`` event (``--format json``), else the last error
        line of its output."""
        for line in reversed(output.splitlines()):
            line = line.strip()
            if not line.startswith("{") or '"error"' not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            error = event.get("error") if isinstance(event, dict) else None
            if isinstance(error, dict):
                data = error.get("data") if isinstance(error.get("data"), dict) else {}
                message = data.get("message") or error.get("message") or error.get("name")
                if message:
                    return f"opencode: {str(message)[:300]}"
        return last_error_line(output)
