"""The harness framework: a coding-agent CLI from npm (Claude Code, OpenCode, Codex, ...) as a
registered scaffold, run in the episode's sandbox against palaestra's proxy.

**How a harness plugs in.** Subclass :class:`Harness`, fill in its class attributes and its
four methods, and add an instance to :data:`palaestra.scaffolds.harness.HARNESSES`; it then is
``--scaffold <name>``, ``palaestra harness install <name>`` installs it, and the ``oracle`` and
``nop`` policies speak its tool protocol through its :attr:`Harness.actions`:

* ``name`` (the scaffold's name), ``package`` and ``version`` (the npm package, pinned
  exactly), ``bin`` (its executable in ``node_modules/.bin``), ``wire`` (the API it calls:
  ``"anthropic-messages"``, ``"openai-chat"`` or ``"openai-responses"``: the proxy route its
  calls arrive at), ``actions`` (how a scripted policy runs a shell command and ends in its
  protocol, :class:`ShellToolActions`).
* :meth:`Harness.command`: the argv of one non-interactive run, given a :class:`HarnessRun`
  (the executable's path in the sandbox, the instruction file, the model, a writable home).
* :meth:`Harness.env`: its environment: the proxy URL and key in the variables it reads,
  telemetry, update checks and sign-in turned off. Nothing but the proxy is reachable anyway
  (the sandbox has no network), so what the harness still tries only slows it down.
* :meth:`Harness.files`: configuration files to write in the sandbox before it starts
  (absolute path -> text), e.g. a provider definition pointing at the proxy.
* The task's MCP servers (``[[environment.mcp_servers]]``) are in
  :attr:`HarnessRun.mcp_servers`: a harness that speaks MCP writes them into its own MCP
  configuration (:func:`palaestra.scaffolds.mcp_config.render_mcp_config`), so the CLI starts a
  stdio server inside the sandbox itself and offers its tools. Their headers were checked
  against ``PALAESTRA_MCP_HEADER_ENV`` before the run, and the allowed variables they name are
  in the harness's environment.
* :meth:`Harness.last_error`: the harness's own last error lines in its output, which become
  the first line of a failed episode's error message.

**How it runs.** :class:`HarnessScaffold` is the ``external`` scaffold with ``where="sandbox"``
(:mod:`palaestra.scaffolds.external`): the install (``~/.cache/palaestra/harnesses/
<name>-<version>``, :mod:`.install`) is bind-mounted read-only at :data:`SANDBOX_HARNESS_DIR`
in every sandbox (the same files on the local and the Docker backend; never installed per
episode), the proxy's unix socket is mounted too, and an in-sandbox forwarder gives the
harness a 127.0.0.1 URL. Every LLM call it makes is one observation, recorded with the
policy's token ids like a built-in scaffold's turn (``palaestra.rl.to_trajectories``); the
episode's agent part ends when the harness exits (status 0: submitted), and the verifier runs.
"""

from __future__ import annotations

import abc
import asyncio
import json
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from palaestra.llm.types import LLMRequest, LLMResponse, ToolCall
from palaestra.sandbox.base import Mount
from palaestra.scaffolds.actions import SCRIPTED_MODEL, ProtocolActions, text_response
from palaestra.scaffolds.external import SANDBOX_AGENT_DIR, ExternalScaffold, last_error_line
from palaestra.scaffolds.harness.install import (
    HarnessNotReady,
    executable,
    harness_dir,
    interpreter,
    require_installed,
)
from palaestra.scaffolds.mcp_config import header_env
from palaestra.scaffolds.mcp_headers import check_header_variables
from palaestra.tasks.config import MCPServerConfig

if TYPE_CHECKING:
    from palaestra.sandbox.base import Sandbox
    from palaestra.scaffolds.proxy import ProxyEpisode
    from palaestra.tasks import Task

Wire = Literal["anthropic-messages", "openai-chat", "openai-responses"]

#: Where a harness's install appears in the sandbox (read-only).
SANDBOX_HARNESS_DIR = "/.palaestra-harness"
#: The harness's home in the sandbox: its configuration, sessions and caches, per episode.
SANDBOX_HOME = f"{SANDBOX_AGENT_DIR}/home"


@dataclass(frozen=True)
class HarnessRun:
    """What one run of a harness needs, as paths and strings inside the sandbox.

    ``proxy_url`` is the episode's proxy root without ``/v1`` (``http://127.0.0.1:<port>/e/
    <token>``; the port is filled in by the forwarder, in argv and environment alike);
    ``api_key`` the episode's token (the proxy also accepts it as the key); ``mcp_servers``
    the task's MCP servers."""

    executable: str
    install_dir: str
    home: str
    workdir: str
    instruction_file: str
    model: str
    proxy_url: str
    api_key: str
    mcp_servers: tuple[MCPServerConfig, ...] = ()


class ShellToolActions(ProtocolActions):
    """A harness's tool protocol for the scripted policies: running a command is one call of
    its shell tool (``tool``, the command in ``argument``, plus ``extra`` arguments); ending
    is a plain text answer with no tool call (a harness in non-interactive mode then exits)."""

    def __init__(self, tool: str, argument: str = "command", **extra: Any) -> None:
        self.tool = tool
        self.argument = argument
        self.extra = extra

    def run(self, request: LLMRequest, command: str, why: str = "") -> LLMResponse:
        names = {t.get("function", {}).get("name") for t in request.tools or ()}
        if self.tool not in names:
            raise ValueError(
                f"this harness's shell tool `{self.tool}` is not among the request's tools "
                f"{sorted(n for n in names if n)}"
            )
        turn = request.metadata.get("turn", 0)
        arguments = json.dumps({self.argument: command, **self.extra})
        call = ToolCall(id=f"call_{turn}_{self.tool}", name=self.tool, arguments=arguments)
        return LLMResponse(
            content=why or None, tool_calls=[call], finish_reason="tool_calls", model=SCRIPTED_MODEL
        )

    def submit(self, request: LLMRequest) -> LLMResponse:
        return text_response("Done.")


class Harness(abc.ABC):
    """One coding-agent CLI; see the module docstring for how to plug one in."""

    name: ClassVar[str]
    package: ClassVar[str]
    version: ClassVar[str]
    bin: ClassVar[str]
    wire: ClassVar[Wire]
    actions: ClassVar[ProtocolActions]
    #: What the harness is, one line (``palaestra harness list``, ``eval --help``).
    summary: ClassVar[str] = ""

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    @abc.abstractmethod
    def command(self, run: HarnessRun) -> list[str]:
        """The argv of one non-interactive run on the task in ``run.instruction_file``."""

    def env(self, run: HarnessRun) -> dict[str, str]:
        """The harness's environment (added to the external scaffold's, which has the proxy
        in ``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL`` and their keys)."""
        return {}

    def files(self, run: HarnessRun) -> dict[str, str]:
        """Files to write in the sandbox before the run: absolute path -> text."""
        return {}

    def last_error(self, output: str) -> str:
        """The harness's own last error line in its output (stdout and stderr together)."""
        return last_error_line(output)


class HarnessScaffold(ExternalScaffold):
    """A :class:`Harness` as a scaffold (see the module docstring). ``install_dir``: the
    harness's install on the host (default: :func:`~.install.harness_dir`); it must exist when
    the first episode starts (``palaestra harness install NAME``). Other keyword arguments
    configure the external scaffold (``model``, ``env``, ``timeout_s``, ``idle_timeout_s``)."""

    def __init__(self, harness: Harness, *, install_dir: Path | None = None, **overrides: Any):
        self.harness = harness
        self.install_dir = install_dir or harness_dir(harness)
        self._mounted = f"{SANDBOX_HARNESS_DIR}/{self.install_dir.name}"
        executable = f"{self._mounted}/node_modules/.bin/{harness.bin}"
        mounts = (
            Mount(source=self.install_dir, target=self._mounted),
            *overrides.pop("mounts", ()),
        )
        super().__init__(command=[executable], where="sandbox", mounts=mounts, **overrides)
        self.name = harness.name
        self.label = harness.label
        self.actions = harness.actions
        self._loader: str | None = None

    def sandbox_mounts(self) -> tuple[Mount, ...]:
        require_installed(self.harness, self.install_dir)
        return super().sandbox_mounts()

    def _values(self, task: Task, sandbox: Sandbox, ep: ProxyEpisode) -> dict[str, str]:
        """The placeholders' values and the task's MCP servers (as JSON), their headers
        checked against the allow-list before anything is written or started."""
        servers = task.config.environment.mcp_servers
        for server in servers:
            check_header_variables(server)
        dumped = json.dumps([s.model_dump(mode="json") for s in servers])
        return {**super()._values(task, sandbox, ep), "mcp_servers": dumped}

    async def _needed_loader(self) -> str:
        """The dynamic loader the harness's executable needs in the sandbox ("" for none),
        read from the install once."""
        if self._loader is None:
            exe = executable(self.harness, self.install_dir).resolve()
            self._loader = await asyncio.to_thread(interpreter, exe) or ""
        return self._loader

    def _run_of(self, values: dict[str, str]) -> HarnessRun:
        servers = json.loads(values.get("mcp_servers", "[]"))
        return HarnessRun(
            executable=self.config.command[0],
            install_dir=self._mounted,
            home=SANDBOX_HOME,
            workdir=values["workdir"],
            instruction_file=values["instruction_file"],
            model=values["model"],
            proxy_url=posixpath.dirname(values["base_url"]),  # without /v1
            api_key=values["api_key"],
            mcp_servers=tuple(MCPServerConfig.model_validate(s) for s in servers),
        )

    def argv(self, values: dict[str, str]) -> list[str]:
        return self.harness.command(self._run_of(values))

    async def prepare(self, sandbox: Sandbox, values: dict[str, str]) -> None:
        """Make the run's home and check that the sandbox's image can run the executable: a
        native CLI linked against glibc needs glibc's loader, which a musl image (Alpine)
        lacks; that is one clear line rather than the shell's "not found"."""
        run = self._run_of(values)
        loader = await self._needed_loader()
        made = await sandbox.exec(
            ["sh", "-c", 'mkdir -p "$1" && { [ -z "$2" ] || [ -e "$2" ] || exit 90; }', "sh"]
            + [run.home, loader],
            timeout=30,
        )
        if made.exit_code == 90:
            raise HarnessNotReady(
                f"--scaffold {self.harness.name}: {self.harness.label} cannot run in this "
                f"sandbox: its executable needs the C library loader {loader}, which the "
                "sandbox's image lacks (a musl image such as Alpine?); use a glibc-based image "
                "(Debian, Ubuntu) for the task's environment"
            )
        if not made.ok:
            raise RuntimeError(f"cannot make {run.home} in the sandbox: {made.output.strip()}")
        for path, text in self.harness.files(run).items():
            await sandbox.write_file(path, text)

    def command_env(self, base_url: str, token: str, values: dict[str, str]) -> dict[str, str]:
        """The external scaffold's environment, the harness's over it, the scaffold's ``env``
        (the user's) over both."""
        run = self._run_of(values)
        base = super().command_env(base_url, token, values)
        mcp = header_env(run.mcp_servers)  # the allowed variables the servers' headers name
        return {**base, "HOME": run.home, **mcp, **self.harness.env(run), **self.config.env}

    def last_error(self, output: str) -> str:
        return self.harness.last_error(output)
