"""The ``external`` scaffold: any CLI agent harness becomes the scaffold of an environment.

The scaffold starts a user-given command pointed at palaestra's OpenAI-compatible proxy
(:mod:`palaestra.scaffolds.proxy`). Every LLM call the harness makes arrives at the proxy and goes to
this episode's client — inside :class:`~palaestra.env.CodeEnv`, the queue-mediated client — so
each call is an observation and the policy's action is returned as the completion. The
episode's agent part ends when the command exits (exit status 0: ``submitted``, the verifier
runs; otherwise ``error``), when it has made no call for ``idle_timeout_s`` (``agent_timeout``),
or when the environment stops it at the task's agent time limit (the command is killed).

``where="sandbox"`` runs the command inside the episode's sandbox. A sandbox has no network
(unless the task asks for one), so the proxy also listens on a unix socket whose directory is
bind-mounted into the sandbox (:meth:`ExternalScaffold.sandbox_mounts`, which CodeEnv adds to
the sandbox spec), and a small stdlib forwarder (:mod:`palaestra.scaffolds._forward`, run by
the sandbox's ``python3``) listens on the sandbox's own 127.0.0.1 and relays to it. The harness
and everything it needs must be inside the sandbox (its image, or installed by the command).

``where="host"`` runs the command on the host, in a fresh temporary directory, with the host's
environment and files, in a pid namespace of its own (bubblewrap, which the local sandbox needs
too): when the command ends or is killed, the kernel kills every process it started, those that
left its session (``setsid``) or were orphaned by a double fork included. It is for harnesses whose tool execution goes through palaestra: the agent's
shell commands must run in the sandbox, not on the host, so the harness must send them to the
episode's exec URL (``PALAESTRA_EXEC_URL``: ``POST {"command", "timeout", "cwd"}`` ->
``{"stdout", "stderr", "exit_code", "timed_out", ...}``). mini-swe-agent does so through
:class:`palaestra.scaffolds.mini_swe_agent.SandboxEnvironment`.

Placeholders in ``command`` (a shell string run by ``bash -c``, or an argv list):
``{instruction_file}`` (the task's instruction, as a file), ``{instruction}`` (its text: quote
it in shell strings, prefer the file), ``{base_url}`` (OpenAI base URL, ending in ``/v1``),
``{api_key}`` (the episode token), ``{model}``, ``{workdir}`` (the sandbox's working
directory), ``{exec_url}`` (host only), ``{python}`` (host only: this Python),
``{task_id}``, ``{episode_id}``. Other braces are left alone. The command's environment has
``OPENAI_BASE_URL``, ``OPENAI_API_BASE``, ``OPENAI_API_KEY``, ``ANTHROPIC_BASE_URL``,
``ANTHROPIC_API_KEY``, ``PALAESTRA_MODEL`` and (host) ``PALAESTRA_EXEC_URL``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import shutil
import sys
import tempfile
import time
import weakref
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from palaestra.sandbox.base import Mount
from palaestra.sandbox.janitor import clean_up_at_exit
from palaestra.sandbox.local.userns import id_base
from palaestra.scaffolds.base import EndReason, Outcome
from palaestra.scaffolds.external_config import ExternalScaffoldConfig, check_config, render_command
from palaestra.scaffolds.host_process import contained, kill_group, tail
from palaestra.scaffolds.proxy import ProxyEpisode, ProxyServer

if TYPE_CHECKING:
    from palaestra.llm.client import LLMClient
    from palaestra.sandbox.base import Sandbox
    from palaestra.tasks import Task

_ERROR_RE = re.compile(
    r"error|exception|traceback|fatal|failed|cannot|can't|could not|unable|denied|not found",
    re.IGNORECASE,
)
#: Where the proxy socket's directory appears in a sandbox.
SANDBOX_PROXY_DIR = "/.palaestra-proxy"
#: In-sandbox directory for the forwarder and the instruction file.
SANDBOX_AGENT_DIR = "/tmp/palaestra-agent"
_FORWARDER = Path(__file__).with_name("_forward.py")
_PORT_MARK = "@@PALAESTRA_PORT@@"
_SOCKET_NAME = "proxy.sock"
#: How long the scaffold's own proxy outlives its last episode, for the next one.
PROXY_LINGER_S = 5.0


class ExternalScaffold:
    """Runs an outside harness as the scaffold; see the module docstring.

    ``proxy``: a running :class:`ProxyServer` to use (for ``where="sandbox"`` it needs a
    ``unix_socket``); by default the scaffold runs its own, started when its first episode
    starts and stopped :data:`PROXY_LINGER_S` after its last one ends unless another starts
    meanwhile, or by :meth:`aclose`.
    """

    name = "external"

    def __init__(
        self,
        config: ExternalScaffoldConfig | None = None,
        *,
        proxy: ProxyServer | None = None,
        **overrides: Any,
    ) -> None:
        self.config = replace(config or ExternalScaffoldConfig(), **overrides)
        check_config(self.config)
        self._proxy = proxy
        self._own_proxy: ProxyServer | None = None
        self._users = 0
        self._socket_dir: Path | None = None
        self._start_lock = asyncio.Lock()
        self._linger: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        if proxy is not None and self.config.where == "sandbox" and proxy.unix_socket is None:
            raise ValueError(
                "external scaffold with where='sandbox' needs a proxy with a unix_socket "
                "(sandboxes reach it through a bind mount): ProxyServer(unix_socket=...)"
            )

    # -- the proxy ---------------------------------------------------------------------------

    def _socket_path(self) -> Path:
        if self._proxy is not None:
            assert self._proxy.unix_socket is not None
            return self._proxy.unix_socket
        if self._socket_dir is None:
            self._socket_dir = Path(tempfile.mkdtemp(prefix="palaestra-proxy-"))
            weakref.finalize(self, shutil.rmtree, self._socket_dir, True)
            # and when the process ends on SIGTERM, SIGINT or SIGHUP, which skip finalizers
            clean_up_at_exit(functools.partial(shutil.rmtree, self._socket_dir, True))
            if os.geteuid() == 0:
                # Reached by the sandboxes' root, which on the local backend is an unprivileged
                # host uid (palaestra.sandbox.local.userns); still closed to the host's users.
                os.chown(self._socket_dir, id_base(), id_base())
        return self._socket_dir / _SOCKET_NAME

    def sandbox_mounts(self) -> tuple[Mount, ...]:
        """What the sandbox needs from the host: the proxy socket's directory (sandbox mode)."""
        if self.config.where != "sandbox":
            return ()
        proxy_dir = Mount(source=self._socket_path().parent, target=SANDBOX_PROXY_DIR)
        return (proxy_dir, *self.config.mounts)

    async def _acquire(self) -> ProxyServer:
        """The proxy, started for the first user (or still running from the last one).
        Starting and stopping hold one lock: a proxy stopping unlinks its socket path, which a
        new one must not bind before."""
        if self._proxy is not None:
            return self._proxy
        self._in_this_loop()
        async with self._start_lock:
            if self._linger is not None:  # an episode within PROXY_LINGER_S of the last one
                self._linger.cancel()
                self._linger = None
            if self._own_proxy is None:
                unix = self._socket_path() if self.config.where == "sandbox" else None
                proxy = ProxyServer(unix_socket=unix, model_name=self.config.model)
                await proxy.start()
                self._own_proxy = proxy
            self._users += 1
            return self._own_proxy

    async def _release(self) -> None:
        """One user fewer; the last one leaves the proxy running :data:`PROXY_LINGER_S` for
        the next episode (stopping uvicorn takes 0.1 s at least, which would otherwise be on
        every episode's path in a sequential loop)."""
        if self._proxy is not None:
            return
        self._users -= 1  # at once: a release cancelled while it waits still counts
        if self._users == 0 and self._own_proxy is not None and self._linger is None:
            self._linger = asyncio.create_task(self._stop_when_idle())

    async def _stop_when_idle(self) -> None:
        await asyncio.sleep(PROXY_LINGER_S)
        # Under the start lock: an episode starting meanwhile waits for the stop, which would
        # otherwise unlink the socket the new proxy has just bound at the same path.
        async with self._start_lock:
            self._linger = None
            if self._users == 0 and self._own_proxy is not None:
                proxy, self._own_proxy = self._own_proxy, None
                await proxy.stop()

    def _in_this_loop(self) -> None:
        """A scaffold used from another event loop than before (a second ``asyncio.run``) lets
        go of what the last one left: its proxy, still lingering when that loop ended (no
        longer served), and its lock."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        self._loop = loop
        self._start_lock, self._linger, self._users = asyncio.Lock(), None, 0
        if self._own_proxy is not None:  # served by the loop before, which has ended
            self._own_proxy.forget()
            self._own_proxy = None

    async def aclose(self) -> None:
        """Stop the scaffold's own proxy if it still runs (it stops by itself
        :data:`PROXY_LINGER_S` after its last episode) and remove its socket directory."""
        self._in_this_loop()
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if self._own_proxy is not None:
            await self._own_proxy.stop()
            self._own_proxy = None
        if self._socket_dir is not None:
            await asyncio.to_thread(shutil.rmtree, self._socket_dir, True)

    # -- an episode --------------------------------------------------------------------------

    async def run(self, task: Task, sandbox: Sandbox, llm: LLMClient) -> Outcome:
        cfg = self.config
        proxy = await self._acquire()
        try:
            episode_id = sandbox.spec.labels.get("palaestra.episode_id") or None
            ep = proxy.register(
                llm,
                episode_id=episode_id,
                metadata={"task_id": task.id, "scaffold": self.name},
                sandbox=sandbox if cfg.where == "host" else None,
            )
            end: dict[str, Any] = {"kind": "command", "where": cfg.where}
            try:
                if cfg.where == "host":
                    reason, message = await self._run_on_host(task, sandbox, proxy, ep, end)
                else:
                    reason, message = await self._run_in_sandbox(task, sandbox, ep, end)
            finally:
                proxy.unregister(ep.token)
        finally:
            await self._release()
        end.update(reason=reason, message=message[-500:])
        return Outcome(reason, ep.turns, message, [*ep.calls, end])

    def _values(self, task: Task, sandbox: Sandbox, ep: ProxyEpisode) -> dict[str, str]:
        return {
            "instruction": task.instruction,
            "api_key": ep.token,
            "model": self.config.model,
            "workdir": sandbox.spec.workdir,
            "task_id": task.id,
            "episode_id": ep.episode_id,
        }

    def _env(self, base_url: str, token: str) -> dict[str, str]:
        return {
            **self.config.env,
            "OPENAI_BASE_URL": f"{base_url}/e/{token}/v1",
            "OPENAI_API_BASE": f"{base_url}/e/{token}/v1",
            "OPENAI_API_KEY": token,
            "ANTHROPIC_BASE_URL": f"{base_url}/e/{token}",
            "ANTHROPIC_API_KEY": token,
            "PALAESTRA_MODEL": self.config.model,
        }

    async def _watch(
        self, ep: ProxyEpisode, command: asyncio.Future[Any]
    ) -> Literal["done", "idle", "timeout"]:
        """Wait for the command; ``idle`` when the harness stopped calling, ``timeout`` when
        ``timeout_s`` ran out."""
        cfg = self.config
        deadline = None if cfg.timeout_s is None else time.monotonic() + cfg.timeout_s
        while True:
            wait = 1.0 if cfg.idle_timeout_s is not None else None
            if deadline is not None:
                left = deadline - time.monotonic()
                wait = left if wait is None else min(wait, left)
            done, _ = await asyncio.wait({command}, timeout=None if wait is None else max(wait, 0))
            if done:
                return "done"
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return "timeout"
            if cfg.idle_timeout_s is not None and not ep.busy:
                if now - ep.last_activity > cfg.idle_timeout_s:
                    return "idle"

    def _stopped(self, why: Literal["idle", "timeout"]) -> tuple[EndReason, str]:
        if why == "idle":
            return "agent_timeout", (
                f"the harness made no call for {self.config.idle_timeout_s:g} s and was stopped"
            )
        return "agent_timeout", f"the command ran past timeout_s={self.config.timeout_s:g}"

    def _exited(self, code: int | None, output: str) -> tuple[EndReason, str]:
        tail = output[-self.config.output_chars :]
        if code == 0:
            return "submitted", tail
        cause = self.last_error(output) or "it printed nothing"
        return "error", (
            f"{self.label} exited with status {code}: {cause}\nits output ends:\n{tail}"
        )

    #: What error messages call the command (a harness names itself).
    label = "the command"

    def last_error(self, output: str) -> str:
        """The cause of a failed run, from the command's output: its last line that reads as
        an error (a Python traceback's last line, say), else its last line. The first line of
        the episode's error message, which is what ``eval`` prints."""
        return last_error_line(output)

    async def prepare(self, sandbox: Sandbox, values: dict[str, str]) -> None:
        """Before the command starts in the sandbox (``values``: the placeholders' values):
        nothing here; a harness writes its configuration files."""

    def command_env(self, base_url: str, token: str, values: dict[str, str]) -> dict[str, str]:
        """The command's environment in the sandbox: the proxy's URLs and key, ``env``."""
        return self._env(base_url, token)

    def argv(self, values: dict[str, str]) -> list[str]:
        """The command to run, its placeholders replaced."""
        return render_command(self.config.command, values)

    async def _run_in_sandbox(
        self, task: Task, sandbox: Sandbox, ep: ProxyEpisode, end: dict[str, Any]
    ) -> tuple[EndReason, str]:
        socket_in_sandbox = f"{SANDBOX_PROXY_DIR}/{self._socket_path().name}"
        forwarder = f"{SANDBOX_AGENT_DIR}/forward.py"
        instruction_file = f"{SANDBOX_AGENT_DIR}/instruction.md"
        source = await asyncio.to_thread(_FORWARDER.read_bytes)
        check = await sandbox.exec(
            [
                "sh",
                "-c",
                'test -S "$1" || { echo "no proxy socket at $1" >&2; exit 3; }; '
                'command -v python3 >/dev/null || { echo "no python3 in the sandbox" >&2; exit 4; }; '
                'mkdir -p "$(dirname "$2")" && cat > "$2"',
                "sh",
                socket_in_sandbox,
                forwarder,
            ],
            stdin=source,
            timeout=60,
        )
        if not check.ok:
            raise RuntimeError(
                f"external scaffold cannot reach its proxy from sandbox {sandbox.id}: "
                f"{check.output.strip()}. The sandbox must be created with the scaffold's "
                "mounts (CodeEnv adds ExternalScaffold.sandbox_mounts() to the spec) and have "
                "python3"
            )
        await sandbox.write_file(instruction_file, task.instruction)
        base_url = f"http://127.0.0.1:{_PORT_MARK}"
        values = {
            **self._values(task, sandbox, ep),
            "instruction_file": instruction_file,
            "base_url": f"{base_url}/e/{ep.token}/v1",
        }
        await self.prepare(sandbox, values)
        argv = self.argv(values)
        command = asyncio.ensure_future(
            sandbox.exec(
                ["python3", forwarder, socket_in_sandbox, "--", *argv],
                env=self.command_env(base_url, ep.token, values),
                cwd=self.config.cwd,
            )
        )
        try:
            why = await self._watch(ep, command)
            if why != "done":
                return self._stopped(why)
            result = command.result()
        finally:
            if not command.done():
                command.cancel()  # the sandbox kills what the exec still runs
                await asyncio.gather(command, return_exceptions=True)
        code = None if result.timed_out else result.exit_code
        end.update(exit_code=code, output=result.output[-self.config.output_chars :])
        return self._exited(code, result.output)

    async def _run_on_host(
        self,
        task: Task,
        sandbox: Sandbox,
        proxy: ProxyServer,
        ep: ProxyEpisode,
        end: dict[str, Any],
    ) -> tuple[EndReason, str]:
        tmp = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="palaestra-external-"))
        proc: asyncio.subprocess.Process | None = None
        try:
            instruction_file = tmp / "instruction.md"
            await asyncio.to_thread(instruction_file.write_text, task.instruction)
            values = {
                **self._values(task, sandbox, ep),
                "instruction_file": str(instruction_file),
                "base_url": proxy.url_for(ep),
                "exec_url": f"{proxy.base_url}/e/{ep.token}/exec",
                "python": sys.executable,
            }
            argv = self.argv(values)
            env = {
                **os.environ,
                **self._env(proxy.base_url, ep.token),
                "PALAESTRA_EXEC_URL": values["exec_url"],
            }
            log_path = tmp / "output.log"
            with open(log_path, "wb") as log:  # noqa: ASYNC230 - opening is not I/O of size
                proc = await asyncio.create_subprocess_exec(
                    *contained(argv, self.config.cwd or tmp),
                    cwd=self.config.cwd or tmp,
                    env=env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                )
            waiter = asyncio.ensure_future(proc.wait())
            try:
                why = await self._watch(ep, waiter)
            finally:
                if not waiter.done():
                    kill_group(proc)
                    await waiter
            output = await asyncio.to_thread(tail, log_path, self.config.output_chars)
            end.update(exit_code=proc.returncode, output=output)
            if why != "done":
                return self._stopped(why)
            return self._exited(proc.returncode, output)
        finally:
            if proc is not None and proc.returncode is None:
                kill_group(proc)
                with contextlib.suppress(ProcessLookupError):
                    await proc.wait()
            elif proc is not None:
                kill_group(proc)  # anything the harness left running in its group
            await asyncio.to_thread(shutil.rmtree, tmp, True)


def last_error_line(output: str) -> str:
    """The last line of ``output`` that reads as an error, else its last non-empty line ("" for
    no output); at most 300 characters."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if _ERROR_RE.search(line)]
    found = errors[-1] if errors else (lines[-1] if lines else "")
    return found[:300]
