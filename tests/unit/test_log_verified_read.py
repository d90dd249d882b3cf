"""Read-time validation: bits rot in segments the open-time recovery does not scan in full
(only the last segment is). A damaged batch must be reported with its file and position, and
never handed to anyone (issue: a leader served a bad batch and its follower stalled silently)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_log_segmented import fill

from kraft.ids import Offset
from kraft.records import LOG_OVERHEAD, iter_batches
from kraft.storage.log_adapter import BatchReader
from kraft.storage.memory_log import MemoryLog
from kraft.storage.replicated_log import CorruptLogError
from kraft.storage.segmented_log import SegmentedLog


def _rot_first_segment(tmp_path: Path) -> tuple[Path, int]:
    """Three or more segments; flip one payload byte of the second batch of the first one."""
    with SegmentedLog.open(tmp_path, segment_bytes=1024) as log:
        fill(log, 40)
        first = log.segment_paths()[0]
        assert log.segment_count >= 3
    data = bytearray(first.read_bytes())
    batches = list(iter_batches(data))
    pos, header = batches[1]
    data[pos + LOG_OVERHEAD + header.length - 1] ^= 0x40  # inside the CRC'd region
    first.write_bytes(bytes(data))
    return first, pos


def test_a_damaged_batch_in_an_older_segment_opens_but_is_never_served(tmp_path: Path) -> None:
    path, position = _rot_first_segment(tmp_path)
    with SegmentedLog.open(tmp_path, segment_bytes=1024) as log:  # open scans the last only
        reader = BatchReader(log, verify=True)
        with pytest.raises(CorruptLogError) as caught:
            reader.read(log.start_offset, 1 << 20)
        assert caught.value.path == path
        assert caught.value.position == position
        assert str(path) in str(caught.value) and f"byte {position}" in str(caught.value)
        # The batches before the damage are still served on their own.
        assert len(reader.read(log.start_offset, 1)) > 0
        # Without verification (the simulator's reader) the bytes come back as they are.
        assert len(BatchReader(log).read(log.start_offset, 1 << 20)) > 0


def test_verified_reads_of_a_healthy_log_return_the_same_bytes(tmp_path: Path) -> None:
    with SegmentedLog.open(tmp_path, segment_bytes=1024) as log:
        fill(log, 40)
        offset = log.start_offset
        while offset < log.end_offset:
            plain = log.read(Offset(offset), 700)
            checked = log.read(Offset(offset), 700, verify=True)
            assert bytes(plain.data) == bytes(checked.data)
            offset = plain.next_offset
    mem = MemoryLog()
    fill(mem, 10)  # type: ignore[arg-type]
    assert bytes(mem.read(Offset(0), 1 << 20, verify=True).data) == bytes(
        mem.read(Offset(0), 1 << 20).data
    )
