"""The replicated log as Apache Kafka lays it out on disk: `<data-dir>/__cluster_metadata-0/`
holding `%020d.log` segment files, Kafka's `leader-epoch-checkpoint` beside them and the
`log-start-offset-checkpoint` in the data dir. `SegmentedLog` keeps the `ReplicatedLog`
contract (kraft.storage.replicated_log); a segment is kraft.storage.segment, opening after a
crash is kraft.storage.recovery.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kraft.control_records import ControlRecord, encode_control_batch
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.records import BATCH_HEADER_SIZE, encode_batch
from kraft.storage.batch_checks import (
    ValidatedBatch,
    batch_from_encoded,
    check_leader_epoch,
    info_of,
    leader_encoded_batch,
    validate_follower_data,
    verify_batches,
)
from kraft.storage.durable import atomic_write, fsync_dir
from kraft.storage.epoch_cache import (
    CheckpointFormatError,
    LeaderEpochCache,
    read_checkpoint_file,
    write_checkpoint_file,
)
from kraft.storage.recovery import RecoveryReport, recover_segments
from kraft.storage.replicated_log import (
    EMPTY_LOG_EPOCH,
    AppendInfo,
    AppendViolation,
    CorruptLogError,
    LogAppendError,
    LogError,
    LogOffsetOutOfRangeError,
    LogReadResult,
)
from kraft.storage.segment import LOG_SUFFIX, Segment, segment_name, write_all

LOG_DIR_NAME = "__cluster_metadata-0"
EPOCH_CHECKPOINT_NAME = "leader-epoch-checkpoint"
# Kafka keeps log start offsets in this data-dir file ("topic partition offset" lines).
LOG_START_CHECKPOINT_NAME = "log-start-offset-checkpoint"
DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
# Kafka's default log.index.interval.bytes.
DEFAULT_INDEX_INTERVAL_BYTES = 4096


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


class SegmentedLog:
    """The log as Kafka lays it out: `<data-dir>/__cluster_metadata-0/%020d.log` segments."""

    def __init__(
        self,
        data_dir: Path,
        segments: list[Segment],
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
        self._unflushed: list[Segment] = []
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
        stored_start = read_log_start(data_dir)
        if not bases:
            base = stored_start or 0
            seg = Segment(log_dir / segment_name(base), base, create=True)
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
        segments = [Segment(log_dir / segment_name(b), b, create=False) for b in bases]
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
        segments: list[Segment],
        stored_start: int | None,
        *,
        segment_bytes: int,
        index_interval_bytes: int,
        full_check: bool,
    ) -> SegmentedLog:
        found = recover_segments(
            data_dir / LOG_DIR_NAME,
            segments,
            index_interval_bytes=index_interval_bytes,
            full_check=full_check,
        )
        segments, cache, batches = found.segments, found.cache, found.batches
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
        # An advance of the start interrupted before its segments were deleted: finish it.
        log.delete_segments_below_start()
        rebuilt = log._reconcile_epoch_checkpoint()
        log.recovery_report = RecoveryReport(
            segments=len(log._segments),
            batches=batches,
            bytes_dropped=found.bytes_dropped,
            offset_dropped_from=None if found.dropped_from is None else Offset(found.dropped_from),
            reason=found.reason,
            epoch_cache_rebuilt=rebuilt,
        )
        log._sync_recovered()
        return log

    def _sync_recovered(self) -> None:
        """A killed process's last writes may be in the page cache only, not on the disk: fsync
        what recovery kept (and the directory) before the log counts it flushed, since a
        follower's next Fetch and a leader's high watermark claim it durable."""
        for seg in self._segments:
            os.fsync(seg.fd)
        fsync_dir(self.dir)

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

    def append_leader_encoded(
        self, data: bytes | memoryview, first_offset: Offset, last_offset: Offset, epoch: Epoch
    ) -> AppendInfo:
        """The batch this replica's core encoded as leader: constant-time checks only."""
        self._check_open()
        batch = leader_encoded_batch(
            data,
            first_offset,
            last_offset,
            epoch,
            end_offset=self.end_offset,
            last_epoch=self.last_epoch,
        )
        return self._append_validated(data, [batch])

    def append_as_follower(self, data: bytes | memoryview) -> AppendInfo:
        """Batches fetched from a leader: every header and CRC checked before any is written."""
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
        created: list[Segment] = []
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
                write_all(seg.fd, view[run_start : run_start + run_bytes])
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

    def _undo_append(self, undo: list[tuple[Segment, int, int]], created: list[Segment]) -> None:
        for seg in created:
            self._segments.remove(seg)
            self._bases.remove(seg.base_offset)
            if seg in self._unflushed:
                self._unflushed.remove(seg)
            seg.close()
            seg.path.unlink(missing_ok=True)
        for seg, size, next_offset in undo:
            seg.truncate(size, next_offset)

    def _roll(self, base_offset: int) -> Segment:
        seg = Segment(self.dir / segment_name(base_offset), base_offset, create=True)
        self._segments.append(seg)
        self._bases.append(base_offset)
        self._dir_dirty = True
        return seg

    # ---- reads

    def _segment_for(self, offset: int) -> Segment | None:
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
        """Whole batches from the one holding `offset`, as a zero-copy view of the mmapped file
        (or, for a short read at the end of a segment that grew since it was mapped, of a copy
        of that tail: kraft.storage.segment.TAIL_READ_BYTES).

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
            start, data, first, nxt = seg.read(offset, max_bytes)
        except (struct.error, IndexError):
            raise CorruptLogError(
                seg.path, 0, f"the batch headers leading to offset {offset} are damaged"
            ) from None
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
        """Delete every segment and start an empty log at `offset` (a snapshot replaces it).
        The new start is durable first: a crash before the segments are gone reopens as a log
        starting beyond its end, which opening truncates fully the same way."""
        self._check_open()
        if offset < 0:
            raise LogOffsetOutOfRangeError(f"negative start offset {offset}")
        self._start = offset
        self._write_log_start()
        for seg in self._segments:
            seg.close()
            seg.path.unlink(missing_ok=True)
        seg = Segment(self.dir / segment_name(offset), offset, create=True)
        self._segments = [seg]
        self._bases = [offset]
        self._unflushed = []
        fsync_dir(self.dir)
        self._dir_dirty = False
        self._flushed = offset
        self._cache.clear()
        self._write_epoch_checkpoint()

    def advance_start_offset(self, offset: Offset) -> None:
        """Move the log start offset up to `offset` and delete the segments wholly below it,
        in that order (`move_start_offset`, then `delete_segments_below_start`)."""
        self.move_start_offset(offset)
        self.delete_segments_below_start()

    def move_start_offset(self, offset: Offset) -> None:
        """Move the log start offset up to `offset`, durably (the `log-start-offset-checkpoint`
        is written atomically), and drop the epochs below it; no file is deleted. Nothing below
        the new start is read from then on, so a crash before the segments below it are deleted
        leaves a consistent directory: opening it deletes them."""
        self._check_open()
        if offset <= self._start:
            return
        if offset > self.end_offset:
            raise LogOffsetOutOfRangeError(
                f"start offset {offset} beyond end {self.end_offset}; "
                "use truncate_fully_and_start_at"
            )
        self._start = offset
        self._write_log_start()
        if self._cache.truncate_from_start(offset):
            self._write_epoch_checkpoint()

    def delete_segments_below_start(self) -> int:
        """Delete the segments wholly below the log start (those whose next segment begins at
        or below it: Kafka's deleteOldSegments); the active segment always stays. How many."""
        self._check_open()
        removed = 0
        while len(self._segments) > 1 and self._segments[1].base_offset <= self._start:
            seg = self._segments.pop(0)
            self._bases.pop(0)
            if seg in self._unflushed:
                self._unflushed.remove(seg)
            seg.close()
            seg.path.unlink(missing_ok=True)
            removed += 1
        if removed:
            fsync_dir(self.dir)
        return removed

    # ---- sizes (retention)

    @property
    def size_in_bytes(self) -> int:
        """The bytes of every segment file (Kafka's UnifiedLog.size)."""
        return sum(s.size for s in self._segments)

    def size_from(self, offset: Offset) -> int:
        """The bytes the segments would hold with the log start moved to `offset` (those
        wholly below it deleted)."""
        keep = bisect_right(self._bases, offset) - 1
        return sum(s.size for s in self._segments[max(keep, 0) :])

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


def read_log_start(data_dir: Path) -> int | None:
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
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "DEFAULT_SEGMENT_BYTES",
    "EPOCH_CHECKPOINT_NAME",
    "LOG_DIR_NAME",
    "LOG_START_CHECKPOINT_NAME",
    "FileRegion",
    "RegionReadResult",
    "SegmentedLog",
    "read_log_start",
]
