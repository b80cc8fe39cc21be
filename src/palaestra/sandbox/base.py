"""The execution boundary: a sandbox runs commands for the agent and the verifier.

A backend creates sandboxes from a :class:`SandboxSpec`. A sandbox runs commands with
:meth:`Sandbox.exec`, moves files in and out, and is closed exactly once (closing again is a
no-op). Closing kills every process inside and frees every resource the sandbox held.
:meth:`Sandbox.snapshot` freezes a sandbox's files into a :class:`SandboxSnapshot`, from which
:meth:`SandboxBackend.restore` starts new sandboxes.

This module is the contract (:class:`Sandbox`, :class:`SandboxBackend`); the types it speaks in
live by concept and are re-exported here: errors (:mod:`~palaestra.sandbox.errors`), the spec
(:mod:`~palaestra.sandbox.spec`), commands and results (:mod:`~palaestra.sandbox.command`),
shell sessions (:mod:`~palaestra.sandbox.shell`), snapshots (:mod:`~palaestra.sandbox.snapshot`)
and :func:`~palaestra.sandbox.cancellation.await_to_the_end`.
"""

from __future__ import annotations

import abc
from pathlib import Path

from palaestra.sandbox.cancellation import await_to_the_end
from palaestra.sandbox.command import DEFAULT_OUTPUT_LIMIT, Command, ExecResult
from palaestra.sandbox.errors import SandboxClosedError, SandboxError, SandboxSpecError
from palaestra.sandbox.shell import ShellSession
from palaestra.sandbox.snapshot import SandboxSnapshot
from palaestra.sandbox.spec import Mount, NetworkMode, SandboxSpec, is_within

__all__ = [
    "DEFAULT_OUTPUT_LIMIT",
    "Command",
    "ExecResult",
    "Mount",
    "NetworkMode",
    "Sandbox",
    "SandboxBackend",
    "SandboxClosedError",
    "SandboxError",
    "SandboxSnapshot",
    "SandboxSpec",
    "SandboxSpecError",
    "ShellSession",
    "await_to_the_end",
    "is_within",
]


class Sandbox(abc.ABC):
    """A running sandbox. Use ``async with`` or call :meth:`close`.

    ``adjustments`` says what the backend changed from :attr:`spec` to run it (e.g. a CPU
    quota lowered to the host's count), one line each; empty when the spec was honoured as is.
    """

    id: str
    spec: SandboxSpec
    adjustments: tuple[str, ...] = ()

    async def exec(
        self,
        cmd: str | list[str],
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | int | None = None,
        stdin: str | bytes | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> ExecResult:
        """Run ``cmd`` (a string is run by ``bash -c``) and wait for it.

        The command runs in its own process group. On timeout the whole group, and anything it
        spawned, is killed and the partial output returned with ``timed_out=True``.
        """
        argv = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if not argv:
            raise ValueError("empty command")
        texts = [*argv, *(env or {}), *(env or {}).values(), cwd or ""]
        if any("\0" in text for text in texts):
            raise ValueError("a command's arguments, environment and cwd cannot contain NUL")
        for name in env or {}:
            if not name or "=" in name:
                raise ValueError(
                    f"environment variable name {name!r}: it cannot be empty or hold '='"
                )
        data = stdin.encode() if isinstance(stdin, str) else stdin
        command = Command(argv, timeout, cwd, env or {}, user, data, output_limit)
        return await self._run(command)

    @abc.abstractmethod
    async def _run(self, command: Command) -> ExecResult:
        """Run one command of :meth:`exec` and wait for it: what a backend implements."""

    @abc.abstractmethod
    async def upload(self, src: Path | str, dst: str) -> None:
        """Copy a host file or directory to the absolute in-sandbox path ``dst``."""

    @abc.abstractmethod
    async def download(self, src: str, dst: Path | str) -> None:
        """Copy the in-sandbox file or directory ``src`` to the host path ``dst``."""

    @abc.abstractmethod
    async def kill_all(self, *, restart_service: bool = True) -> None:
        """Kill every process in the sandbox, the image's service included (the sandbox stays
        usable), and return once they are gone. Nothing survives: not a process the agent made
        the service start (by ptrace, or by asking it), in whatever session or cgroup.

        Then, unless ``restart_service`` is False, the service (a Docker image's
        ``ENTRYPOINT`` and Harbor's command; a sandbox without one has none) is started again
        as at creation: from its argv, with the sandbox's environment and working directory as
        it started (nothing a killed process changed in memory carries over; the files it runs
        are the sandbox's files as they are now). It returns once the service is started, not
        once it is ready, as :meth:`SandboxBackend.create` does; a service that cannot start
        again raises :class:`SandboxError`.
        """

    @abc.abstractmethod
    async def changed_paths(self, under: tuple[str, ...]) -> list[str]:
        """The paths inside the absolute directories ``under`` that processes in the sandbox
        created, changed or deleted since it started, sorted, as the backend's storage sees
        them (what a process inside cannot hide: a Docker container's diff, the writable layer
        of a root filesystem's overlay). Directories the backend keeps read-only report
        nothing; ``spec.files``, ``writable_dirs`` and mounts are not reported reliably (a
        backend may keep them apart from the root filesystem): ask about system directories.
        """

    @abc.abstractmethod
    async def close(self) -> None:
        """Kill everything and free all resources. Idempotent."""

    @property
    @abc.abstractmethod
    def closed(self) -> bool: ...

    async def snapshot(self) -> SandboxSnapshot:
        """Its files as they are now (every writable directory, and a root filesystem's or
        image's changes), frozen into a :class:`SandboxSnapshot` that
        :meth:`SandboxBackend.restore` starts new sandboxes from; the sandbox goes on unchanged.
        Running processes are not part of it. Take it between commands: the backend stops the
        sandbox's processes while it copies, so the files are consistent."""
        raise SandboxError(f"sandbox {self.id}'s backend cannot take snapshots")

    async def write_file(self, path: str, content: str | bytes, mode: int = 0o644) -> None:
        """Write ``content`` to the in-sandbox ``path`` (parents are created)."""
        data = content.encode() if isinstance(content, str) else content
        res = await self.exec(
            [
                "sh",
                "-c",
                'mkdir -p "$(dirname "$1")" && cat > "$1" && chmod "$2" "$1"',
                "sh",
                path,
                format(mode, "o"),
            ],
            stdin=data,
            timeout=60,
        )
        if not res.ok:
            raise SandboxError(f"could not write {path} in sandbox {self.id}: {res.output.strip()}")

    async def read_file(self, path: str) -> str | None:
        """The text of the in-sandbox ``path``, or None when it does not exist."""
        res = await self.exec(["cat", "--", path], timeout=60)
        return res.stdout if res.exit_code == 0 else None

    def shell(
        self,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | int | None = None,
    ) -> ShellSession:
        """A persistent shell session: working directory, variables and functions carry over
        from one :meth:`ShellSession.run` to the next. ``async with sandbox.shell() as sh:``."""
        return ShellSession(self, cwd=cwd, env=env, user=user)

    async def _shell_run(
        self, session: ShellSession, cmd: str, timeout: float | None, output_limit: int
    ) -> ExecResult:
        """Run one command of :meth:`ShellSession.run`: what a backend with shells implements."""
        raise SandboxError(f"sandbox {self.id}'s backend has no shell sessions")

    async def _shell_close(self, session: ShellSession) -> None:
        """End a session of this sandbox (:meth:`ShellSession.close`)."""
        raise SandboxError(f"sandbox {self.id}'s backend has no shell sessions")

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class SandboxBackend(abc.ABC):
    """Creates sandboxes. One backend instance may serve many concurrent sandboxes."""

    name: str

    @abc.abstractmethod
    async def create(self, spec: SandboxSpec) -> Sandbox:
        """Start a sandbox; raise :class:`SandboxError` when it cannot."""

    async def restore(
        self, snapshot: SandboxSnapshot, *, labels: dict[str, str] | None = None
    ) -> Sandbox:
        """Start a sandbox holding ``snapshot``'s files (a copy of its own), with the
        snapshot's spec and ``labels`` added to it; the snapshot stays usable."""
        raise SandboxError(f"the {self.name} backend cannot restore snapshots")

    async def aclose(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Close every sandbox this backend created that is still open; release its resources."""
