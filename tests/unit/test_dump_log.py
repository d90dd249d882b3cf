"""`kraft dump-log`: one line per batch with its CRC validity, like Kafka's dump-log tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft.cli import main
from kraft.control_records import LeaderChangeMessage
from kraft.ids import Epoch
from kraft.storage.segmented_log import SegmentedLog


def _make_log(tmp_path: Path) -> Path:
    with SegmentedLog.open(tmp_path) as log:
        log.append_control_as_leader(
            LeaderChangeMessage(0, 1, (1, 2, 3), (1, 2)), Epoch(1), timestamp_ms=1000
        )
        log.append_as_leader([b"a" * 10, b"b" * 10], Epoch(1), timestamp_ms=1001)
        log.flush()
        (segment,) = log.segment_paths()
    return segment


def test_dump_reports_every_batch_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    segment = _make_log(tmp_path)
    assert main(["dump-log", "--print-records", str(segment)]) == 0
    out = capsys.readouterr().out
    batches = [line for line in out.splitlines() if line.startswith("baseOffset:")]
    assert len(batches) == 2
    assert all("isvalid: true" in line for line in batches)
    assert "isControl: true" in batches[0] and "isControl: false" in batches[1]
    assert "baseOffset: 1 lastOffset: 2 count: 2" in batches[1]
    assert "LeaderChangeMessage" in out and "leader_id=1" in out
    assert "Log starting offset: 0" in out


def test_dump_flags_a_crc_mismatch_and_keeps_going(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    segment = _make_log(tmp_path)
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF  # last byte of the last record's payload: covered by the CRC
    segment.write_bytes(bytes(data))
    assert main(["dump-log", str(segment)]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("baseOffset:")]
    assert ["isvalid: true" in lines[0], "isvalid: false" in lines[1]] == [True, True]


def test_dump_reports_a_torn_tail_with_its_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    segment = _make_log(tmp_path)
    data = segment.read_bytes()
    segment.write_bytes(data[:-5])
    assert main(["dump-log", str(segment)]) == 1
    captured = capsys.readouterr()
    assert captured.out.count("baseOffset:") == 1
    assert "cannot decode at position" in captured.err


def test_missing_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dump-log", str(tmp_path / "nope.log")]) == 2
    assert "no such file" in capsys.readouterr().err
