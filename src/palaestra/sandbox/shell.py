"""Shell sessions: one ``bash`` that keeps its state from one command to the next."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from palaestra.sandbox.command import DEFAULT_OUTPUT_LIMIT, ExecResult
from palaestra.sandbox.errors import SandboxClosedError

if TYPE_CHECKING:
    from palaestra.sandbox.base import Sandbox


class ShellSession:
    """A shell whose state persists across commands, made by :meth:`Sandbox.shell`.

    The backend keeps one ``bash`` running for the session (bash 4.1+ in the sandbox; started
    by the first :meth:`run`), so a command is one round trip to the sandbox, no process start.
    Working directory, variables (exported or not), functions and shell options carry over;
    each run has its own exit code, separate stdout and stderr, timeout and output limit, and
    gets no stdin. ``exit N`` ends that run with N and keeps the state, as does ``set -e``
    ending one. A run that times out or is cancelled leaves the session's state as it was
    before that run, and kills everything the session runs, background jobs of earlier runs
    included (as does the bash ending: ``exit``, ``set -e``); background jobs otherwise live
    on between runs. :meth:`close` kills them all, and leaves nothing behind.
    Nothing a command prints can end its run or forge its exit code: the status travels apart.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | int | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.cwd = cwd
        self.env = dict(env or {})
        self.user = user
        self.name = uuid.uuid4().hex
        self._lock = asyncio.Lock()
        self._closed = False

    async def run(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> ExecResult:
        """Run ``cmd`` (bash syntax) in the session; like :meth:`Sandbox.exec` otherwise.
        Runs of one session wait for each other."""
        if "\0" in cmd:
            raise ValueError("a shell command cannot contain NUL characters")
        async with self._lock:
            if self._closed:
                raise SandboxClosedError(f"shell session {self.name} is closed")
            return await self.sandbox._shell_run(self, cmd, timeout, output_limit)

    async def close(self) -> None:
        """End the session: kill its processes, forget its state. Idempotent (a no-op once the
        sandbox is closed)."""
        if not self._closed:
            self._closed = True
            if not self.sandbox.closed:
                await self.sandbox._shell_close(self)

    async def __aenter__(self) -> ShellSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
