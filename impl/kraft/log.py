"""The replicated log of KRaft (`__cluster_metadata-0`) in Apache Kafka's on-disk format.

`ReplicatedLog` is the interface the replica drives; `SegmentedLog` keeps it in `%020d.log`
segment files with Kafka's `leader-epoch-checkpoint`, and `kraft.log_memory.MemoryLog` keeps it
in memory for the deterministic simulator with the same semantics.

Contracts shared by both implementations:
- Appends are all or nothing: a rejected append raises `LogAppendError` and changes nothing.
- `truncate_to(offset)` removes whole batches: an offset inside a batch truncates at that
  batch's base offset (a batch is the unit of replication, as in Kafka).
- `read` returns whole batches starting with the one that contains `offset`, at least one even
  if it is larger than `max_bytes` (Kafka's fetch rule). A read never spans two segments.
- Data is durable only up to `flushed_offset`; `flush()` makes everything appended durable.
  Truncation and start-offset changes are durable when they return (they are rare).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from array import array
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

from kraft.control_records import ControlRecord, encode_control_batch
from kraft.durable import atomic_write, fsync_dir
from kraft.epoch_cache import (
    CheckpointFormatError,
    LeaderEpochCache,
    read_checkpoint_file,
    write_checkpoint_file,
)
from kraft.errors import KraftError
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    CorruptRecordError,
    encode_batch,
    iter_batches,
    parse_batch_header,
    verify_crc,
)

LOG_DIR_NAME = "__cluster_metadata-0"
EPOCH_CHECKPOINT_NAME = "leader-epoch-checkpoint"
# Kafka keeps log start offsets in this data-dir file ("topic partition offset" lines).
LOG_START_CHECKPOINT_NAME = "log-start-offset-checkpoint"
LOG_SUFFIX = ".log"
DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
# Kafka's default log.index.interval.bytes.
DEFAULT_INDEX_INTERVAL_BYTES = 4096
# Epoch of an empty log, as KafkaMetadataLog.lastFetchedEpoch answers without a snapshot.
EMPTY_LOG_EPOCH = Epoch(0)

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_MAGIC_POS = 16


# --------------------------------------------------------------------------- errors


class LogError(KraftError):
    """Base class of the errors of the replicated log."""


class AppendViolation(Enum):
    EMPTY = "empty append"
    CORRUPT_BATCH = "corrupt batch"
    NOT_CONTIGUOUS = "offsets not contiguous"
    EPOCH_DECREASED = "epoch decreased"


class LogAppendError(LogError):
    """An append broke a rule of the log; nothing was appended."""

    def __init__(self, violation: AppendViolation, detail: str) -> None:
        super().__init__(f"{violation.value}: {detail}")
        self.violation = violation


class LogOffsetOutOfRangeError(LogError):
    """A read or truncation named an offset outside [start_offset, end_offset]."""


class CorruptLogError(LogError):
    """Damage in the middle of the log (valid data follows it): refusing to drop data silently."""

    def __init__(self, path: Path, position: int, detail: str) -> None:
        super().__init__(f"{path} at byte {position}: {detail}")
        self.path = path
        self.position = position


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: Offset
    last_offset: Offset
    last_epoch: Epoch
    batches: int
    bytes: int


@dataclass(frozen=True, slots=True)
class LogReadResult:
    """Whole batches: `first_offset` is the first base offset, `next_offset` follows the last."""

    first_offset: Offset
    next_offset: Offset
    data: memoryview

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True, slots=True)
class FileRegion:
    """Bytes of a segment file, usable with os.sendfile(out, fd, position, length).

    `fd` stays valid until the segment is deleted or the log is closed.
    """

    path: Path
    fd: int
    position: int
    length: int


@dataclass(frozen=True, slots=True)
class RegionReadResult:
    first_offset: Offset
    next_offset: Offset
    regions: tuple[FileRegion, ...]

    @property
    def size(self) -> int:
        return sum(r.length for r in self.regions)


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What opening the log found; `bytes_dropped` > 0 only for a damaged tail."""

    segments: int
    batches: int
    bytes_dropped: int = 0
    offset_dropped_from: Offset | None = None
    reason: str | None = None
    epoch_cache_rebuilt: bool = False


class ReplicatedLog(Protocol):
    @property
    def start_offset(self) -> Offset: ...
    @property
    def end_offset(self) -> Offset: ...
    @property
    def last_epoch(self) -> Epoch: ...
    @property
    def flushed_offset(self) -> Offset: ...
    @property
    def flush_needed(self) -> bool: ...
    @property
    def end_offset_and_epoch(self) -> OffsetAndEpoch: ...

    def append_as_leader(
        self, values: Sequence[bytes], epoch: Epoch, *, timestamp_ms: int
    ) -> AppendInfo: ...
    def append_control_as_leader(
        self, record: ControlRecord, epoch: Epoch, *, timestamp_ms: int
    ) -> AppendInfo: ...
    def append_as_follower(self, data: bytes | memoryview) -> AppendInfo: ...
    def read(self, offset: Offset, max_bytes: int, *, verify: bool = False) -> LogReadResult: ...
    def truncate_to(self, offset: Offset) -> None: ...
    def truncate_fully_and_start_at(self, offset: Offset) -> None: ...
    def advance_start_offset(self, offset: Offset) -> None: ...
    def end_offset_for_epoch(self, epoch: Epoch) -> OffsetAndEpoch: ...
    def epoch_entries(self) -> tuple[tuple[Epoch, Offset], ...]: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


# --------------------------------------------------------------------------- shared checks


@dataclass(frozen=True, slots=True)
class ValidatedBatch:
    position: int
    base_offset: int
    next_offset: int
    epoch: int
    size: int


def validate_follower_data(
    data: bytes | memoryview, end_offset: int, last_epoch: int
) -> list[ValidatedBatch]:
    """Check whole batches for CRC, contiguity from end_offset and non-decreasing epochs."""
    if len(data) == 0:
        raise LogAppendError(AppendViolation.EMPTY, "no batches")
    out: list[ValidatedBatch] = []
    pos = 0
    expected = end_offset
    epoch_floor = last_epoch
    while pos < len(data):
        try:
            header = parse_batch_header(data, pos)
            verify_crc(data, pos, header)
        except CorruptRecordError as exc:
            raise LogAppendError(AppendViolation.CORRUPT_BATCH, str(exc)) from exc
        if header.base_offset != expected:
            raise LogAppendError(
                AppendViolation.NOT_CONTIGUOUS,
                f"batch at position {pos} has base offset {header.base_offset}, "
                f"expected {expected}",
            )
        epoch = header.partition_leader_epoch
        if epoch < epoch_floor:
            raise LogAppendError(
                AppendViolation.EPOCH_DECREASED,
                f"batch at offset {header.base_offset} has epoch {epoch} < {epoch_floor}",
            )
        size = header.size_in_bytes
        out.append(ValidatedBatch(pos, header.base_offset, header.next_offset, epoch, size))
        expected = header.next_offset
        epoch_floor = epoch
        pos += size
    return out


def check_leader_epoch(epoch: Epoch, last_epoch: Epoch) -> None:
    if epoch < 0 or epoch < last_epoch:
        raise LogAppendError(
            AppendViolation.EPOCH_DECREASED, f"leader epoch {epoch} < last epoch {last_epoch}"
        )


def batch_from_encoded(data: bytes) -> ValidatedBatch:
    header = parse_batch_header(data, 0)
    return ValidatedBatch(
        0, header.base_offset, header.next_offset, header.partition_leader_epoch, len(data)
    )


def info_of(batches: Sequence[ValidatedBatch]) -> AppendInfo:
    return AppendInfo(
        first_offset=Offset(batches[0].base_offset),
        last_offset=Offset(batches[-1].next_offset - 1),
        last_epoch=Epoch(batches[-1].epoch),
        batches=len(batches),
        bytes=sum(b.size for b in batches),
    )


# --------------------------------------------------------------------------- segments


def verify_batches(data: memoryview | bytes, path: Path, position: int) -> None:
    """Check every batch of `data` (read from `path` at byte `position`): CorruptLogError at
    the first one whose header or CRC is bad."""
    good = 0
    try:
        for pos, header in iter_batches(data):
            good = pos + header.length + LOG_OVERHEAD
    except CorruptRecordError as e:
        raise CorruptLogError(path, position + good, f"batch fails validation: {e}") from None


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{LOG_SUFFIX}"


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data) :]


class _Segment:
    """One `%020d.log` file plus its sparse in-memory offset index (base offset -> position)."""

    __slots__ = (
        "_map",
        "_map_len",
        "base_offset",
        "bytes_since_index",
        "fd",
        "index_offsets",
        "index_positions",
        "next_offset",
        "path",
        "size",
    )

    def __init__(self, path: Path, base_offset: int, *, create: bool) -> None:
        flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT | os.O_EXCL if create else 0)
        self.path = path
        self.fd = os.open(path, flags, 0o644)
        self.base_offset = base_offset
        self.next_offset = base_offset
        self.size = os.fstat(self.fd).st_size
        self.index_offsets = array("q")
        self.index_positions = array("q")
        self.bytes_since_index = 0
        self._map: mmap.mmap | None = None
        self._map_len = 0

    def note_batch(self, position: int, base_offset: int, size: int, interval: int) -> None:
        """Index the batch at `position` if `interval` bytes were written since the last entry."""
        if not self.index_offsets or self.bytes_since_index >= interval:
            self.index_offsets.append(base_offset)
            self.index_positions.append(position)
            self.bytes_since_index = 0
        self.bytes_since_index += size

    def view(self) -> memoryview:
        """A read-only view of the whole file (remapped when the file grew)."""
        if self._map is None or self._map_len < self.size:
            self.drop_map()
            self._map = mmap.mmap(self.fd, self.size, prot=mmap.PROT_READ)
            self._map_len = self.size
        return memoryview(self._map)[: self.size]

    def drop_map(self) -> None:
        if self._map is not None:
            # A view still held by a caller keeps the mapping alive until it is released.
            with contextlib.suppress(BufferError):
                self._map.close()
            self._map = None
            self._map_len = 0

    def truncate(self, size: int, next_offset: int) -> None:
        self.drop_map()
        os.ftruncate(self.fd, size)
        self.size = size
        self.next_offset = next_offset
        keep = bisect_right(self.index_positions, size - 1) if size > 0 else 0
        del self.index_offsets[keep:]
        del self.index_positions[keep:]
        # Conservative: the next batch gets an entry of its own.
        self.bytes_since_index = 1 << 62 if keep else 0

    def locate(self, offset: int, max_bytes: int) -> tuple[int, int, int, int]:
        """(start position, end position, first base offset, next offset) of a read."""
        buf = self.view()
        i = bisect_right(self.index_offsets, offset) - 1
        pos = self.index_positions[max(i, 0)]
        while True:
            base, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
            last = base + struct.unpack_from(">i", buf, pos + 23)[0]
            if last >= offset:
                break
            pos += length + LOG_OVERHEAD
        start, first_base = pos, base
        first_end = start + length + LOG_OVERHEAD
        bound = start + max(max_bytes, 0)
        if bound >= self.size:
            return start, self.size, first_base, self.next_offset
        j = bisect_right(self.index_positions, bound) - 1
        pos = max(self.index_positions[j], first_end) if j >= 0 else first_end
        while pos < bound:
            size = _OFFSET_AND_LENGTH.unpack_from(buf, pos)[1] + LOG_OVERHEAD
            if pos + size > bound:
                break
            pos += size
        end = max(pos, first_end)
        if end >= self.size:
            return start, self.size, first_base, self.next_offset
        next_base = _OFFSET_AND_LENGTH.unpack_from(buf, end)[0]
        return start, end, first_base, next_base

    def close(self) -> None:
        self.drop_map()
        os.close(self.fd)


# --------------------------------------------------------------------------- recovery


@dataclass(slots=True)
class _ScanResult:
    batches: int = 0
    damage_at: int | None = None
    reason: str | None = None


def _scan_segment(
    seg: _Segment,
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
        base = _OFFSET_AND_LENGTH.unpack_from(data, cand)[0]
        if base < min_offset:
            continue
        try:
            header = parse_batch_header(data, cand)
            verify_crc(data, cand, header)
        except CorruptRecordError:
            continue
        return cand


# --------------------------------------------------------------------------- segmented log


class SegmentedLog:
    """The log as Kafka lays it out: `<data-dir>/__cluster_metadata-0/%020d.log` segments."""

    def __init__(
        self,
        data_dir: Path,
        segments: list[_Segment],
        cache: LeaderEpochCache,
        start_offset: int,
        *,
        segment_bytes: int,
        index_interval_bytes: int,
        report: RecoveryReport,
    ) -> None:
        self.data_dir = data_dir
        self.dir = data_dir / LOG_DIR_NAME
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._cache = cache
        self._start = start_offset
        self._segment_bytes = segment_bytes
        self._interval = index_interval_bytes
        self._flushed = segments[-1].next_offset
        self._unflushed: list[_Segment] = []
        self._dir_dirty = False
        self._closed = False
        self.recovery_report = report

    # ---- open / recovery

    @classmethod
    def open(
        cls,
        data_dir: Path | str,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        full_check: bool = False,
    ) -> SegmentedLog:
        """Open (creating if needed) the log under `data_dir`, recovering from a crash.

        Every batch of the last segment is checked (header and CRC); earlier segments only by
        header unless `full_check`. A damaged tail (no valid batch after the damage) is cut off
        and described in `recovery_report`; damage followed by valid data raises CorruptLogError.
        """
        if segment_bytes < BATCH_HEADER_SIZE:
            raise ValueError(f"segment_bytes {segment_bytes} is below one batch header")
        data_dir = Path(data_dir)
        log_dir = data_dir / LOG_DIR_NAME
        created = not log_dir.exists()
        log_dir.mkdir(parents=True, exist_ok=True)
        if created:
            fsync_dir(data_dir)
        for stray in log_dir.glob("*.tmp"):
            stray.unlink()
        bases = sorted(
            int(p.name[: -len(LOG_SUFFIX)])
            for p in log_dir.glob("*" + LOG_SUFFIX)
            if p.name[: -len(LOG_SUFFIX)].isdigit()
        )
        stored_start = _read_log_start(data_dir)
        if not bases:
            base = stored_start or 0
            seg = _Segment(log_dir / segment_name(base), base, create=True)
            fsync_dir(log_dir)
            log = cls(
                data_dir,
                [seg],
                LeaderEpochCache(),
                base,
                segment_bytes=segment_bytes,
                index_interval_bytes=index_interval_bytes,
                report=RecoveryReport(segments=1, batches=0),
            )
            log._write_epoch_checkpoint()
            return log
        segments = [_Segment(log_dir / segment_name(b), b, create=False) for b in bases]
        try:
            return cls._recover(
                data_dir,
                segments,
                stored_start,
                segment_bytes=segment_bytes,
                index_interval_bytes=index_interval_bytes,
                full_check=full_check,
            )
        except BaseException:
            for seg in segments:
                seg.close()
            raise

    @classmethod
    def _recover(
        cls,
        data_dir: Path,
        segments: list[_Segment],
        stored_start: int | None,
        *,
        segment_bytes: int,
        index_interval_bytes: int,
        full_check: bool,
    ) -> SegmentedLog:
        log_dir = data_dir / LOG_DIR_NAME
        cache = LeaderEpochCache()
        expected = segments[0].base_offset
        batches = 0
        bytes_dropped = 0
        dropped_from: int | None = None
        reason: str | None = None
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
            batches += scan.batches
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
            bytes_dropped = seg.size - scan.damage_at + sum(s.size for s in segments[i + 1 :])
            dropped_from, reason = expected, scan.reason
            seg.truncate(scan.damage_at, expected)
            os.fsync(seg.fd)
            keep = i + 1
            break
        for seg in segments[keep:]:
            seg.close()
            seg.path.unlink()
        if keep < len(segments):
            fsync_dir(log_dir)
        segments = segments[:keep]

        first_base = segments[0].base_offset
        end = segments[-1].next_offset
        start = max(first_base, stored_start or 0)
        log = cls(
            data_dir,
            segments,
            cache,
            min(start, end),
            segment_bytes=segment_bytes,
            index_interval_bytes=index_interval_bytes,
            report=RecoveryReport(segments=len(segments), batches=batches),
        )
        if start > end:
            # The start offset moved past what survived (a snapshot covers it): start there.
            log.truncate_fully_and_start_at(Offset(start))
        elif start > first_base:
            cache.truncate_from_start(Offset(start))
        rebuilt = log._reconcile_epoch_checkpoint()
        log.recovery_report = RecoveryReport(
            segments=len(log._segments),
            batches=batches,
            bytes_dropped=bytes_dropped,
            offset_dropped_from=None if dropped_from is None else Offset(dropped_from),
            reason=reason,
            epoch_cache_rebuilt=rebuilt,
        )
        return log

    def _reconcile_epoch_checkpoint(self) -> bool:
        """Keep the checkpoint if it matches the log; else rewrite it from the log's batches."""
        path = self.dir / EPOCH_CHECKPOINT_NAME
        try:
            stored = read_checkpoint_file(path)
        except CheckpointFormatError:
            stored = None
        if stored == self._cache.entries():
            return False
        self._write_epoch_checkpoint()
        return True

    # ---- properties

    @property
    def start_offset(self) -> Offset:
        return Offset(self._start)

    @property
    def end_offset(self) -> Offset:
        return Offset(self._segments[-1].next_offset)

    @property
    def last_epoch(self) -> Epoch:
        latest = self._cache.latest_epoch
        return EMPTY_LOG_EPOCH if latest is None else latest

    @property
    def flushed_offset(self) -> Offset:
        return Offset(self._flushed)

    @property
    def flush_needed(self) -> bool:
        return self._flushed < self.end_offset or bool(self._unflushed) or self._dir_dirty

    @property
    def end_offset_and_epoch(self) -> OffsetAndEpoch:
        return OffsetAndEpoch(self.last_epoch, self.end_offset)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def segment_paths(self) -> tuple[Path, ...]:
        return tuple(s.path for s in self._segments)

    # ---- appends

    def append_as_leader(
        self, values: Sequence[bytes], epoch: Epoch, *, timestamp_ms: int
    ) -> AppendInfo:
        self._check_open()
        if not values:
            raise LogAppendError(AppendViolation.EMPTY, "no records")
        check_leader_epoch(epoch, self.last_epoch)
        data = encode_batch(self.end_offset, epoch, values, timestamp_ms=timestamp_ms)
        return self._append_validated(data, [batch_from_encoded(data)])

    def append_control_as_leader(
        self, record: ControlRecord, epoch: Epoch, *, timestamp_ms: int
    ) -> AppendInfo:
        self._check_open()
        check_leader_epoch(epoch, self.last_epoch)
        data = encode_control_batch(self.end_offset, epoch, record, timestamp_ms=timestamp_ms)
        return self._append_validated(data, [batch_from_encoded(data)])

    def append_as_follower(self, data: bytes | memoryview) -> AppendInfo:
        self._check_open()
        batches = validate_follower_data(data, self.end_offset, self.last_epoch)
        return self._append_validated(data, batches)

    def _append_validated(
        self, data: bytes | memoryview, batches: list[ValidatedBatch]
    ) -> AppendInfo:
        view = memoryview(data)
        # Group consecutive batches that go to the same segment into one write.
        run_start = 0
        i = 0
        undo = [(self._segments[-1], self._segments[-1].size, self._segments[-1].next_offset)]
        created: list[_Segment] = []
        try:
            while i < len(batches):
                seg = self._segments[-1]
                run_bytes = 0
                j = i
                while j < len(batches):
                    size = batches[j].size
                    if seg.size + run_bytes and seg.size + run_bytes + size > self._segment_bytes:
                        break
                    run_bytes += size
                    j += 1
                if j == i:
                    seg = self._roll(batches[i].base_offset)
                    created.append(seg)
                    continue
                run_start = batches[i].position
                _write_all(seg.fd, view[run_start : run_start + run_bytes])
                pos = seg.size
                for b in batches[i:j]:
                    seg.note_batch(pos, b.base_offset, b.size, self._interval)
                    pos += b.size
                seg.size = pos
                seg.next_offset = batches[j - 1].next_offset
                if not self._unflushed or self._unflushed[-1] is not seg:
                    self._unflushed.append(seg)
                i = j
        except OSError:
            self._undo_append(undo, created)
            raise
        changed = False
        for b in batches:
            latest = self._cache.latest_epoch
            if latest is None or b.epoch > latest:
                changed |= self._cache.assign(Epoch(b.epoch), Offset(b.base_offset))
        if changed:
            self._write_epoch_checkpoint()
        return info_of(batches)

    def _undo_append(self, undo: list[tuple[_Segment, int, int]], created: list[_Segment]) -> None:
        for seg in created:
            self._segments.remove(seg)
            self._bases.remove(seg.base_offset)
            if seg in self._unflushed:
                self._unflushed.remove(seg)
            seg.close()
            seg.path.unlink(missing_ok=True)
        for seg, size, next_offset in undo:
            seg.truncate(size, next_offset)

    def _roll(self, base_offset: int) -> _Segment:
        seg = _Segment(self.dir / segment_name(base_offset), base_offset, create=True)
        self._segments.append(seg)
        self._bases.append(base_offset)
        self._dir_dirty = True
        return seg

    # ---- reads

    def _segment_for(self, offset: int) -> _Segment | None:
        if offset < self._start or offset > self.end_offset:
            raise LogOffsetOutOfRangeError(
                f"offset {offset} outside [{self._start}, {self.end_offset}]"
            )
        if offset == self.end_offset:
            return None
        i = bisect_right(self._bases, offset) - 1
        seg = self._segments[i]
        # A segment emptied by truncation may share its base with the log end.
        while seg.next_offset <= offset:
            i += 1
            seg = self._segments[i]
        return seg

    def read(self, offset: Offset, max_bytes: int, *, verify: bool = False) -> LogReadResult:
        """Whole batches from the one holding `offset`, as a zero-copy view of the mmapped file.

        The view is valid until the log is truncated or closed. With `verify`, every batch read
        is checked (header and CRC) first: a damaged batch raises CorruptLogError naming the
        segment file and the byte position, so that nobody is ever served it (only the last
        segment is fully checked when the log opens; bits rot in older ones too).
        """
        self._check_open()
        seg = self._segment_for(offset)
        if seg is None:
            return LogReadResult(self.end_offset, self.end_offset, memoryview(b""))
        try:
            start, end, first, nxt = seg.locate(offset, max_bytes)
        except (struct.error, IndexError):
            raise CorruptLogError(
                seg.path, 0, f"the batch headers leading to offset {offset} are damaged"
            ) from None
        data = seg.view()[start:end]
        if verify:
            verify_batches(data, seg.path, start)
        return LogReadResult(Offset(first), Offset(nxt), data)

    def read_region(self, offset: Offset, max_bytes: int) -> RegionReadResult:
        """Like `read`, as file regions for os.sendfile (no bytes pass through Python)."""
        self._check_open()
        seg = self._segment_for(offset)
        if seg is None:
            return RegionReadResult(self.end_offset, self.end_offset, ())
        start, end, first, nxt = seg.locate(offset, max_bytes)
        region = FileRegion(seg.path, seg.fd, start, end - start)
        return RegionReadResult(Offset(first), Offset(nxt), (region,))

    # ---- truncation and start offset

    def truncate_to(self, offset: Offset) -> None:
        """Remove every batch at or after `offset`; inside a batch, from its base offset."""
        self._check_open()
        if offset < self._start:
            raise LogOffsetOutOfRangeError(f"truncate to {offset} below start {self._start}")
        if offset >= self.end_offset:
            return
        removed = False
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            seg = self._segments.pop()
            self._bases.pop()
            if seg in self._unflushed:
                self._unflushed.remove(seg)
            seg.close()
            seg.path.unlink()
            removed = True
        seg = self._segments[-1]
        if seg.next_offset > offset:
            start, _end, first, _nxt = seg.locate(offset, 0)
            seg.truncate(start, first)
        os.fsync(seg.fd)
        if removed or self._dir_dirty:
            fsync_dir(self.dir)
            self._dir_dirty = False
        self._flushed = min(self._flushed, seg.next_offset)
        if self._cache.truncate_from_end(self.end_offset):
            self._write_epoch_checkpoint()

    def truncate_fully_and_start_at(self, offset: Offset) -> None:
        """Delete every segment and start an empty log at `offset` (a snapshot replaces it)."""
        self._check_open()
        if offset < 0:
            raise LogOffsetOutOfRangeError(f"negative start offset {offset}")
        for seg in self._segments:
            seg.close()
            seg.path.unlink()
        seg = _Segment(self.dir / segment_name(offset), offset, create=True)
        self._segments = [seg]
        self._bases = [offset]
        self._unflushed = []
        fsync_dir(self.dir)
        self._dir_dirty = False
        self._start = offset
        self._flushed = offset
        self._write_log_start()
        self._cache.clear()
        self._write_epoch_checkpoint()

    def advance_start_offset(self, offset: Offset) -> None:
        """Move the log start offset up to `offset` and delete the segments wholly below it."""
        self._check_open()
        if offset <= self._start:
            return
        if offset > self.end_offset:
            raise LogOffsetOutOfRangeError(
                f"start offset {offset} beyond end {self.end_offset}; "
                "use truncate_fully_and_start_at"
            )
        removed = False
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            seg = self._segments.pop(0)
            self._bases.pop(0)
            if seg in self._unflushed:
                self._unflushed.remove(seg)
            seg.close()
            seg.path.unlink()
            removed = True
        if removed:
            fsync_dir(self.dir)
        self._start = offset
        self._write_log_start()
        if self._cache.truncate_from_start(offset):
            self._write_epoch_checkpoint()

    # ---- epochs

    def end_offset_for_epoch(self, epoch: Epoch) -> OffsetAndEpoch:
        return self._cache.end_offset_for(epoch, self.end_offset)

    def epoch_entries(self) -> tuple[tuple[Epoch, Offset], ...]:
        return self._cache.pairs()

    def _write_epoch_checkpoint(self) -> None:
        write_checkpoint_file(self.dir / EPOCH_CHECKPOINT_NAME, self._cache.entries())

    def _write_log_start(self) -> None:
        text = f"0\n1\n{LOG_DIR_NAME.rsplit('-', 1)[0]} 0 {self._start}\n"
        atomic_write(self.data_dir / LOG_START_CHECKPOINT_NAME, text.encode("ascii"))

    # ---- durability

    def flush(self) -> None:
        """Make every append durable: fsync the written segments (oldest first), then the dir."""
        self._check_open()
        for seg in self._unflushed:
            os.fsync(seg.fd)
        self._unflushed.clear()
        if self._dir_dirty:
            fsync_dir(self.dir)
            self._dir_dirty = False
        self._flushed = self.end_offset

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        for seg in self._segments:
            seg.close()
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise LogError(f"log {self.dir} is closed")

    def __enter__(self) -> SegmentedLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_log_start(data_dir: Path) -> int | None:
    """The start offset from Kafka's `log-start-offset-checkpoint`, if recorded."""
    try:
        lines = (data_dir / LOG_START_CHECKPOINT_NAME).read_text("ascii").splitlines()
    except FileNotFoundError:
        return None
    topic = LOG_DIR_NAME.rsplit("-", 1)[0]
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and parts[1] == "0" and parts[2].isdigit():
            return int(parts[2])
    return None


__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "EPOCH_CHECKPOINT_NAME",
    "LOG_DIR_NAME",
    "AppendInfo",
    "AppendViolation",
    "CorruptLogError",
    "FileRegion",
    "LogAppendError",
    "LogError",
    "LogOffsetOutOfRangeError",
    "LogReadResult",
    "RecoveryReport",
    "RegionReadResult",
    "ReplicatedLog",
    "SegmentedLog",
]
