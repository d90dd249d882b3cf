"""Crash recovery of the segmented log's files: scanning each segment's batches when the log
opens, rebuilding the leader-epoch cache from them, telling a torn tail (cut off, reported)
from damage followed by valid data (refused with CorruptLogError)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kraft.ids import Epoch, Offset
from kraft.records import (
    BATCH_HEADER_SIZE,
    MAGIC,
    CorruptRecordError,
    parse_batch_header,
    verify_crc,
)
from kraft.storage.durable import fsync_dir
from kraft.storage.epoch_cache import LeaderEpochCache
from kraft.storage.replicated_log import CorruptLogError
from kraft.storage.segment import OFFSET_AND_LENGTH, Segment

_MAGIC_POS = 16


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What opening the log found; `bytes_dropped` > 0 only for a damaged tail."""

    segments: int
    batches: int
    bytes_dropped: int = 0
    offset_dropped_from: Offset | None = None
    reason: str | None = None
    epoch_cache_rebuilt: bool = False


@dataclass(slots=True)
class Recovered:
    """The segments that survived recovery, indexed, with the epoch cache their batches give."""

    segments: list[Segment]
    cache: LeaderEpochCache
    batches: int = 0
    bytes_dropped: int = 0
    dropped_from: int | None = None
    reason: str | None = None


def recover_segments(
    log_dir: Path, segments: list[Segment], *, index_interval_bytes: int, full_check: bool
) -> Recovered:
    """Scan `segments` (sorted by base offset) in order: every batch of the last one is
    checked in full, earlier ones by header unless `full_check`. A torn tail is truncated
    (fsynced) and segments after it deleted; damage followed by valid data raises."""
    cache = LeaderEpochCache()
    out = Recovered(segments, cache)
    expected = segments[0].base_offset
    keep = len(segments)
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg.base_offset != expected:
            if all(later.size == 0 for later in segments[i:]):
                # Segments rolled past a tail that a crash cut off, never written (several
                # rolls can fall in one unflushed window): nothing is lost, drop them.
                keep = i
                break
            raise CorruptLogError(
                seg.path, 0, f"segment base {seg.base_offset}, previous ends at {expected}"
            )
        scan = _scan_segment(seg, full_check or last, cache, index_interval_bytes, expected)
        out.batches += scan.batches
        expected = seg.next_offset
        if scan.damage_at is None:
            continue
        # Damage: it is a torn tail only if no valid batch follows it anywhere.
        buf = seg.view()
        after = _valid_batch_after(buf, scan.damage_at + 1, expected)
        del buf
        if after is not None:
            raise CorruptLogError(
                seg.path,
                scan.damage_at,
                f"{scan.reason}; a valid batch follows at byte {after}",
            )
        for later in segments[i + 1 :]:
            if later.size and _valid_batch_after(later.view(), 0, expected) is not None:
                raise CorruptLogError(
                    seg.path, scan.damage_at, f"{scan.reason}; {later.path} holds valid data"
                )
        out.bytes_dropped = seg.size - scan.damage_at + sum(s.size for s in segments[i + 1 :])
        out.dropped_from, out.reason = expected, scan.reason
        seg.truncate(scan.damage_at, expected)
        os.fsync(seg.fd)
        keep = i + 1
        break
    for seg in segments[keep:]:
        seg.close()
        seg.path.unlink()
    if keep < len(segments):
        fsync_dir(log_dir)
    out.segments = segments[:keep]
    return out


@dataclass(slots=True)
class _ScanResult:
    batches: int = 0
    damage_at: int | None = None
    reason: str | None = None


def _scan_segment(
    seg: Segment,
    verify: bool,
    cache: LeaderEpochCache,
    interval: int,
    expected: int,
) -> _ScanResult:
    """Index the segment's batches; stop at the first damaged one (damage_at, reason)."""
    result = _ScanResult()
    seg.next_offset = expected
    if seg.size == 0:
        return result
    buf = seg.view()
    pos = 0
    epoch_floor = cache.latest_epoch if cache.latest_epoch is not None else -1
    try:
        while pos < seg.size:
            try:
                header = parse_batch_header(buf, pos)
                if verify:
                    verify_crc(buf, pos, header)
            except CorruptRecordError as exc:
                result.damage_at, result.reason = pos, str(exc)
                return result
            if header.base_offset != expected:
                result.damage_at = pos
                result.reason = f"base offset {header.base_offset} where {expected} was expected"
                return result
            epoch = header.partition_leader_epoch
            if epoch < epoch_floor:
                result.damage_at = pos
                result.reason = f"epoch {epoch} below the previous epoch {epoch_floor}"
                return result
            if epoch > epoch_floor:
                cache.assign(Epoch(epoch), Offset(header.base_offset))
                epoch_floor = epoch
            size = header.size_in_bytes
            seg.note_batch(pos, header.base_offset, size, interval)
            expected = header.next_offset
            seg.next_offset = expected
            result.batches += 1
            pos += size
    finally:
        del buf
    return result


def _valid_batch_after(buf: memoryview | bytes, start: int, min_offset: int) -> int | None:
    """Position of a CRC-valid batch at or after `start` with base offset >= min_offset."""
    data = bytes(buf) if isinstance(buf, memoryview) else buf
    probe = start + _MAGIC_POS
    magic = bytes([MAGIC])
    while True:
        hit = data.find(magic, probe)
        if hit < 0:
            return None
        cand = hit - _MAGIC_POS
        probe = hit + 1
        if cand < start or len(data) - cand < BATCH_HEADER_SIZE:
            continue
        base = OFFSET_AND_LENGTH.unpack_from(data, cand)[0]
        if base < min_offset:
            continue
        try:
            header = parse_batch_header(data, cand)
            verify_crc(data, cand, header)
        except CorruptRecordError:
            continue
        return cand


__all__ = ["Recovered", "RecoveryReport", "recover_segments"]
