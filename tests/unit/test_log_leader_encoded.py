"""append_leader_encoded: a leader's own batch is stored without being parsed and CRC-checked
a second time, yet offsets, epochs and the batch's fixed header are still checked; fetched
batches (append_as_follower) stay fully validated. Run against both logs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kraft.control_records import KRaftVersionRecord, encode_control_batch
from kraft.ids import Epoch, Offset
from kraft.records import CRC_START, encode_batch
from kraft.storage.memory_log import MemoryLog
from kraft.storage.replicated_log import AppendViolation, LogAppendError, ReplicatedLog
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
            log = SegmentedLog.open(tmp_path / f"d{len(opened)}", segment_bytes=1024)
        opened.append(log)
        return log

    yield factory
    for log in opened:
        log.close()


def leader_batch(base: int, epoch: int, n: int = 3) -> bytes:
    return encode_batch(base, epoch, [b"v%d" % i for i in range(n)], timestamp_ms=0)


def own(log: ReplicatedLog, data: bytes, first: int, last: int, epoch: int) -> None:
    log.append_leader_encoded(data, Offset(first), Offset(last), Epoch(epoch))


def with_bad_crc(data: bytes) -> bytes:
    """The batch with one byte of its last record flipped: its CRC no longer matches."""
    assert len(data) > CRC_START + 4
    return data[:-1] + bytes([data[-1] ^ 0xFF])


def test_stores_the_batch_as_encoded(make_log: Factory) -> None:
    log = make_log()
    first = leader_batch(0, 1)
    control = encode_control_batch(3, 2, KRaftVersionRecord(0, 0), timestamp_ms=0)
    info = log.append_leader_encoded(first, Offset(0), Offset(2), Epoch(1))
    assert (info.first_offset, info.last_offset, info.last_epoch, info.bytes) == (
        0,
        2,
        1,
        len(first),
    )
    own(log, control, 3, 3, 2)
    assert (log.end_offset, log.last_epoch) == (4, 2)
    assert log.epoch_entries() == ((1, 0), (2, 3))
    assert bytes(log.read(Offset(0), 1 << 20).data) == first + control


def test_does_not_check_the_crc_again(make_log: Factory) -> None:
    """The skipped work is real: a CRC the core would never get wrong is not recomputed, while
    the same bytes arriving from a leader are refused."""
    damaged = with_bad_crc(leader_batch(0, 1))
    fetched = make_log()
    with pytest.raises(LogAppendError) as e:
        fetched.append_as_follower(damaged)
    assert e.value.violation is AppendViolation.CORRUPT_BATCH
    assert fetched.end_offset == 0
    log = make_log()
    own(log, damaged, 0, 2, 1)
    assert log.end_offset == 3


def _mismatches() -> list[tuple[str, bytes, int, int, int, AppendViolation]]:
    b = leader_batch(2, 3)
    return [
        ("empty", b"", 2, 2, 3, AppendViolation.EMPTY),
        ("not at the log end", leader_batch(5, 3), 5, 7, 3, AppendViolation.NOT_CONTIGUOUS),
        ("epoch goes back", leader_batch(2, 1), 2, 4, 1, AppendViolation.EPOCH_DECREASED),
        ("header base offset", leader_batch(3, 3), 2, 4, 3, AppendViolation.CORRUPT_BATCH),
        ("header epoch", leader_batch(2, 4), 2, 4, 3, AppendViolation.CORRUPT_BATCH),
        ("last offset", b, 2, 5, 3, AppendViolation.CORRUPT_BATCH),
        ("two batches", b + leader_batch(5, 3), 2, 4, 3, AppendViolation.CORRUPT_BATCH),
        ("cut short", b[:-1], 2, 4, 3, AppendViolation.CORRUPT_BATCH),
        ("below a header", b[:40], 2, 4, 3, AppendViolation.CORRUPT_BATCH),
    ]


@pytest.mark.parametrize(
    ("data", "first", "last", "epoch", "violation"),
    [m[1:] for m in _mismatches()],
    ids=[m[0] for m in _mismatches()],
)
def test_cheap_checks_still_refuse(
    make_log: Factory,
    data: bytes,
    first: int,
    last: int,
    epoch: int,
    violation: AppendViolation,
) -> None:
    log = make_log()
    own(log, leader_batch(0, 2, n=2), 0, 1, 2)
    before = (log.end_offset, log.epoch_entries(), bytes(log.read(Offset(0), 1 << 20).data))
    with pytest.raises(LogAppendError) as e:
        own(log, data, first, last, epoch)
    assert e.value.violation is violation
    assert (log.end_offset, log.epoch_entries(), bytes(log.read(Offset(0), 1 << 20).data)) == (
        before
    )
