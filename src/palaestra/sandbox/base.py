"""The execution boundary: a sandbox runs commands for the agent and the verifier.

A backend creates sandboxes from a :class:`SandboxSpec`. A sandbox runs commands with
:meth:`Sandbox.exec`, moves files in and out, and is closed exactly once (closing again is a
no-op). Closing kills every process inside and frees every resource the sandbox held.
:meth:`Sandbox.snapshot` freezes a sandbox's files into a :class:`SandboxSnapshot`, from which
:meth:`SandboxBackend.restore` starts new sandboxes.
"""

from __future__ import annotations

import abc
import asyncio
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

NetworkMode = Literal["none", "public"]

#: Default cap on captured output per stream (bytes); output beyond it is dropped and
#: :attr:`ExecResult.truncated` is set.
DEFAULT_OUTPUT_LIMIT = 1 << 20


class SandboxError(RuntimeError):
    """A sandbox could not be created or used (an infrastructure failure, not a task failure)."""


class SandboxSpecError(SandboxError):
    """The sandbox cannot be made as asked, and asking again gives the same answer: a spec the
    backend cannot honour, a root filesystem or image without what the backend needs, an image
    that cannot be had, a build that fails. Unlike a plain :class:`SandboxError` (a sandbox that
    failed to start in time, died, or lost its connection) it is not worth a retry."""


class SandboxClosedError(SandboxError):
    """An operation was attempted on a sandbox that is already closed."""


@dataclass(frozen=True)
class Mount:
    """A host path made visible inside the sandbox.

    On the local backend the sandbox's ids are an unprivileged range of the host's
    (:mod:`palaestra.sandbox.local.userns`): it reads and writes a mount as that range's users,
    so a writable mount must be writable by them (the sandbox's root is host uid
    ``id_base()``), and what it writes there belongs to them.
    """

    source: Path
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class SandboxSpec:
    """What a sandbox must look like. Backends enforce what they support and reject the rest.

    ``workdir`` is created (writable, empty unless ``files`` fill it) and is the default cwd.
    ``files`` maps absolute in-sandbox paths to host files or directories copied in at creation.
    ``writable_dirs`` are extra empty writable directories; the defaults name no task format's
    layout (the environment passes a task's workdir and the directories its verifier uses).
    ``rootfs`` is a host directory holding a root filesystem (e.g. one exported from a Docker
    image) to run on instead of the host's system directories: the local backend shares it
    read-only between sandboxes and gives each a writable overlay discarded on close; it needs
    no Python (the helper brings its own runtime: :mod:`palaestra.sandbox.helper_runtime`).
    ``image`` names a container
    image for backends that run one (docker).
    """

    workdir: str = "/workspace"
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    writable_dirs: tuple[str, ...] = ("/tmp",)
    mounts: tuple[Mount, ...] = ()
    network: NetworkMode = "none"
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    pids_limit: int | None = None
    image: str | None = None
    rootfs: Path | None = None
    hostname: str = "sandbox"
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ExecResult:
    """The result of one command.

    ``exit_code`` is the command's status, or ``-signal`` when a signal ended it, or ``None``
    when it was killed for exceeding its timeout (then ``timed_out`` is True and stdout/stderr
    hold what it printed before). ``truncated`` is True when either stream hit the output cap.
    ``oom_killed`` is True when the kernel's out-of-memory killer ended a process of the command
    because the sandbox hit its memory limit (then ``exit_code`` is -9, or 137 through a shell).
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool = False
    duration_s: float = 0.0
    truncated: bool = False
    oom_killed: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def output(self) -> str:
        """stdout and stderr together, stdout first (what a terminal user would read)."""
        if self.stdout and self.stderr:
            sep = "" if self.stdout.endswith("\n") else "\n"
            return self.stdout + sep + self.stderr
        return self.stdout or self.stderr


@dataclass(frozen=True)
class Command:
    """One command of :meth:`Sandbox.exec` as a backend runs it: ``argv`` (a string command
    became ``bash -c`` it), ``stdin`` as bytes (None: no input), ``env`` added to the
    sandbox's; the rest as :meth:`Sandbox.exec` takes them."""

    argv: list[str]
    timeout: float | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    user: str | int | None = None
    stdin: bytes | None = None
    output_limit: int = DEFAULT_OUTPUT_LIMIT


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


class SandboxSnapshot(abc.ABC):
    """A sandbox's files frozen by :meth:`Sandbox.snapshot`; ``spec`` is that sandbox's.

    :meth:`SandboxBackend.restore` starts any number of sandboxes from it, each with its own
    copy. Release it with :meth:`release` (or ``async with``); its backend's ``aclose``, process
    exit and, after a crash, the janitor release it too. Its storage is freed once it is released
    and no sandbox that still needs it (a container running its image) is open.
    """

    def __init__(self, snapshot_id: str, spec: SandboxSpec) -> None:
        self.id = snapshot_id
        self.spec = spec
        self._users = 0
        self._released = False
        self._freeing: asyncio.Future[None] | None = None

    @property
    def released(self) -> bool:
        return self._released

    def hold(self) -> None:
        """Keep the storage while a sandbox started from it needs it (:meth:`let_go` ends it);
        raises :class:`SandboxError` once released."""
        if self._released:
            raise SandboxError(f"snapshot {self.id} was released; take a new one")
        self._users += 1

    async def let_go(self) -> None:
        """A sandbox started from it no longer needs it."""
        self._users -= 1
        if self._released and self._users == 0:
            await self._free_once()

    async def release(self) -> None:
        """No more sandboxes start from it; its storage goes as soon as none needs it.
        Idempotent."""
        self._released = True
        if self._users == 0:
            await self._free_once()

    async def _free_once(self) -> None:
        if self._freeing is None:
            self._freeing = asyncio.ensure_future(self._free())
        await await_to_the_end(self._freeing)

    @abc.abstractmethod
    async def _free(self) -> None:
        """Remove the snapshot's storage (its copy of the files, its image)."""

    async def __aenter__(self) -> SandboxSnapshot:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()


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


def is_within(path: str, directory: str) -> bool:
    """Whether the absolute ``path`` is ``directory`` or inside it (no file system access)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


_T = TypeVar("_T")


async def await_to_the_end(work: asyncio.Future[_T]) -> _T:
    """Await ``work`` (a thread, a spawn, a sandbox's close); when the caller is cancelled
    meanwhile, once or again, wait for ``work`` to end before the cancellation goes on.

    A thread cannot be stopped, and what follows a cancellation (closing the sandbox, the
    event loop ending) must not race it: a directory, cgroup, process or container made
    after the clean-up is never cleaned up.
    """
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        while not work.done():
            try:
                await asyncio.wait([work])
            except asyncio.CancelledError:
                pass  # cancelled again: the work still ends first
        raise
