"""A sandbox driven through its helper: the Sandbox API over a :class:`HelperChannel`.

Both backends run the same helper as the sandbox's pid 1 (:mod:`palaestra.sandbox._helper`)
and talk to it over a :class:`~palaestra.sandbox._channel.HelperChannel`. What a sandbox does
through that channel (run a command, move files in and out as tar streams, kill everything) is
written here once; a backend's sandbox subclasses :class:`ChannelSandbox` and provides only how
it starts and stops, setting ``_channel`` once its helper is up.
"""

from __future__ import annotations

import asyncio
import errno
import io
import posixpath
import tarfile
import time
from pathlib import Path
from typing import Any

from palaestra.sandbox._channel import HelperChannel, sandbox_path
from palaestra.sandbox.base import (
    Command,
    ExecResult,
    Sandbox,
    SandboxClosedError,
    SandboxError,
    ShellSession,
)

TRANSFER_TIMEOUT_S = 600.0
DOWNLOAD_LIMIT = 1 << 30

# Prints "D" then a tar of a directory's contents, or "F" then a tar of a single regular file.
# Symlinks are not followed: their target is resolved inside the sandbox. Exit 2: no such path;
# 3: neither a regular file nor a directory.
_DOWNLOAD_SH = """
if [ -L "$1" ]; then echo "$1 is a symbolic link" >&2; exit 3; fi
if [ -d "$1" ]; then printf D; exec tar -c -f - -C "$1" .; fi
if [ -f "$1" ]; then printf F; exec tar -c -f - -C "$(dirname -- "$1")" -- "$(basename -- "$1")"; fi
if [ -e "$1" ]; then echo "$1 is not a regular file or directory" >&2; exit 3; fi
exit 2
"""
_UPLOAD_SH = 'mkdir -p -- "$1" && exec tar -x --no-same-owner -f - -C "$1"'


class ChannelSandbox(Sandbox):
    """A sandbox whose commands and files go through its helper's channel.

    ``_channel`` is None until the subclass has started the helper; once the sandbox is closed
    (``closed``), every operation raises :class:`SandboxClosedError`.
    """

    _channel: HelperChannel | None = None

    def _usable_channel(self) -> HelperChannel:
        if self.closed:
            raise SandboxClosedError(f"sandbox {self.id} is closed")
        if self._channel is None:
            raise SandboxError(f"sandbox {self.id} was not started")
        return self._channel

    async def _run(self, command: Command) -> ExecResult:
        started = time.monotonic()
        return _result(*await self._usable_channel().run(command), started)

    async def _shell_run(
        self, session: ShellSession, cmd: str, timeout: float | None, output_limit: int
    ) -> ExecResult:
        started = time.monotonic()
        answer = await self._usable_channel().shell_run(
            session.name,
            cmd,
            cwd=session.cwd,
            env=session.env,
            user=session.user,
            timeout=timeout,
            output_limit=output_limit,
        )
        return _result(*answer, started)

    async def _shell_close(self, session: ShellSession) -> None:
        await self._usable_channel().shell_close(session.name)

    async def upload(self, src: Path | str, dst: str) -> None:
        """Copy a host file to exactly ``dst``, or a host directory's contents into ``dst``.

        Parents are created; an existing directory at ``dst`` receives the new contents.
        """
        channel = self._usable_channel()
        channel.check_usable()
        dst = sandbox_path(dst)
        is_dir, archive = await asyncio.to_thread(_pack, Path(src), posixpath.basename(dst))
        target = dst if is_dir else posixpath.dirname(dst)
        head, _, stderr = await channel.run(
            Command(["sh", "-c", _UPLOAD_SH, "sh", target], TRANSFER_TIMEOUT_S, stdin=archive)
        )
        if head["exit_code"] != 0:
            raise SandboxError(
                f"upload of {src} to {dst} in sandbox {self.id} failed: "
                f"{stderr.decode(errors='replace').strip() or head}"
            )

    async def download(self, src: str, dst: Path | str) -> None:
        """Copy the in-sandbox file ``src`` to exactly ``dst``, or a directory's contents into it.

        Symbolic links are never followed: ``src`` itself must not be one, and links inside a
        directory that point outside of it (or anywhere absolute) are left out.
        """
        channel = self._usable_channel()
        src = sandbox_path(src)
        head, out, err = await channel.run(
            Command(
                ["sh", "-c", _DOWNLOAD_SH, "sh", src],
                TRANSFER_TIMEOUT_S,
                output_limit=DOWNLOAD_LIMIT,
            )
        )
        if head["exit_code"] == 2:
            raise FileNotFoundError(errno.ENOENT, f"no such path in sandbox {self.id}", src)
        if head["exit_code"] != 0 or head["truncated"]:
            reason = err.decode(errors="replace").strip() or (
                f"larger than {DOWNLOAD_LIMIT} bytes" if head["truncated"] else str(head)
            )
            raise SandboxError(f"download of {src} from sandbox {self.id} failed: {reason}")
        try:
            await asyncio.to_thread(_unpack, out[:1] == b"D", out[1:], Path(dst))
        except tarfile.TarError as exc:
            raise SandboxError(f"download of {src} from sandbox {self.id} failed: {exc}") from exc

    async def kill_all(self, *, restart_service: bool = True) -> None:
        await self._usable_channel().kill_all(restart_service)


def _result(head: dict[str, Any], stdout: bytes, stderr: bytes, started: float) -> ExecResult:
    """The helper's answer to a command, as the Sandbox API reports it."""
    return ExecResult(
        stdout=stdout.decode(errors="replace"),
        stderr=stderr.decode(errors="replace"),
        exit_code=head["exit_code"],
        timed_out=head["timed_out"],
        duration_s=time.monotonic() - started,
        truncated=head["truncated"],
        oom_killed=head.get("oom_killed", False),
    )


# -- moving files ------------------------------------------------------------------------------


def _pack(src: Path, name: str) -> tuple[bool, bytes]:
    """A tar of ``src`` (following a top-level symlink): a directory's contents, or one file
    stored as ``name``. Returns whether ``src`` is a directory, and the archive."""
    src = src.resolve(strict=True)
    is_dir = src.is_dir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(src, arcname="." if is_dir else name)
    return is_dir, buf.getvalue()


def _unpack(is_dir: bool, archive: bytes, dst: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if is_dir:
            dst.mkdir(parents=True, exist_ok=True)
            tar.extractall(dst, filter=_no_escaping_links)
            return
        member = tar.next()
        content = tar.extractfile(member) if member is not None and member.isfile() else None
        if member is None or content is None:
            raise tarfile.TarError("expected a single regular file")
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(content.read())
        dst.chmod(member.mode & 0o755)


def _no_escaping_links(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's "data" filter, except that it drops (not rejects) links out of the tree and
    special files: a download of a directory keeps everything else."""
    try:
        return tarfile.data_filter(member, dest)
    except (
        tarfile.AbsoluteLinkError,
        tarfile.LinkOutsideDestinationError,
        tarfile.SpecialFileError,
    ):
        return None
