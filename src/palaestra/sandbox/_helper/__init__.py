"""The sandbox's pid 1: it runs commands for the host and reaps orphans.

This package is the helper's specification and its Python implementation. Sandboxes start its
C twin (:mod:`palaestra.sandbox._helper_c`, a static binary built into the runtime bundle: no
interpreter start, about 8 ms less per sandbox) unless no C compiler was found or
``$PALAESTRA_HELPER`` says ``python`` (:mod:`palaestra.sandbox.helper_runtime`). Both speak the
protocol below; a change here is a change there, and the sandbox tests run both.

This package is not imported by palaestra to run it: a Python inside the sandbox imports it.
bubblewrap (local backend) or Docker (docker backend) mounts the helper's runtime bundle
(:mod:`palaestra.sandbox.helper_runtime`: the host's interpreter, its libraries and loader, the
stdlib modules used here and this package, compiled) at ``/.palaestra`` and starts its
``python3 -I -S`` with a one-line boot that puts ``/.palaestra`` on ``sys.path`` and calls
:func:`_helper.server.main`, as pid 1 of the sandbox (``--as-pid-1``). Nothing of the image is
used but ``/bin/sh`` (when there is one) and ``/etc/passwd``. So it uses the standard library
only, imports its own modules relatively and must start fast: it imports only modules built into
the interpreter or tiny ones (no ``json``, ``subprocess``, ``signal``, ``selectors``, ``ctypes``:
each costs milliseconds). A module imported inside a function must be named in the bundle's
probe (module-level imports are found by importing this package).

The host talks to it over stdin/stdout in frames: an 8-byte header (JSON length, blob length;
big-endian u32), a JSON object, then raw bytes. Every request carries an ``id`` that its
response echoes, so commands run concurrently and finish in any order. The helper greets with
``{"id": 0}`` once it serves. The frames are defined here (:data:`HEADER`,
:func:`encode_frame`, and JSON without the ``json`` package, which imports ``re``, ``enum``...:
milliseconds at every start); the host imports them from here too, so both ends share one
definition of the protocol.

Requests (``op``): ``exec`` (blob = stdin) answered with ``exit_code``, ``timed_out``,
``truncated``, ``oom_killed`` and ``stdout_len`` (blob = stdout + stderr); ``shell_run`` (blob =
the command; ``shell`` names the session, which the first run starts) answered the same way;
``shell_close`` answered once the session's processes are gone (:mod:`.shell`); ``kill_all``
answered once every other process is gone, the service's included, and, with
``restart_service`` true, the service started again (``error`` when it cannot start); ``cancel``
(no answer) kills a running command's tree, or a shell session's. A failed request is answered
with ``error``. The optional first argument is a JSON configuration (cgroup file descriptors,
rlimits, a ``service`` to start: the image's entrypoint and Harbor's command, started at the
helper's start and again by ``kill_all`` when asked; see :class:`~.server.Helper`); without it, a
command is tracked by its process group, its session, its descendants and a marker in its
environment (``PALAESTRA_EXEC=<id>``, inherited by everything it starts, so a ``setsid`` double
fork is still found).

Being pid 1 matters: processes in the sandbox cannot signal pid 1 except with signals it handles
(``kill -9 -1`` or ``pkill python3`` leave it alone), every orphan is re-parented to it, and
when it exits the kernel kills everything else in the sandbox.

Modules: :mod:`.server` (the entry, the request loop and its commands), :mod:`.shell`
(persistent shell sessions), :mod:`.spawn` (starting a command as a user, in its cgroup),
:mod:`.kill` (killing a command's processes: its cgroup, or its process tree), :mod:`.prctl`
(the one foreign function, from ``_ctypes``). They are few on purpose: each module imported
costs every sandbox's start about 60 microseconds.
"""

from __future__ import annotations

import struct

TYPE_CHECKING = False  # importing typing would add ~2 ms to every sandbox's start
if TYPE_CHECKING:
    from typing import Any

HEADER = struct.Struct(">II")

try:
    import _json

    class _ScanContext:
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = float  # NaN, Infinity

    _scan = _json.make_scanner(_ScanContext())
    _quote = _json.encode_basestring_ascii

    def loads(data: bytes | bytearray) -> Any:
        return _scan(data.decode(), 0)[0]

except ImportError:  # a Python without the C accelerator: slower start, same results
    import json

    loads = json.loads
    _quote = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def dumps(obj: Any) -> str:
    """Compact JSON for the protocol's values: dicts, lists, str, int, float, bool, None."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, str):
        return _quote(obj)
    if isinstance(obj, int):
        return int.__repr__(obj)
    if isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            return "NaN" if obj != obj else ("Infinity" if obj > 0 else "-Infinity")
        return float.__repr__(obj)
    if isinstance(obj, dict):
        return "{" + ",".join(f"{_quote(str(k))}:{dumps(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    raise TypeError(f"cannot encode {type(obj).__name__} in a frame")


def encode_frame(head: dict[str, Any], blob: bytes = b"") -> bytes:
    body = dumps(head).encode()
    return HEADER.pack(len(body), len(blob)) + body + blob


class Capture:
    """A command's stdout and stderr (``streams``: their keys, in that order) as its answer
    reports them: the first ``limit`` bytes of each, and whether either had more."""

    def __init__(self, limit: int, streams: tuple[int, int]) -> None:
        self.limit = limit
        self.streams = streams
        self.output = {key: bytearray() for key in streams}
        self.truncated = False

    def take(self, key: int, data: bytes) -> None:
        buf = self.output[key]
        room = self.limit - len(buf)
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        buf += data

    def result(
        self, request_id: int, exit_code: int | None, timed_out: bool, oom_killed: bool
    ) -> tuple[dict[str, Any], bytes]:
        """The answer's frame: its head and its blob (stdout then stderr)."""
        stdout, stderr = (self.output[key] for key in self.streams)
        head = {
            "id": request_id,
            "exit_code": exit_code,
            "timed_out": timed_out,
            "truncated": self.truncated,
            "oom_killed": oom_killed,
            "stdout_len": len(stdout),
        }
        return head, bytes(stdout + stderr)
