"""Labels for local sandboxes, and reclaiming what crashed runs left behind.

Every local sandbox lives in ``<state_dir>/<run_id>/<sandbox_id>/`` with a ``meta.json``
(:class:`SandboxMeta`): its labels (``palaestra.run_id`` among them), the pid and start time of
the process that owns it, and the pid of its bubblewrap process. A sandbox whose owner is gone
(no such pid, or the pid now belongs to a process started at another time) is a leftover:
:func:`reclaim_leftovers` kills its bubblewrap process and removes its directory. Sandboxes of
live owners are never touched. :func:`clean_up_at_exit` closes what a process still holds when
it exits or is told to (SIGTERM, SIGINT, SIGHUP).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import FrameType
from typing import Any

from palaestra.sandbox.limits import reclaim_empty_cgroups, remove_cgroups
from palaestra.sandbox.mounts import mounts_under, unmount

RUN_ID_LABEL = "palaestra.run_id"
META_FILE = "meta.json"

#: A sandbox directory without a readable meta.json is being created, unless it is older than
#: this: then its creator died between making the directory and writing the file.
CREATION_GRACE_S = 60.0
_KILL_WAIT_S = 5.0


@dataclass(frozen=True)
class SandboxMeta:
    """What ``meta.json`` records about one sandbox."""

    sandbox_id: str
    owner_pid: int
    owner_start: int | None
    labels: dict[str, str] = field(default_factory=dict)
    bwrap_pid: int | None = None
    cgroups: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)

    def write(self, sandbox_dir: Path) -> None:
        """Write ``meta.json`` atomically, so a reader never sees half of it."""
        tmp = sandbox_dir / f".{META_FILE}.tmp"
        tmp.write_text(json.dumps(asdict(self)))
        tmp.replace(sandbox_dir / META_FILE)

    @classmethod
    def read(cls, sandbox_dir: Path) -> SandboxMeta | None:
        """The recorded meta, or None when it is missing or unreadable.

        Unknown keys are ignored, so that versions that record more still read each other.
        """
        try:
            data = json.loads((sandbox_dir / META_FILE).read_text())
            return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})
        except (OSError, ValueError, TypeError):
            return None


def process_start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks after boot), or None when there is no such process.

    A pid plus its start time names one process for good: pids are reused, this pair is not.
    """
    stat = proc_stat(pid)
    return None if stat is None else int(stat[19])


def reclaim_leftovers(state_dir: Path) -> int:
    """Reclaim the sandboxes of dead owners under ``state_dir``; return how many.

    Blocking (it kills processes, waits for them and removes directories): call it from a
    thread in async code.
    """
    reclaim_empty_cgroups(CREATION_GRACE_S)
    if not state_dir.is_dir():
        return 0
    reclaimed = 0
    bwraps = functools.cache(_bwrap_argvs)  # one look at /proc per pass, and only if needed
    for run_dir in state_dir.iterdir():
        if not run_dir.is_dir() or run_dir.name.startswith("."):
            continue  # .helper/ and the like are shared by all runs
        try:
            changed = run_dir.stat().st_mtime
            sandbox_dirs = list(run_dir.iterdir())
        except FileNotFoundError:
            continue  # reclaimed by another janitor meanwhile
        before = reclaimed
        for sandbox_dir in sandbox_dirs:
            if sandbox_dir.is_dir() and _reclaim(sandbox_dir, bwraps):
                reclaimed += 1
        # An empty run directory that changed lately may be about to get its first sandbox
        # (its creator makes the directory, then the sandbox's): leave it, unless this pass
        # emptied it of a dead run's sandboxes.
        if reclaimed > before or time.time() - changed >= CREATION_GRACE_S:
            try:
                run_dir.rmdir()
            except OSError:
                pass  # not empty (a live run's), or gone already
    return reclaimed


def _reclaim(sandbox_dir: Path, bwraps: Callable[[], dict[int, list[bytes]]]) -> bool:
    meta = SandboxMeta.read(sandbox_dir)
    if meta is None:
        try:
            if _being_created(sandbox_dir):
                return False
        except FileNotFoundError:
            return False  # reclaimed by someone else meanwhile
    elif _is_alive(meta.owner_pid, meta.owner_start):
        return False
    else:
        # Its bwrap, and any bwrap child orphaned before it took a parent-death signal (the
        # owner died mid-start): found by their command lines, which name the sandbox's
        # directory; the pid in meta.json alone would miss the orphan.
        for pid, argv in bwraps().items():
            if _names(argv, sandbox_dir):
                _kill_bwrap(pid, sandbox_dir)
    if meta is not None:
        remove_cgroups(meta.cgroups)
        for path in reversed(meta.mounts):
            unmount(path)
    for path in mounts_under(sandbox_dir):  # what no record names (a start that never reported)
        unmount(path)
    remove_sandbox_dir(sandbox_dir)
    return True


def _being_created(sandbox_dir: Path) -> bool:
    """Whether a directory without a readable meta.json may be a sandbox being created.

    Its creator writes meta.json right after making the directory, so that directory holds at
    most the file's temporary copy; anything else means a removal was cut short (before
    :func:`remove_sandbox_dir`, removals took meta.json at any point). Past
    :data:`CREATION_GRACE_S` the creator died before writing it.
    """
    if any(name != f".{META_FILE}.tmp" for name in os.listdir(sandbox_dir)):
        return False
    return time.time() - sandbox_dir.stat().st_mtime < CREATION_GRACE_S


def remove_sandbox_dir(sandbox_dir: Path) -> None:
    """Remove a sandbox's (or snapshot's) directory, its meta.json last, and only once the rest
    is gone. Blocking.

    A removal cut short (its process killed, an entry that would not go) thus leaves the record
    for the janitor to reclaim the rest from, never a directory that looks like one being
    created (which it spares for :data:`CREATION_GRACE_S`).
    """
    try:
        entries = list(os.scandir(sandbox_dir))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.name == META_FILE:
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except FileNotFoundError:
            pass
        except OSError:
            return  # kept with its record: the janitor tries again
    with contextlib.suppress(FileNotFoundError):
        os.unlink(sandbox_dir / META_FILE)
    shutil.rmtree(sandbox_dir, ignore_errors=True)


def _is_alive(pid: int, start: int | None) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (zombies do not)."""
    stat = proc_stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    return start is None or int(stat[19]) == start


def _argv(pid: int) -> list[bytes] | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None


def _bwrap_argvs() -> dict[int, list[bytes]]:
    """The command line of every process running bwrap (bwrap, or its child before it execs
    the sandbox's pid 1). Blocking: it reads all of /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (argv := _argv(int(entry))) and _is_bwrap(argv):
            found[int(entry)] = argv
    return found


def _is_bwrap(argv: list[bytes]) -> bool:
    return os.path.basename(argv[0]) == b"bwrap"


def _names(argv: list[bytes], sandbox_dir: Path) -> bool:
    """Whether a command line names ``sandbox_dir`` (bwrap's binds are below it)."""
    marker = os.fsencode(sandbox_dir) + b"/"
    return any(marker in arg for arg in argv)


def _kill_bwrap(pid: int, sandbox_dir: Path) -> None:
    """SIGKILL ``pid`` and its process group if it is still that sandbox's bubblewrap, and wait
    until it is gone.

    The pid may have been reused since: it is killed only when its command line is bwrap's and
    names the sandbox's directory. bwrap's death takes the sandbox's pid 1 with it
    (``--die-with-parent``), and with it every process of the sandbox; the group takes a child
    of bwrap that has no parent-death signal yet.
    """
    argv = _argv(pid)
    if not argv or not _is_bwrap(argv) or not _names(argv, sandbox_dir):
        return
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    wait_gone(pid, sandbox_dir)


def wait_gone(pid: int, sandbox_dir: Path) -> None:
    """Wait (up to a few seconds) until the bwrap process ``pid`` of ``sandbox_dir`` has
    exited (a zombie counts as gone: its sandbox's processes are dead by then). Blocking."""
    deadline = time.monotonic() + _KILL_WAIT_S
    while time.monotonic() < deadline:
        if not _is_alive(pid, None):
            return
        time.sleep(0.005)


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state, ppid...), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


# -- on exit -------------------------------------------------------------------------------------

_exit_cleanups: list[Callable[[], None]] = []
_installed = False
_HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def clean_up_at_exit(cleanup: Callable[[], None]) -> None:
    """Call ``cleanup`` (once) when this process exits.

    Covers a normal exit and an uncaught exception (atexit), and SIGTERM, SIGINT and SIGHUP:
    where the previous disposition of the signal would end the process without running atexit
    (the default one), the cleanups run first and the process then dies of the same signal;
    where a Python handler was installed (asyncio's, KeyboardInterrupt, the application's), it
    is called unchanged, so a graceful shutdown stays graceful and atexit covers the rest. A
    SIGKILL cannot be caught: :func:`reclaim_leftovers` reclaims at the next start.
    """
    global _installed
    if cleanup not in _exit_cleanups:
        _exit_cleanups.append(cleanup)
    if _installed:
        return
    _installed = True
    atexit.register(_run_cleanups)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread; atexit still applies
    for sig in _HANDLED_SIGNALS:
        previous = signal.getsignal(sig)
        if previous is signal.SIG_IGN or previous is None:
            continue  # ignored, or set outside Python: leave it alone
        signal.signal(sig, functools.partial(_on_signal, previous))


def _run_cleanups() -> None:
    while _exit_cleanups:
        try:
            _exit_cleanups.pop()()
        except Exception:  # noqa: BLE001 - the others must still run at exit
            pass


def _on_signal(
    previous: Callable[[int, FrameType | None], Any] | int, signum: int, frame: FrameType | None
) -> None:
    if callable(previous):
        previous(signum, frame)
        return
    _run_cleanups()  # the default disposition ends the process without atexit
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
