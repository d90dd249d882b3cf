"""A crash inside an unflushed window that rolled several segments: the log's tail is cut,
and the segments rolled after it are empty files whose names no longer follow the log. A
legal power-loss state: the log must open (dropping them), not refuse to start."""

from __future__ import annotations

from pathlib import Path

from test_log_segmented import fill

from kraft.storage.segment import segment_name
from kraft.storage.segmented_log import LOG_DIR_NAME, SegmentedLog


def test_several_empty_segments_after_a_cut_tail_are_dropped(tmp_path: Path) -> None:
    with SegmentedLog.open(tmp_path, segment_bytes=1024) as log:
        fill(log, 12)
        end = log.end_offset
    log_dir = tmp_path / LOG_DIR_NAME
    # Two rolls whose data never reached the disk: empty files past a gap.
    for base in (end + 3, end + 9):
        (log_dir / segment_name(base)).write_bytes(b"")
    with SegmentedLog.open(tmp_path, segment_bytes=1024) as log:
        assert log.end_offset == end
        assert all(p.stat().st_size > 0 for p in log.segment_paths())
        log.append_as_leader([b"after"], log.last_epoch, timestamp_ms=0)
        assert log.end_offset == end + 1
    assert not (log_dir / segment_name(end + 9)).exists()
