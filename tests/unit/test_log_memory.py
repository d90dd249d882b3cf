"""MemoryLog: what survives simulate_crash() matches what SegmentedLog recovers."""

from __future__ import annotations

from pathlib import Path

from kraft.ids import Epoch, Offset
from kraft.records import iter_batches
from kraft.storage.memory_log import MemoryLog
from kraft.storage.segmented_log import LOG_DIR_NAME, SegmentedLog


def test_crash_drops_everything_not_flushed() -> None:
    log = MemoryLog()
    log.append_as_leader([b"a", b"b"], Epoch(1), timestamp_ms=0)
    log.flush()
    log.append_as_leader([b"c"], Epoch(2), timestamp_ms=0)
    log.append_as_leader([b"d"], Epoch(2), timestamp_ms=0)
    log.simulate_crash()
    assert (log.end_offset, log.flushed_offset, log.epoch_entries()) == (2, 2, ((1, 0),))
    assert log.last_epoch == 1


def test_crash_may_keep_a_prefix_of_unflushed_batches() -> None:
    log = MemoryLog()
    for epoch in (1, 2, 3):
        log.append_as_leader([b"x"], Epoch(epoch), timestamp_ms=0)
    log.simulate_crash(surviving_unflushed_batches=2)
    assert log.end_offset == 2
    assert log.epoch_entries() == ((1, 0), (2, 1))


def test_truncation_is_durable_at_once() -> None:
    log = MemoryLog()
    log.append_as_leader([b"a", b"b", b"c"], Epoch(1), timestamp_ms=0)
    log.append_as_leader([b"d"], Epoch(1), timestamp_ms=0)
    log.flush()
    log.truncate_to(Offset(3))
    log.simulate_crash()
    assert log.end_offset == 3


def test_read_view_stays_valid_after_truncation() -> None:
    log = MemoryLog()
    log.append_as_leader([b"a"], Epoch(1), timestamp_ms=0)
    view = log.read(Offset(0), 100).data
    before = bytes(view)
    log.truncate_to(Offset(0))
    log.append_as_leader([b"z"], Epoch(2), timestamp_ms=0)
    assert bytes(view) == before


def test_crash_matches_segmented_recovery_of_the_flushed_prefix(tmp_path: Path) -> None:
    memory = MemoryLog()
    with SegmentedLog.open(tmp_path, segment_bytes=512) as disk:
        for log in (memory, disk):
            for i in range(12):
                log.append_as_leader([b"%d" % i * 40], Epoch(1 + i // 5), timestamp_ms=0)
                if i == 7:
                    log.flush()
        flushed = disk.flushed_offset
    # The disk loses its unflushed suffix: cut its segment files back to the flushed offset.
    cut_segments_to(tmp_path, flushed)
    memory.simulate_crash()
    with SegmentedLog.open(tmp_path, segment_bytes=512) as disk:
        assert disk.recovery_report.epoch_cache_rebuilt
        assert (disk.end_offset, disk.epoch_entries()) == (
            memory.end_offset,
            memory.epoch_entries(),
        )
        assert log_bytes(disk) == log_bytes(memory)


def cut_segments_to(data_dir: Path, offset: int) -> None:
    for path in sorted((data_dir / LOG_DIR_NAME).glob("*.log")):
        data = path.read_bytes()
        keep = 0
        for pos, header in iter_batches(data):
            if header.next_offset <= offset:
                keep = pos + header.size_in_bytes
        path.write_bytes(data[:keep])


def log_bytes(log: MemoryLog | SegmentedLog) -> bytes:
    out = b""
    offset = log.start_offset
    while offset < log.end_offset:
        result = log.read(Offset(offset), 1 << 20)
        out += bytes(result.data)
        offset = result.next_offset
    return out
