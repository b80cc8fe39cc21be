"""A container's stdio on a raw connection to the Docker engine (the attach protocol).

The helper protocol needs a writer that sends at once (a cancel frame is written without
waiting), which aiodocker's attach stream does not offer; the engine's stdout framing is
decoded here, and its stderr frames kept as a short tail for error messages.
"""

from __future__ import annotations

import asyncio
import struct
from urllib.parse import quote, urlencode

from palaestra.sandbox.base import SandboxError

_STDERR_TAIL = 4096
_STREAM_LIMIT = 1 << 20
_FRAME = struct.Struct(">BxxxL")


class _Writer:
    """The write half of an attach connection, shaped like :class:`asyncio.StreamWriter`."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def write(self, data: bytes) -> None:
        self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()

    def write_eof(self) -> None:
        self._writer.write_eof()

    def close(self) -> None:
        self._writer.close()

    def is_closing(self) -> bool:
        return self._writer.is_closing()


class AttachedStream:
    """A container's stdin (``writer``) and demultiplexed stdout (``reader``); the engine's
    frames for stderr are kept as a short tail for error messages."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = asyncio.StreamReader(limit=_STREAM_LIMIT)
        self.writer = _Writer(writer)
        self._raw_writer = writer
        self._stderr = bytearray()
        self._pump = asyncio.create_task(self._demux(reader))

    async def _demux(self, raw: asyncio.StreamReader) -> None:
        try:
            while True:
                stream, size = _FRAME.unpack(await raw.readexactly(_FRAME.size))
                data = await raw.readexactly(size)
                if stream == 1:
                    self.reader.feed_data(data)
                else:
                    self._stderr += data
                    del self._stderr[:-_STDERR_TAIL]
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.reader.feed_eof()

    def stderr_tail(self) -> str:
        return self._stderr.decode(errors="replace").strip()

    def close(self) -> None:
        self._raw_writer.close()


async def attach(socket_path: str, container_id: str, timeout: float) -> AttachedStream:
    """Attach to a created container's stdio with the engine's upgrade protocol."""
    query = urlencode({"stream": 1, "stdin": 1, "stdout": 1, "stderr": 1})
    reader, writer = await asyncio.open_unix_connection(socket_path, limit=_STREAM_LIMIT)
    writer.write(
        f"POST /containers/{quote(container_id)}/attach?{query} HTTP/1.1\r\n"
        "Host: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n".encode()
    )
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        writer.close()
        raise SandboxError(f"cannot attach to container {container_id}: {exc!r}") from exc
    status = head.split(b"\r\n", 1)[0].decode(errors="replace")
    if " 101 " not in status and " 200 " not in status:
        writer.close()
        raise SandboxError(f"cannot attach to container {container_id}: {status}")
    return AttachedStream(reader, writer)
