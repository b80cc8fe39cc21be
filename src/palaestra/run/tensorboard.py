"""A TensorBoard scalar stream in pure Python: event files without TensorFlow or protobuf.

An event file is a sequence of TFRecords, each one serialized ``tensorflow.Event`` protobuf::

    uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)

(little-endian; CRC32C is Castagnoli's, masked as ``((crc >> 15) | (crc << 17)) + 0xa282ead8``).
The messages, encoded by hand here, are ``Event {double wall_time = 1; int64 step = 2;
string file_version = 3; Summary summary = 5}``, ``Summary {repeated Value value = 1}`` and
``Value {string tag = 1; float simple_value = 2}``. The first record of a file carries only
``file_version = "brain.Event:2"``.

``tensorboard --logdir DIR`` merges the files of a directory, so a resumed run writes a new
file next to the old ones; its steps must continue the old ones' (TensorBoard drops points
older than a step that goes back, taking it for a restart).
"""

from __future__ import annotations

import math
import os
import socket
import struct
import time
from pathlib import Path

from palaestra.run.scalars import BackgroundAppender


def _crc32c_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), table-driven."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tf_record(data: bytes) -> bytes:
    """``data`` framed as one TFRecord."""
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", masked_crc32c(length))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64: a negative number is its 64-bit two's complement
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _float32(value: float) -> bytes:
    try:
        return struct.pack("<f", value)
    except OverflowError:  # finite but past float32's range: what a float32 cast gives
        return struct.pack("<f", math.copysign(math.inf, value))


def encode_event(
    wall_time: float,
    step: int,
    *,
    file_version: str | None = None,
    scalars: dict[str, float] | None = None,
) -> bytes:
    """A serialized ``Event``: the file version, or a ``Summary`` of ``simple_value`` scalars."""
    out = b"\x09" + struct.pack("<d", wall_time) + b"\x10" + _varint(step)  # fields 1 and 2
    if file_version is not None:
        out += _length_delimited(3, file_version.encode())
    if scalars is not None:
        values = b"".join(
            _length_delimited(1, _length_delimited(1, tag.encode()) + b"\x15" + _float32(v))
            for tag, v in scalars.items()
        )  # Summary.value (1) = Value {tag (1), simple_value (2, fixed32: tag byte 0x15)}
        out += _length_delimited(5, values)
    return out


class ScalarWriter:
    """Writes scalars to a new event file in ``logdir``, which ``tensorboard --logdir`` reads.

    ``add_scalars`` encodes one ``Event`` and queues it: the file is written and flushed by a
    thread of its own (see :class:`~palaestra.run.scalars.BackgroundAppender`), so it is safe to
    call from the event loop. ``close`` writes every point added before it, and removes the
    file if no point was added: a run refused before its first episode leaves nothing behind.
    """

    def __init__(self, logdir: Path | str) -> None:
        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        host, pid, stamp = socket.gethostname(), os.getpid(), int(time.time())
        while True:  # a second writer of this process in the same second: the next second's name
            self.path = self.logdir / f"events.out.tfevents.{stamp:010d}.{host}.{pid}.palaestra"
            try:
                file = self.path.open("xb")
                break
            except FileExistsError:
                stamp += 1
        self._points = 0
        self._out = BackgroundAppender(file)
        self._out.append(tf_record(encode_event(time.time(), 0, file_version="brain.Event:2")))

    def add_scalars(
        self, step: int, scalars: dict[str, float | None], wall_time: float | None = None
    ) -> None:
        """One point per tag at ``step``; a None value (unknown) is left out."""
        known = {tag: float(v) for tag, v in scalars.items() if v is not None}
        if known:
            wall_time = time.time() if wall_time is None else wall_time
            self._out.append(tf_record(encode_event(wall_time, step, scalars=known)))
            self._points += 1

    def flush(self) -> None:
        """Wait until every point added so far is in the file (blocking)."""
        self._out.flush()

    def close(self) -> None:
        """Write what is queued and close the file (blocking); idempotent."""
        self._out.close()
        if not self._points:
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> ScalarWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
