"""ReplicatedLog behaviour, run against both MemoryLog and SegmentedLog."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kraft.control_records import KRaftVersionRecord
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.records import decode_batch, encode_batch, iter_batches
from kraft.storage.memory_log import MemoryLog
from kraft.storage.replicated_log import (
    AppendViolation,
    LogAppendError,
    LogOffsetOutOfRangeError,
    ReplicatedLog,
)
from kraft.storage.segmented_log import SegmentedLog

Factory = Callable[[], ReplicatedLog]


@pytest.fixture(params=["memory", "segmented"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    opened: list[ReplicatedLog] = []

    def factory() -> ReplicatedLog:
        log: ReplicatedLog
        if request.param == "memory":
            log = MemoryLog()
        else:
            # Small segments so that the shared tests cross segment boundaries too.
            log = SegmentedLog.open(tmp_path / f"d{len(opened)}", segment_bytes=1024)
        opened.append(log)
        return log

    yield factory
    for log in opened:
        log.close()


def append(log: ReplicatedLog, epoch: int, *values: bytes) -> None:
    log.append_as_leader(list(values), Epoch(epoch), timestamp_ms=1000)


def values_from(log: ReplicatedLog, offset: int = 0, max_bytes: int = 1 << 20) -> list[bytes]:
    """Every value from `offset` to the end, fetched the way a follower does."""
    out: list[bytes] = []
    while offset < log.end_offset:
        result = log.read(Offset(offset), max_bytes)
        assert result.first_offset <= offset < result.next_offset
        for pos, _h in iter_batches(result.data):
            _header, records = decode_batch(result.data, pos)
            out.extend(r.value or b"" for r in records if r.offset >= offset)
        offset = result.next_offset
    return out


def test_empty_log(make_log: Factory) -> None:
    log = make_log()
    assert (log.start_offset, log.end_offset, log.last_epoch) == (0, 0, 0)
    assert log.end_offset_and_epoch == OffsetAndEpoch(Epoch(0), Offset(0))
    assert log.epoch_entries() == ()
    empty = log.read(Offset(0), 100)
    assert (empty.first_offset, empty.next_offset, len(empty.data)) == (0, 0, 0)


def test_leader_append_assigns_offsets_from_end(make_log: Factory) -> None:
    log = make_log()
    info = log.append_as_leader([b"a", b"b", b"c"], Epoch(1), timestamp_ms=5)
    assert (info.first_offset, info.last_offset, info.last_epoch, info.batches) == (0, 2, 1, 1)
    info = log.append_as_leader([b"d"], Epoch(1), timestamp_ms=6)
    assert (info.first_offset, info.last_offset) == (3, 3)
    assert log.end_offset == 4
    assert values_from(log) == [b"a", b"b", b"c", b"d"]
    assert values_from(log, 2) == [b"c", b"d"]


def test_control_append(make_log: Factory) -> None:
    log = make_log()
    append(log, 1, b"x")
    info = log.append_control_as_leader(KRaftVersionRecord(0, 1), Epoch(1), timestamp_ms=1)
    assert (info.first_offset, info.last_offset) == (1, 1)
    result = log.read(Offset(1), 1000)
    header, _ = decode_batch(result.data)
    assert header.is_control


def test_leader_append_rejects_lower_epoch(make_log: Factory) -> None:
    log = make_log()
    append(log, 3, b"a")
    with pytest.raises(LogAppendError) as err:
        append(log, 2, b"b")
    assert err.value.violation is AppendViolation.EPOCH_DECREASED
    assert log.end_offset == 1


def test_read_returns_at_least_one_whole_batch(make_log: Factory) -> None:
    log = make_log()
    append(log, 1, b"x" * 300, b"y" * 300)
    append(log, 1, b"z")
    # Kafka: a fetch returns at least one whole batch even if it exceeds max_bytes.
    result = log.read(Offset(1), 10)
    assert (result.first_offset, result.next_offset) == (0, 2)
    assert len(result.data) > 600


def test_read_respects_max_bytes_on_batch_boundaries(make_log: Factory) -> None:
    log = make_log()
    for i in range(10):
        append(log, 1, bytes([i]) * 20)
    one = log.read(Offset(0), 1).size
    result = log.read(Offset(0), 3 * one + one // 2)
    assert (result.first_offset, result.next_offset) == (0, 3)
    assert result.size == 3 * one


def test_read_out_of_range(make_log: Factory) -> None:
    log = make_log()
    append(log, 1, b"a")
    with pytest.raises(LogOffsetOutOfRangeError):
        log.read(Offset(2), 100)
    with pytest.raises(LogOffsetOutOfRangeError):
        log.read(Offset(-1), 100)


def test_follower_append_of_leader_batches(make_log: Factory) -> None:
    leader, follower = make_log(), make_log()
    for epoch in (1, 1, 2, 4):
        append(leader, epoch, b"v%d" % epoch, b"w")
    offset = 0
    while offset < leader.end_offset:
        result = leader.read(Offset(offset), 200)
        follower.append_as_follower(result.data)
        offset = result.next_offset
    assert follower.end_offset == leader.end_offset == 8
    assert follower.epoch_entries() == leader.epoch_entries() == ((1, 0), (2, 4), (4, 6))
    assert values_from(follower) == values_from(leader)


def batch(base: int, epoch: int, *values: bytes) -> bytes:
    return encode_batch(base, epoch, list(values) or [b"v"], timestamp_ms=1)


def flip(data: bytes, index: int) -> bytes:
    out = bytearray(data)
    out[index] ^= 0xFF
    return bytes(out)


@pytest.mark.parametrize(
    ("data", "violation"),
    [
        (b"", AppendViolation.EMPTY),
        (batch(3, 2), AppendViolation.NOT_CONTIGUOUS),  # gap after end offset 2
        (batch(2, 2) + batch(4, 2), AppendViolation.NOT_CONTIGUOUS),  # gap between batches
        (batch(2, 1), AppendViolation.EPOCH_DECREASED),  # below the last epoch 2
        (batch(2, 3) + batch(3, 2), AppendViolation.EPOCH_DECREASED),  # decreasing inside
        (batch(2, 2) + batch(3, 2)[:-1], AppendViolation.CORRUPT_BATCH),  # torn last batch
        (flip(batch(2, 2), -2), AppendViolation.CORRUPT_BATCH),  # CRC mismatch
    ],
    ids=["empty", "gap", "inner-gap", "low-epoch", "inner-epoch", "torn", "crc"],
)
def test_follower_append_validation_appends_nothing(
    make_log: Factory, data: bytes, violation: AppendViolation
) -> None:
    log = make_log()
    log.append_as_follower(batch(0, 1, b"a") + batch(1, 2, b"b"))
    before = (log.end_offset, log.epoch_entries(), values_from(log))
    with pytest.raises(LogAppendError) as err:
        log.append_as_follower(data)
    assert err.value.violation is violation
    assert (log.end_offset, log.epoch_entries(), values_from(log)) == before
    # The log still accepts the right next batch.
    log.append_as_follower(batch(2, 2, b"c"))
    assert values_from(log) == [b"a", b"b", b"c"]


def test_truncate_to_removes_records_at_and_after_offset(make_log: Factory) -> None:
    log = make_log()
    append(log, 1, b"a", b"b")
    append(log, 2, b"c", b"d")
    append(log, 3, b"e")
    log.truncate_to(Offset(4))
    assert log.end_offset == 4
    assert log.epoch_entries() == ((1, 0), (2, 2))
    assert log.last_epoch == 2
    assert values_from(log) == [b"a", b"b", b"c", b"d"]


def test_truncate_inside_a_batch_truncates_at_its_base_offset(make_log: Factory) -> None:
    log = make_log()
    append(log, 1, b"a", b"b")
    append(log, 2, b"c", b"d", b"e")
    log.truncate_to(Offset(3))  # inside the batch [2, 4]
    assert log.end_offset == 2
    assert log.epoch_entries() == ((1, 0),)
    append(log, 5, b"x")
    assert values_from(log) == [b"a", b"b", b"x"]
    assert log.epoch_entries() == ((1, 0), (5, 2))


def test_truncate_to_end_or_beyond_is_a_no_op(make_log: Factory) -> None:
    log = make_log()
    append(log, 1, b"a")
    log.truncate_to(Offset(1))
    log.truncate_to(Offset(9))
    assert values_from(log) == [b"a"]


def test_truncate_to_zero_empties_the_log(make_log: Factory) -> None:
    log = make_log()
    for _ in range(20):
        append(log, 1, b"a" * 50)
    log.truncate_to(Offset(0))
    assert (log.end_offset, log.epoch_entries(), log.last_epoch) == (0, (), 0)
    append(log, 2, b"b")
    assert values_from(log) == [b"b"]


def test_end_offset_for_epoch_for_divergence(make_log: Factory) -> None:
    # KIP-595: "If they do not match, the fetch response will indicate the largest epoch and its
    # end offset before the requested epoch."
    log = make_log()
    append(log, 1, b"a", b"b")
    append(log, 3, b"c")
    append(log, 3, b"d")
    append(log, 6, b"e")
    assert log.epoch_entries() == ((1, 0), (3, 2), (6, 4))
    assert log.end_offset_for_epoch(Epoch(1)) == OffsetAndEpoch(Epoch(1), Offset(2))
    assert log.end_offset_for_epoch(Epoch(2)) == OffsetAndEpoch(Epoch(1), Offset(2))
    assert log.end_offset_for_epoch(Epoch(5)) == OffsetAndEpoch(Epoch(3), Offset(4))
    assert log.end_offset_for_epoch(Epoch(6)) == OffsetAndEpoch(Epoch(6), Offset(5))
    assert log.end_offset_for_epoch(Epoch(7)) == OffsetAndEpoch(Epoch(-1), Offset(-1))
    assert log.end_offset_for_epoch(Epoch(0)) == OffsetAndEpoch(Epoch(0), Offset(0))


def test_flush_tracks_durable_offset(make_log: Factory) -> None:
    log = make_log()
    append(log, 1, b"a")
    assert log.flush_needed
    assert log.flushed_offset == 0
    log.flush()
    assert not log.flush_needed
    assert log.flushed_offset == 1
    append(log, 1, b"b")
    assert log.flushed_offset == 1
    log.truncate_to(Offset(0))
    assert log.flushed_offset == 0


def test_advance_start_offset(make_log: Factory) -> None:
    log = make_log()
    for i in range(30):
        append(log, 1 + i // 10, b"%02d" % i + b"." * 60)
    log.advance_start_offset(Offset(15))
    assert log.start_offset == 15
    assert log.epoch_entries() == ((2, 15), (3, 20))
    assert values_from(log, 15)[0].startswith(b"15")
    with pytest.raises(LogOffsetOutOfRangeError):
        log.read(Offset(14), 100)
    with pytest.raises(LogOffsetOutOfRangeError):
        log.advance_start_offset(Offset(31))


def test_truncate_fully_and_start_at(make_log: Factory) -> None:
    log = make_log()
    append(log, 1, b"a", b"b")
    log.truncate_fully_and_start_at(Offset(50))
    assert (log.start_offset, log.end_offset, log.epoch_entries()) == (50, 50, ())
    append(log, 4, b"c")
    assert values_from(log, 50) == [b"c"]
    assert log.epoch_entries() == ((4, 50),)
