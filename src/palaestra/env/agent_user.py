"""``[agent] user``: the agent's commands run as the task's user, as in Harbor.

Harbor runs the agent phase under ``environment.with_default_user(task.config.agent.user)``:
every command the agent runs without naming a user runs as that one (a name from the image's
``/etc/passwd``, or a uid). :class:`AgentSandbox` is that default around a sandbox: what the
scaffold is handed. Files still move as the sandbox moves them (uploads are root's, as Harbor's
``upload_file``); the healthcheck and the verifier use the sandbox itself, as root. The
directories the agent writes to by convention are opened to it (:func:`open_agent_dirs`).
"""

from __future__ import annotations

from pathlib import Path

from palaestra.sandbox.base import Command, ExecResult, Sandbox, SandboxError, ShellSession
from palaestra.tasks.paths import AGENT_LOGS_DIR, ARTIFACTS_DIR, SOLUTION_DIR


class AgentSandbox(Sandbox):
    """``sandbox``, whose commands run as ``user`` unless they name another one."""

    def __init__(self, sandbox: Sandbox, user: str | int) -> None:
        self._sandbox = sandbox
        self.user = user
        self.id = sandbox.id
        self.spec = sandbox.spec
        self.adjustments = sandbox.adjustments

    async def _run(self, command: Command) -> ExecResult:
        return await self._sandbox.exec(
            command.argv,
            timeout=command.timeout,
            cwd=command.cwd,
            env=command.env,
            user=self.user if command.user is None else command.user,
            stdin=command.stdin,
            output_limit=command.output_limit,
        )

    def shell(
        self,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | int | None = None,
    ) -> ShellSession:
        return self._sandbox.shell(cwd=cwd, env=env, user=self.user if user is None else user)

    async def upload(self, src: Path | str, dst: str) -> None:
        await self._sandbox.upload(src, dst)

    async def download(self, src: str, dst: Path | str) -> None:
        await self._sandbox.download(src, dst)

    async def kill_all(self, *, restart_service: bool = True) -> None:
        await self._sandbox.kill_all(restart_service=restart_service)

    async def changed_paths(self, under: tuple[str, ...]) -> list[str]:
        return await self._sandbox.changed_paths(under)

    async def close(self) -> None:
        await self._sandbox.close()

    @property
    def closed(self) -> bool:
        return self._sandbox.closed


#: Where an agent that is not root must be able to write, as Harbor makes them (its agent log
#: and artifact directories; ``/solution``, where palaestra's oracle unpacks the solution).
AGENT_DIRS = (AGENT_LOGS_DIR, ARTIFACTS_DIR, SOLUTION_DIR)


async def open_agent_dirs(sandbox: Sandbox) -> None:
    """Make :data:`AGENT_DIRS` writable by any user (before a non-root agent starts)."""
    result = await sandbox.exec(["chmod", "0777", *AGENT_DIRS], timeout=60)
    if not result.ok:
        raise SandboxError(
            f"could not open {', '.join(AGENT_DIRS)} to the agent's user: {result.output.strip()}"
        )


def agent_sandbox(sandbox: Sandbox, user: str | int | None) -> Sandbox:
    """What the scaffold gets: ``sandbox`` itself when the task names no user."""
    return sandbox if user is None else AgentSandbox(sandbox, user)
