"""Starting a command: as which user, in a new session, in its cgroup, under its rlimit."""

from __future__ import annotations

import _signal  # not `signal`: its enums import `enum`, `re`... (milliseconds at every start)
import errno
import os


def resolve_user(
    user: str | int | None, env: dict[str, str], env_overrides: dict[str, str]
) -> tuple[int | None, int | None]:
    """``(uid, gid)`` for ``user`` (a name or id from /etc/passwd, or any numeric id).

    Like ``docker exec -u``, HOME follows the user's passwd entry unless the caller set it.
    /etc/passwd is read directly, not through the C library's NSS (the helper's C library is
    not the image's, whose NSS modules and configuration it must not load).
    """
    if user is None:
        return None, None
    if isinstance(user, str) and user.isdigit():
        user = int(user)
    entry = _passwd_entry(user)
    if entry is None:
        if isinstance(user, str):
            raise ValueError(f"no user {user!r} in the sandbox's /etc/passwd")
        return user, user
    uid, gid, home = entry
    if "HOME" not in env_overrides:
        env["HOME"] = home
    return uid, gid


def _passwd_entry(user: str | int) -> tuple[int, int, str] | None:
    """``(uid, gid, home)`` of the first /etc/passwd line naming ``user`` (by name or uid)."""
    try:
        with open("/etc/passwd", "rb") as f:
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(":")
        if len(fields) < 7 or not fields[2].isdigit() or not fields[3].isdigit():
            continue
        if fields[0] == user if isinstance(user, str) else int(fields[2]) == user:
            return int(fields[2]), int(fields[3]), fields[5]
    return None


class NotStarted(Exception):
    """The command could not be started (not found, not runnable...): ``error`` says why."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def spawn(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    uid: int | None,
    gid: int | None,
    with_stdin: bool,
    procs_fd: int,
    rlimit_as: int | None,
) -> tuple[int, int, int, int]:
    """Start a command in a new session: ``(pid, stdin fd or -1, stdout fd, stderr fd)``.

    The helper forks; the child enters the command's cgroup (``procs_fd``, so that nothing it
    forks can be outside it), gets its rlimit, changes directory and user, and execs the
    command itself: no ``/bin/sh`` in between (one exec fewer, ~0.4 ms a command; a fork of
    this small process costs less than a shell's start). A failure before the command runs
    (not found, not runnable, no such directory) raises OSError here, with its errno.
    """
    in_r, in_w = os.pipe() if with_stdin else (os.open(os.devnull, os.O_RDONLY), -1)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    fail_r, fail_w = os.pipe()  # close-on-exec: EOF once exec succeeded
    pid = os.fork()
    if pid == 0:  # the child: only os calls, then exec or _exit
        try:
            os.setsid()
            for fd, target in ((in_r, 0), (out_w, 1), (err_w, 2)):
                os.dup2(fd, target)
            if procs_fd >= 0:
                os.write(procs_fd, b"0")
            if rlimit_as is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_AS, (rlimit_as, rlimit_as))
            for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):  # Python ignores these; commands not
                _signal.signal(sig, _signal.SIG_DFL)
            os.chdir(cwd)
            if gid is not None:
                os.setgroups([])
                os.setregid(gid, gid)
            if uid is not None:
                os.setreuid(uid, uid)
            execute(argv, env)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, whatever it is
            code = exc.errno if isinstance(exc, OSError) and exc.errno else 0
            os.write(fail_w, f"{code}:{exc}".encode(errors="replace"))
        finally:
            os._exit(127)
    for fd in (in_r, out_w, err_w, fail_w):
        os.close(fd)
    try:
        failure = read_all(fail_r)
    finally:
        os.close(fail_r)
    if failure:
        os.waitpid(pid, 0)
        for fd in (in_w, out_r, err_r):
            if fd >= 0:
                os.close(fd)
        code, _, message = failure.decode(errors="replace").partition(":")
        raise OSError(int(code) or errno.EINVAL, message)
    return pid, in_w, out_r, err_r


def execute(argv: list[str], env: dict[str, str]) -> None:
    """Exec ``argv``, searching ``env``'s PATH like ``os.execvpe``, which is not used: it
    imports ``warnings``, which minimal Pythons such as Debian's python3-minimal lack. Every
    candidate is tried (no ``os.access``: some container seccomp profiles refuse its syscall)."""
    if "/" in argv[0]:
        os.execve(argv[0], argv, env)
    denied: OSError | None = None
    for directory in env.get("PATH", "/usr/bin:/bin").split(":"):
        try:
            os.execve(f"{directory or '.'}/{argv[0]}", argv, env)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except PermissionError as exc:
            denied = denied or exc
    raise denied or FileNotFoundError(errno.ENOENT, f"{argv[0]}: command not found")


def read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except InterruptedError:
            continue
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
