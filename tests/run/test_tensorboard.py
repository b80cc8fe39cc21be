"""The TensorBoard event files, read back with TensorBoard's own reader and protobuf classes."""

from __future__ import annotations

import math
import os
import socket
import struct

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow as tb_records

from palaestra.run.tensorboard import ScalarWriter, crc32c, encode_event, masked_crc32c


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _records(path) -> list[bytes]:
    """Every record of an event file; raises DataLossError on a bad CRC."""
    reader, records = tb_records.PyRecordReader_New(str(path)), []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return records
        records.append(reader.record())


def _scalars(logdir) -> EventAccumulator:
    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return acc


def test_crc32c_matches_the_standard_and_tensorboards():
    assert crc32c(b"") == 0 and crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    for data in (b"", b"a", b"brain.Event:2", os.urandom(4096)):
        assert masked_crc32c(data) == tb_records.masked_crc32c(data)


def test_events_decode_with_tensorboards_protobuf():
    first = event_pb2.Event.FromString(encode_event(1.5, 0, file_version="brain.Event:2"))
    assert (first.wall_time, first.step, first.file_version) == (1.5, 0, "brain.Event:2")
    assert not first.HasField("summary")
    event = event_pb2.Event.FromString(
        encode_event(1712345678.25, 2**40 + 3, scalars={"pass_rate": 0.75, "é/x": -2.5})
    )
    assert (event.wall_time, event.step) == (1712345678.25, 2**40 + 3)
    assert [(v.tag, v.simple_value) for v in event.summary.value] == [
        ("pass_rate", 0.75),
        ("é/x", -2.5),
    ]
    assert event_pb2.Event.FromString(encode_event(0.0, -1)).step == -1  # int64 varint
    big = event_pb2.Event.FromString(encode_event(0.0, 1, scalars={"v": 1e39, "n": math.nan}))
    assert big.summary.value[0].simple_value == math.inf  # past float32: a float32 cast
    assert math.isnan(big.summary.value[1].simple_value)


def test_scalars_read_back_by_event_accumulator(tmp_path):
    points = [
        {"pass_rate": 1.0, "error_rate": 0.0, "cost_usd": None, "reward": 1.0},
        {"pass_rate": 0.5, "error_rate": 0.5, "cost_usd": 0.125, "reward": 0.0},
        {"pass_rate": 2 / 3, "error_rate": 1 / 3, "cost_usd": 0.3, "reward": 0.7},
    ]
    with ScalarWriter(tmp_path / "tb") as writer:
        for step, point in enumerate(points, 1):
            writer.add_scalars(step, point, wall_time=1000.0 + step)
    name = writer.path.name
    assert writer.path.parent == tmp_path / "tb"
    assert name.startswith("events.out.tfevents.") and name.endswith(
        f".{socket.gethostname()}.{os.getpid()}.palaestra"
    )
    acc = _scalars(tmp_path / "tb")
    assert acc.file_version == 2.0
    assert sorted(acc.Tags()["scalars"]) == ["cost_usd", "error_rate", "pass_rate", "reward"]
    for tag in ("pass_rate", "error_rate", "reward"):
        got = [(e.step, e.wall_time, e.value) for e in acc.Scalars(tag)]
        assert got == [(s, 1000.0 + s, _f32(p[tag])) for s, p in enumerate(points, 1)]
    # an unknown cost is left out, not written as 0
    assert [(e.step, e.value) for e in acc.Scalars("cost_usd")] == [(2, 0.125), (3, _f32(0.3))]


def test_every_record_passes_the_crc_checks_and_a_flipped_byte_fails_them(tmp_path):
    with ScalarWriter(tmp_path) as writer:
        for step in range(1, 51):
            writer.add_scalars(step, {"pass_rate": step / 50})
    records = _records(writer.path)
    assert len(records) == 51  # the file version, then one per add_scalars
    assert event_pb2.Event.FromString(records[0]).file_version == "brain.Event:2"
    assert [event_pb2.Event.FromString(r).step for r in records[1:]] == list(range(1, 51))
    data = bytearray(writer.path.read_bytes())
    data[len(data) - 10] ^= 0x01  # inside the last record's data
    writer.path.write_bytes(bytes(data))
    with pytest.raises(errors.DataLossError, match="crc32"):
        _records(writer.path)


def test_points_are_readable_while_the_writer_is_open(tmp_path):
    writer = ScalarWriter(tmp_path)
    try:
        writer.add_scalars(1, {"pass_rate": 0.5})
        writer.flush()
        assert [(e.step, e.value) for e in _scalars(tmp_path).Scalars("pass_rate")] == [(1, 0.5)]
    finally:
        writer.close()
    writer.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        writer.add_scalars(2, {"pass_rate": 1.0})


def test_a_resumed_run_adds_a_file_and_tensorboard_merges_them(tmp_path):
    with ScalarWriter(tmp_path) as first:
        for step in (1, 2):
            first.add_scalars(step, {"pass_rate": 1.0})
    with ScalarWriter(tmp_path) as second:  # same process, same second: a distinct, later name
        for step in (3, 4):
            second.add_scalars(step, {"pass_rate": 0.5})
    assert first.path != second.path and sorted([first.path, second.path])[-1] == second.path
    got = [(e.step, e.value) for e in _scalars(tmp_path).Scalars("pass_rate")]
    assert got == [(1, 1.0), (2, 1.0), (3, 0.5), (4, 0.5)]


def test_a_writer_that_got_no_point_leaves_no_file(tmp_path):
    """A run refused before its first episode (a mismatched resume) must not leave an event
    file holding only its header, which TensorBoard would list as an empty run."""
    ScalarWriter(tmp_path).close()
    assert list(tmp_path.iterdir()) == []
    with ScalarWriter(tmp_path) as writer:
        writer.add_scalars(0, {"unknown": None})  # nothing known: still no point
    assert list(tmp_path.iterdir()) == []
    with ScalarWriter(tmp_path) as writer:
        writer.add_scalars(1, {"pass_rate": 0.5})
    assert len(list(tmp_path.iterdir())) == 1
