"""A tmux session in a sandbox, driven through ``Sandbox.exec``: the terminal of ``terminus``.

Keystrokes are typed with ``tmux send-keys`` (see :func:`key_ops`); each observation reads the
pane's position and lines, and clears its scrollback, in one tmux command, and shows the
lines that are new since the previous one (:func:`new_output`) or the visible screen.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from palaestra.sandbox.base import SandboxError

if TYPE_CHECKING:
    from palaestra.sandbox.base import Sandbox

#: tmux key names a keystrokes string may consist of to be sent as keys rather than text.
_KEY = re.compile(
    r"(C-[a-z@\[\]\\^_]|M-\S|Escape|Enter|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End"
    r"|PageUp|PageDown|PPage|NPage|IC|DC|F[1-9]|F1[0-2])"
)
_KEYS = re.compile(rf"{_KEY.pattern}( {_KEY.pattern})*")


class TerminalConfig(Protocol):
    """The terminal's settings (:class:`~palaestra.scaffolds.terminus.TerminusScaffoldConfig`
    has them)."""

    width: int
    height: int
    history_limit: int
    startup_timeout: float


def key_ops(keystrokes: str) -> list[tuple[str, str]]:
    """The ``tmux send-keys`` calls that type ``keystrokes``: ("key", name) or ("text", s)."""
    if _KEYS.fullmatch(keystrokes.strip()) and keystrokes.strip():
        return [("key", k) for k in keystrokes.split()]
    ops: list[tuple[str, str]] = []
    for i, line in enumerate(keystrokes.split("\n")):
        if i:
            ops.append(("key", "Enter"))
        if line:
            ops.append(("text", line))
    return ops


def _trim(lines: list[str]) -> list[str]:
    """Lines without trailing whitespace, trailing blank lines dropped."""
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


@dataclass
class Snapshot:
    """The pane at one instant: the last ``len(lines) - rows`` history lines and the screen.

    Lines are numbered from the oldest line of the scrollback (0); the screen's first row is
    line ``history_size``, the cursor is on line ``history_size + cursor_y``.
    """

    history_size: int
    cursor_y: int
    rows: int
    lines: list[str]
    #: A full-screen program (vim, less, top) shows its own screen.
    alternate: bool = False

    @property
    def cursor_line(self) -> int:
        return self.history_size + self.cursor_y

    @property
    def first_line(self) -> int:
        """The number of ``lines[0]``."""
        return self.history_size + self.rows - len(self.lines)


def new_output(snapshot: Snapshot, mark: int, mark_text: str) -> list[str] | None:
    """The lines from line ``mark`` (the cursor line at the previous observation) on.

    That line is included, since the agent may have typed on it (the echo of its command).
    None when there is nothing new, or when the history was cleared (``mark`` is past the
    cursor: ``reset``, or a ``clear`` that does not scroll the screen into the history).
    """
    if mark > snapshot.cursor_line:
        return None
    fresh = _trim(snapshot.lines[max(mark - snapshot.first_line, 0) :])
    if not fresh or fresh == [mark_text]:
        return None
    return fresh


_SEND_SCRIPT = """\
s=$1; shift
while [ $# -gt 0 ]; do
  if [ "$1" = text ]; then tmux send-keys -t "$s" -l -- "$2" || exit
  else tmux send-keys -t "$s" "$2" || exit; fi
  shift 2
done"""

#: Literal text is typed in pieces of this many characters (tmux limits one command's size).
_CHUNK = 2048
#: At most this many characters of keystrokes go in one exec (the argv size limit).
_BATCH = 64 * 1024
_POSITION = "#{history_size} #{cursor_y} #{pane_height} #{alternate_on}"


class TmuxSession:
    """A tmux session in a sandbox, driven through ``Sandbox.exec``.

    The tmux server lives inside the sandbox, so closing the sandbox (or ``kill_all``) ends it.
    Output diffs are by line position: the cursor line at each observation is remembered and
    the next observation shows the lines from it on.
    """

    def __init__(self, sandbox: Sandbox, config: TerminalConfig, name: str = "main"):
        self.sandbox = sandbox
        self.config = config
        self.name = name
        self._mark = 0
        self._mark_text = ""
        self._alternate = False

    async def start(self) -> str:
        """Start the session and return the first screen once the shell has drawn its prompt."""
        cfg = self.config
        conf = "/tmp/.palaestra-tmux.conf"
        res = await self.sandbox.exec(
            [
                "sh",
                "-c",
                'command -v tmux >/dev/null || { echo "tmux is not installed"; exit 127; }\n'
                'printf "set -g history-limit %s\\n" "$1" > "$2" && shift 2 && exec tmux "$@"',
                "sh",
                str(cfg.history_limit),
                conf,
                "-f",
                conf,
                "new-session",
                "-d",
                "-s",
                self.name,
                "-x",
                str(cfg.width),
                "-y",
                str(cfg.height),
                "-c",
                self.sandbox.spec.workdir,
            ],
            timeout=30,
        )
        if not res.ok:
            raise SandboxError(
                f"could not start tmux in the sandbox ({res.output.strip() or res.exit_code}). "
                "The terminus scaffold needs tmux inside the sandbox: for the local sandbox "
                "install it on the host (apt-get install -y tmux); for images, in the image."
            )
        deadline = time.monotonic() + cfg.startup_timeout
        while True:
            snap = await self.snapshot()
            if any(line.strip() for line in snap.lines) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        self._remember(snap)
        return self._screen(snap)

    def _remember(self, snap: Snapshot) -> None:
        self._alternate = snap.alternate
        self._mark = snap.cursor_line
        index = self._mark - snap.first_line
        self._mark_text = snap.lines[index].rstrip() if 0 <= index < len(snap.lines) else ""

    @staticmethod
    def _screen(snap: Snapshot) -> str:
        return "\n".join(_trim(snap.lines[len(snap.lines) - snap.rows :]))

    async def alive(self) -> bool:
        res = await self.sandbox.exec(["tmux", "has-session", "-t", self.name], timeout=30)
        return res.ok

    async def send(self, keystrokes: str) -> bool:
        """Type ``keystrokes``; False when the session is gone (its shell exited)."""
        batches: list[list[str]] = [[]]
        size = 0
        for kind, value in key_ops(keystrokes):
            pieces = [value[i : i + _CHUNK] for i in range(0, len(value), _CHUNK)]
            for piece in pieces if kind == "text" else [value]:
                if size + len(piece) > _BATCH:
                    batches.append([])
                    size = 0
                batches[-1] += [kind, piece]
                size += len(piece)
        if not batches[0]:
            return await self.alive()
        for args in batches:
            res = await self.sandbox.exec(
                ["sh", "-c", _SEND_SCRIPT, "sh", self.name, *args], timeout=30
            )
            if not res.ok:
                if not await self.alive():
                    return False
                raise SandboxError(f"tmux send-keys failed: {res.output.strip()}")
        return True

    async def snapshot(self) -> Snapshot:
        """Position and lines of the pane, then its scrollback cleared: one tmux command, so
        nothing printed in between is lost. The scrollback then only ever holds the lines
        scrolled off since the previous snapshot, and a snapshot reads no more than those.
        """
        target = ("-t", self.name)
        res = await self.sandbox.exec(
            ["tmux", "display-message", "-p", *target, _POSITION, ";"]
            + ["capture-pane", "-p", *target, "-S", "-", ";", "clear-history", *target],
            timeout=30,
            output_limit=64 << 20,
        )
        if not res.ok:
            raise SandboxError(f"tmux capture-pane failed: {res.output.strip() or res.exit_code}")
        head, _, body = res.stdout.partition("\n")
        history_size, cursor_y, rows, alternate = map(int, head.split())
        lines = body.split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # the newline ending the last row
        return Snapshot(history_size, cursor_y, rows, lines, bool(alternate))

    async def incremental_output(self) -> str:
        """What is new since the last call (or since :meth:`start`); see the module docstring.

        When the session has ended (the agent exited its shell), a new one is started and
        the observation says so.
        """
        try:
            snap = await self.snapshot()
        except SandboxError:
            if await self.alive():
                raise
            screen = await self.start()
            return (
                "The shell exited, which ended the terminal session; a new session was started "
                f"(earlier output and shell state are gone).\nCurrent Terminal Screen:\n{screen}"
            )
        full_screen = snap.alternate or self._alternate  # a full-screen program ran or runs
        fresh = None if full_screen else new_output(snap, self._mark, self._mark_text)
        mark_text = self._mark_text
        self._remember(snap)
        if fresh is None:
            return "Current Terminal Screen:\n" + self._screen(snap)
        note = ""
        if not fresh[0].startswith(mark_text):  # tmux dropped the oldest lines past its limit
            note = "[earlier lines of new output went past the scrollback and are not shown]\n"
        return "New Terminal Output:\n" + note + "\n".join(fresh)


__all__ = ["Snapshot", "TerminalConfig", "TmuxSession", "key_ops", "new_output"]
