"""The background appender and the JSONL scalar stream: off the caller's thread, nothing lost."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time

import pytest

from palaestra.run.scalars import BackgroundAppender, JsonlScalarWriter


class _RecordingFile(io.BytesIO):
    """A file that notes the thread of every write and flush, optionally failing writes."""

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__()
        self.threads: set[str] = set()
        self.flushes = 0
        self.fail_after = fail_after
        self.data = b""

    def write(self, data) -> int:
        self.threads.add(threading.current_thread().name)
        if self.fail_after is not None and len(self.data) >= self.fail_after:
            raise OSError(28, "No space left on device")
        self.data += bytes(data)
        return len(data)

    def flush(self) -> None:
        self.threads.add(threading.current_thread().name)
        self.flushes += 1


async def test_appends_from_the_event_loop_are_written_by_another_thread():
    file = _RecordingFile()
    out = BackgroundAppender(file)
    for i in range(200):
        out.append(b"%d\n" % i)
        await asyncio.sleep(0)
    await asyncio.to_thread(out.close)
    assert file.data == b"".join(b"%d\n" % i for i in range(200))  # all of it, in order
    assert file.closed and file.flushes >= 1
    assert threading.current_thread().name not in file.threads


def test_each_append_is_flushed_without_being_asked():
    file = _RecordingFile()
    out = BackgroundAppender(file)
    out.append(b"x")
    deadline = time.monotonic() + 10
    while not (file.flushes and file.data == b"x") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert file.data == b"x" and file.flushes >= 1
    out.close()


def test_a_write_error_is_raised_by_flush_and_close_and_never_hangs():
    out = BackgroundAppender(_RecordingFile(fail_after=3))
    out.append(b"abc")
    out.append(b"def")
    with pytest.raises(OSError, match="No space left"):
        out.flush()
    out.append(b"ghi")  # dropped: the stream already failed
    with pytest.raises(OSError, match="No space left"):
        out.close()


def test_jsonl_lines_keep_unknown_values_as_null(tmp_path):
    path = tmp_path / "scalars.jsonl"
    path.write_text('{"step": 1}\n')  # appended to, never truncated
    writer = JsonlScalarWriter(path)
    writer.add_scalars(2, {"pass_rate": 0.5, "cost_usd": None}, wall_time=12.5)
    writer.flush()
    assert json.loads(path.read_text().splitlines()[1]) == {
        "step": 2,
        "wall_time": 12.5,
        "pass_rate": 0.5,
        "cost_usd": None,
    }
    writer.close()


def test_jsonl_file_created_but_never_written_is_removed_and_an_old_one_kept(tmp_path):
    new = tmp_path / "new.jsonl"
    JsonlScalarWriter(new).close()
    assert not new.exists()
    old = tmp_path / "old.jsonl"
    old.write_text('{"step": 1}\n')
    JsonlScalarWriter(old).close()  # a resumed run that added nothing keeps the old lines
    assert old.read_text() == '{"step": 1}\n'
    writer = JsonlScalarWriter(old)
    writer.add_scalars(2, {"pass_rate": 1.0}, wall_time=5.0)
    writer.close()
    assert old.read_text().splitlines()[1] == '{"step": 2, "wall_time": 5.0, "pass_rate": 1.0}'
