"""SegmentedLog on disk: Kafka's layout, rolling, reopening, group commit and crash recovery."""

from __future__ import annotations

import os
import random
import shutil
import socket
from pathlib import Path

import pytest

from kraft.ids import Epoch, Offset
from kraft.records import decode_batch, encode_batch, iter_batches
from kraft.storage.replicated_log import CorruptLogError
from kraft.storage.segment import TAIL_READ_BYTES
from kraft.storage.segmented_log import EPOCH_CHECKPOINT_NAME, LOG_DIR_NAME, SegmentedLog

EPOCH_FIELD = range(12, 16)  # PartitionLeaderEpoch: outside the CRC, so undetectable


def fill(log: SegmentedLog, batches: int, *, epoch_every: int = 0, seed: int = 1) -> None:
    rng = random.Random(seed)
    for i in range(batches):
        epoch = 1 + (i // epoch_every if epoch_every else 0)
        values = [rng.randbytes(rng.randint(1, 120)) for _ in range(rng.randint(1, 4))]
        log.append_as_leader(values, Epoch(epoch), timestamp_ms=i)


def all_values(log: SegmentedLog) -> list[bytes]:
    out: list[bytes] = []
    offset = log.start_offset
    while offset < log.end_offset:
        result = log.read(Offset(offset), 4096)
        for pos, _ in iter_batches(result.data):
            out.extend(r.value or b"" for r in decode_batch(result.data, pos)[1])
        offset = result.next_offset
    return out


def boundaries(path: Path) -> list[tuple[int, int]]:
    """(position, base offset) of every batch in a segment file, plus (size, end offset)."""
    data = path.read_bytes()
    out = [(pos, h.base_offset) for pos, h in iter_batches(data)]
    last = list(iter_batches(data))[-1][1]
    out.append((len(data), last.next_offset))
    return out


def test_layout_and_segment_rolling(tmp_path: Path) -> None:
    with SegmentedLog.open(tmp_path, segment_bytes=1024) as log:
        fill(log, 60)
        names = sorted(p.name for p in (tmp_path / LOG_DIR_NAME).iterdir())
        segments = [n for n in names if n.endswith(".log")]
        assert len(segments) == log.segment_count > 3
        assert EPOCH_CHECKPOINT_NAME in names
        for path in log.segment_paths():
            # Each segment is named by the base offset of its first batch, %020d.
            first = next(iter_batches(path.read_bytes()))[1]
            assert path.name == f"{first.base_offset:020d}.log"
            assert path.stat().st_size <= 1024
        # Reads at every offset, across segment boundaries, see the right record first.
        values = all_values(log)
        for offset in range(0, log.end_offset, 7):
            result = log.read(Offset(offset), 1)
            records = decode_batch(result.data)[1]
            assert [r.value for r in records if r.offset == offset] == [values[offset]]


def test_reopen_gives_the_same_state(tmp_path: Path) -> None:
    with SegmentedLog.open(tmp_path, segment_bytes=2048) as log:
        fill(log, 80, epoch_every=25)
        log.truncate_to(Offset(log.end_offset - 3))
        log.advance_start_offset(Offset(40))
        state = (
            log.start_offset,
            log.end_offset,
            log.epoch_entries(),
            all_values(log),
            log.segment_count,
        )
    with SegmentedLog.open(tmp_path, segment_bytes=2048) as log:
        again = (
            log.start_offset,
            log.end_offset,
            log.epoch_entries(),
            all_values(log),
            log.segment_count,
        )
        assert log.recovery_report.bytes_dropped == 0
        assert not log.recovery_report.epoch_cache_rebuilt
    assert again == state


def test_leader_epoch_checkpoint_text(tmp_path: Path) -> None:
    with SegmentedLog.open(tmp_path) as log:
        log.append_as_leader([b"a", b"b"], Epoch(1), timestamp_ms=0)
        log.append_as_leader([b"c"], Epoch(3), timestamp_ms=0)
        log.append_as_leader([b"d"], Epoch(3), timestamp_ms=0)
        path = tmp_path / LOG_DIR_NAME / EPOCH_CHECKPOINT_NAME
        assert path.read_bytes() == b"0\n2\n1 0\n3 2\n"
        log.truncate_to(Offset(2))
        assert path.read_bytes() == b"0\n1\n1 0\n"


@pytest.mark.parametrize(
    ("text", "rebuilt"),
    [
        (b"0\n2\n1 0\n3 2\n", False),  # matches the log: kept
        (b"0\n1\n1 0\n", True),  # misses epoch 3
        (b"0\n3\n1 0\n3 2\n7 4\n", True),  # an epoch past the log end (data lost in a crash)
        (b"garbage", True),
        (None, True),  # missing
    ],
)
def test_epoch_checkpoint_rebuilt_when_inconsistent(
    tmp_path: Path, text: bytes | None, rebuilt: bool
) -> None:
    with SegmentedLog.open(tmp_path) as log:
        log.append_as_leader([b"a", b"b"], Epoch(1), timestamp_ms=0)
        log.append_as_leader([b"c", b"d"], Epoch(3), timestamp_ms=0)
    path = tmp_path / LOG_DIR_NAME / EPOCH_CHECKPOINT_NAME
    if text is None:
        path.unlink()
    else:
        path.write_bytes(text)
    with SegmentedLog.open(tmp_path) as log:
        assert log.recovery_report.epoch_cache_rebuilt is rebuilt
        assert log.epoch_entries() == ((1, 0), (3, 2))
    assert path.read_bytes() == b"0\n2\n1 0\n3 2\n"


def test_group_commit_one_fsync_per_flush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = SegmentedLog.open(tmp_path, segment_bytes=1 << 20)
    log.append_as_leader([b"first"], Epoch(1), timestamp_ms=0)  # writes the epoch checkpoint
    calls: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    for i in range(50):
        log.append_as_leader([b"v%d" % i] * 10, Epoch(1), timestamp_ms=i)
    assert calls == []
    assert log.flush_needed
    log.flush()
    assert len(calls) == 1
    assert log.flushed_offset == log.end_offset == 501
    log.flush()  # nothing appended since: nothing to sync
    assert len(calls) == 1
    log.close()


def test_flush_after_roll_syncs_old_segment_new_segment_and_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SegmentedLog.open(tmp_path, segment_bytes=1000)
    log.append_as_leader([b"x" * 400], Epoch(1), timestamp_ms=0)
    log.flush()
    calls: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd))[1])
    log.append_as_leader([b"y" * 100], Epoch(1), timestamp_ms=0)
    log.append_as_leader([b"z" * 400], Epoch(1), timestamp_ms=0)  # rolls
    assert log.segment_count == 2
    log.flush()
    assert len(calls) == 3  # both segments, then the directory entry of the new one
    log.close()


def test_reopening_syncs_what_a_killed_process_wrote_before_counting_it_flushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records appended but never flushed (the process was killed: they may be in the page
    cache only) are fsynced when the log is opened again, before flushed_offset covers them."""
    log = SegmentedLog.open(tmp_path, segment_bytes=1000)
    log.append_as_leader([b"x" * 400], Epoch(1), timestamp_ms=0)
    log.flush()
    log.append_as_leader([b"y" * 100], Epoch(1), timestamp_ms=0)
    log.append_as_leader([b"z" * 400], Epoch(1), timestamp_ms=0)  # rolls; never flushed
    assert log.segment_count == 2 and log.flushed_offset == 1
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    reopened = SegmentedLog.open(tmp_path, segment_bytes=1000)  # the first one never closed
    assert reopened.flushed_offset == reopened.end_offset == 3
    log_dir = str(tmp_path / LOG_DIR_NAME)
    segments = sorted(p for p in synced if p.endswith(".log"))
    assert segments == [f"{log_dir}/{0:020d}.log", f"{log_dir}/{2:020d}.log"]
    assert log_dir in synced
    reopened.close()
    log.close()


def test_read_region_sends_the_same_bytes_as_read(tmp_path: Path) -> None:
    with SegmentedLog.open(tmp_path, segment_bytes=4096) as log:
        fill(log, 40)
        left, right = socket.socketpair()
        with left, right:
            for offset in (0, 5, 33, log.end_offset - 1):
                view = log.read(Offset(offset), 1000)
                region = log.read_region(Offset(offset), 1000)
                assert (region.first_offset, region.next_offset) == (
                    view.first_offset,
                    view.next_offset,
                )
                (r,) = region.regions
                sent = os.sendfile(left.fileno(), r.fd, r.position, r.length)
                assert sent == r.length
                assert right.recv(1 << 16) == bytes(view.data)
                del view


def test_a_tail_read_copied_from_a_grown_segment_is_the_mapped_read(tmp_path: Path) -> None:
    """Reads near the end of a segment that grew since it was mapped copy the tail
    (kraft.storage.segment.TAIL_READ_BYTES); the same reads over a fresh mapping give the
    same offsets and bytes, for every offset and read size."""
    with SegmentedLog.open(tmp_path, segment_bytes=1 << 20) as log:
        fill(log, 30, seed=3)
        log.read(Offset(0), 1)  # map the segment as it is now
        fill(log, 600, seed=4)  # grow it past the mapping, by more than TAIL_READ_BYTES
        (seg,) = log._segments
        assert seg._map_len < seg.size - TAIL_READ_BYTES
        mapped = seg._map_len
        last = log.read(Offset(log.end_offset - 1), 1 << 20)
        assert seg._map_len == mapped  # a short read at the end copies; nothing remapped
        del last
        cases = [(o, m) for o in range(0, log.end_offset, 7) for m in (0, 1, 300, 5000, 1 << 20)]
        got = []
        for offset, max_bytes in cases:
            seg.drop_map()
            log.read(Offset(0), 1)  # mapped as far as the file goes: no copy
            mapped_read = log.read(Offset(offset), max_bytes, verify=True)
            got.append((mapped_read.first_offset, mapped_read.next_offset, bytes(mapped_read.data)))
            del mapped_read
        for (offset, max_bytes), want in zip(cases, got, strict=True):
            seg.drop_map()
            r = log.read(Offset(offset), max_bytes, verify=True)  # copied when near the end
            assert (r.first_offset, r.next_offset, bytes(r.data)) == want, (offset, max_bytes)


@pytest.mark.parametrize("hold_view", [False, True])
def test_reads_after_a_truncation_and_rewrite_return_the_new_bytes(
    tmp_path: Path, hold_view: bool
) -> None:
    """A follower truncating on divergence then appending other batches at the same offsets:
    every later read, through the mapping or through a copy of the tail, gives the new
    batches, never the truncated ones; also while a reader still holds a view of the old
    mapping (which then cannot be closed)."""
    with SegmentedLog.open(tmp_path, segment_bytes=1 << 20) as log:
        fill(log, 40, seed=5)
        log.read(Offset(0), 1 << 20)  # mapped as far as the file goes
        cut = log.read(Offset(25), 0).first_offset
        held = log.read(Offset(0), 1 << 20).data if hold_view else None
        log.truncate_to(cut)
        rng = random.Random(6)
        while log.end_offset < 60:
            values = [rng.randbytes(rng.randint(1, 120)) for _ in range(rng.randint(1, 4))]
            log.append_as_follower(
                encode_batch(log.end_offset, 2, values, timestamp_ms=log.end_offset)
            )
        (seg,) = log._segments
        want = seg.path.read_bytes()
        position = {h.base_offset: pos for pos, h in iter_batches(want)}
        for offset in range(0, log.end_offset):
            for max_bytes in (0, 1 << 20):
                for remap in (False, True):
                    if remap:
                        seg.drop_map()
                        log.read(Offset(0), 1 << 20)  # a mapping that covers the file
                    else:
                        seg.drop_map()  # short tails are copied
                    r = log.read(Offset(offset), max_bytes, verify=True)
                    at = position[r.first_offset]
                    assert bytes(r.data) == want[at : at + len(r.data)], (offset, max_bytes)
                    epochs = {h.partition_leader_epoch for _, h in iter_batches(r.data)}
                    assert epochs == ({2} if r.first_offset >= cut else epochs), offset
                    del r
        del held


def build_single_segment(tmp_path: Path, batches: int = 40) -> tuple[Path, bytes]:
    src = tmp_path / "src"
    with SegmentedLog.open(src, segment_bytes=1 << 20) as log:
        fill(log, batches, epoch_every=15)
    (segment,) = (src / LOG_DIR_NAME).glob("*.log")
    return src, segment.read_bytes()


def reopen_with_segment(tmp_path: Path, src: Path, data: bytes, name: str) -> SegmentedLog:
    dst = tmp_path / name
    shutil.copytree(src, dst)
    (segment,) = (dst / LOG_DIR_NAME).glob("*.log")
    segment.write_bytes(data)
    return SegmentedLog.open(dst, segment_bytes=1 << 20)


def test_recovery_from_cut_at_many_positions(tmp_path: Path) -> None:
    src, data = build_single_segment(tmp_path)
    marks = boundaries(next((src / LOG_DIR_NAME).glob("*.log")))
    expected_values = all_values_of(src)
    rng = random.Random(595)
    cuts = sorted({rng.randrange(0, len(data) + 1) for _ in range(400)})[:250]
    cuts += [pos for pos, _ in marks]
    for n, cut in enumerate(cuts):
        with reopen_with_segment(tmp_path, src, data[:cut], f"cut{n}") as log:
            # Every batch wholly before the cut survives, nothing after it does.
            pos, end = max((p, o) for p, o in marks if p <= cut)
            assert log.end_offset == end, cut
            report = log.recovery_report
            assert report.bytes_dropped == cut - pos
            assert (report.offset_dropped_from is None) == (cut == pos)
            assert (tmp_path / f"cut{n}" / LOG_DIR_NAME / "00000000000000000000.log").stat()
            assert all_values(log) == expected_values[: log.end_offset]
            epochs = log.epoch_entries()
            assert all(start < log.end_offset for _, start in epochs)
        shutil.rmtree(tmp_path / f"cut{n}")


def all_values_of(src: Path) -> list[bytes]:
    with SegmentedLog.open(src, segment_bytes=1 << 20) as log:
        return all_values(log)


def test_recovery_from_corrupt_byte_in_the_final_batch(tmp_path: Path) -> None:
    src, data = build_single_segment(tmp_path)
    marks = boundaries(next((src / LOG_DIR_NAME).glob("*.log")))
    last_pos, last_base = marks[-2]
    rng = random.Random(630)
    for n in range(200):
        index = rng.randrange(last_pos, len(data))
        if index - last_pos in EPOCH_FIELD:
            continue
        damaged = bytearray(data)
        damaged[index] ^= 1 << rng.randrange(8)
        with reopen_with_segment(tmp_path, src, bytes(damaged), f"c{n}") as log:
            assert log.end_offset == last_base, index
            assert log.recovery_report.bytes_dropped == len(data) - last_pos
            assert log.recovery_report.reason
        shutil.rmtree(tmp_path / f"c{n}")


@pytest.mark.parametrize("field_offset", [30, 8, 0, 16, 70])
def test_corruption_followed_by_valid_batches_raises(tmp_path: Path, field_offset: int) -> None:
    # 30: inside the CRC'd part; 8: the length; 0: the base offset; 16: magic; 70: a record.
    src, data = build_single_segment(tmp_path)
    marks = boundaries(next((src / LOG_DIR_NAME).glob("*.log")))
    middle = marks[len(marks) // 2][0]
    damaged = bytearray(data)
    damaged[middle + field_offset] ^= 0x40
    with pytest.raises(CorruptLogError) as err:
        reopen_with_segment(tmp_path, src, bytes(damaged), "mid")
    assert err.value.position == middle
    assert err.value.path.name == "00000000000000000000.log"


def test_full_check_finds_crc_damage_in_an_earlier_segment(tmp_path: Path) -> None:
    with SegmentedLog.open(tmp_path, segment_bytes=1024) as log:
        fill(log, 40)
        first = log.segment_paths()[0]
    data = bytearray(first.read_bytes())
    data[70] ^= 0x01
    first.write_bytes(bytes(data))
    with pytest.raises(CorruptLogError) as err:
        SegmentedLog.open(tmp_path, segment_bytes=1024, full_check=True)
    assert err.value.path == first


def test_torn_tail_of_previous_segment_after_roll(tmp_path: Path) -> None:
    # A crash after a roll, before the flush: the old segment lost its tail, the new one is empty.
    with SegmentedLog.open(tmp_path, segment_bytes=1024) as log:
        fill(log, 30)
        paths = log.segment_paths()
        end_before = log.end_offset
    prev, last = paths[-2], paths[-1]
    marks = boundaries(prev)
    last.write_bytes(b"")
    prev.write_bytes(prev.read_bytes()[: marks[-2][0] + 5])
    with SegmentedLog.open(tmp_path, segment_bytes=1024) as log:
        assert log.end_offset == marks[-2][1] < end_before
        assert log.segment_count == len(paths) - 1
        log.append_as_leader([b"after"], Epoch(1), timestamp_ms=0)
        assert all_values(log)[-1] == b"after"
