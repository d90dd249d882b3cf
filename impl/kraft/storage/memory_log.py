"""An in-memory `ReplicatedLog` for the deterministic simulator and the core's unit tests.

Same semantics as `SegmentedLog`, including crashes: appended batches are durable only once
flushed, and `simulate_crash()` keeps what a crash of the segmented log keeps (truncation and
start-offset changes are durable at once, as on disk). Stored batches are immutable `bytes`, so
a read view handed out stays valid whatever the log does afterwards.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path

from kraft.control_records import ControlRecord, encode_control_batch
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.records import encode_batch
from kraft.storage.batch_checks import (
    ValidatedBatch,
    batch_from_encoded,
    check_leader_epoch,
    info_of,
    leader_encoded_batch,
    validate_follower_data,
    verify_batches,
)
from kraft.storage.epoch_cache import LeaderEpochCache
from kraft.storage.replicated_log import (
    EMPTY_LOG_EPOCH,
    AppendInfo,
    AppendViolation,
    LogAppendError,
    LogOffsetOutOfRangeError,
    LogReadResult,
)


class MemoryLog:
    __slots__ = (
        "_bases",
        "_cache",
        "_chunks",
        "_epochs",
        "_flushed",
        "_nexts",
        "_positions",
        "_sizes",
        "_start",
        "flush_count",
    )

    def __init__(self, start_offset: int = 0) -> None:
        # One entry per batch: base offset, next offset, epoch, the bytes holding it and where.
        self._bases: list[int] = []
        self._nexts: list[int] = []
        self._epochs: list[int] = []
        self._chunks: list[bytes] = []
        self._positions: list[int] = []
        self._sizes: list[int] = []
        self._cache = LeaderEpochCache()
        self._start = int(start_offset)
        self._flushed = int(start_offset)
        self.flush_count = 0

    # ---- properties

    @property
    def start_offset(self) -> Offset:
        return Offset(self._start)

    @property
    def end_offset(self) -> Offset:
        return Offset(self._nexts[-1] if self._nexts else self._start)

    @property
    def last_epoch(self) -> Epoch:
        latest = self._cache.latest_epoch
        return EMPTY_LOG_EPOCH if latest is None else latest

    @property
    def flushed_offset(self) -> Offset:
        return Offset(self._flushed)

    @property
    def flush_needed(self) -> bool:
        return self._flushed < self.end_offset

    @property
    def end_offset_and_epoch(self) -> OffsetAndEpoch:
        return OffsetAndEpoch(self.last_epoch, self.end_offset)

    # ---- appends

    def append_as_leader(
        self, values: Sequence[bytes], epoch: Epoch, *, timestamp_ms: int
    ) -> AppendInfo:
        if not values:
            raise LogAppendError(AppendViolation.EMPTY, "no records")
        check_leader_epoch(epoch, self.last_epoch)
        data = encode_batch(self.end_offset, epoch, values, timestamp_ms=timestamp_ms)
        return self._append(data, [batch_from_encoded(data)])

    def append_control_as_leader(
        self, record: ControlRecord, epoch: Epoch, *, timestamp_ms: int
    ) -> AppendInfo:
        check_leader_epoch(epoch, self.last_epoch)
        data = encode_control_batch(self.end_offset, epoch, record, timestamp_ms=timestamp_ms)
        return self._append(data, [batch_from_encoded(data)])

    def append_leader_encoded(
        self, data: bytes | memoryview, first_offset: Offset, last_offset: Offset, epoch: Epoch
    ) -> AppendInfo:
        """The batch this replica's core encoded as leader: constant-time checks only."""
        batch = leader_encoded_batch(
            data,
            first_offset,
            last_offset,
            epoch,
            end_offset=self.end_offset,
            last_epoch=self.last_epoch,
        )
        return self._append(bytes(data), [batch])

    def append_as_follower(self, data: bytes | memoryview) -> AppendInfo:
        """Batches fetched from a leader: every header and CRC checked before any is stored."""
        batches = validate_follower_data(data, self.end_offset, self.last_epoch)
        return self._append(bytes(data), batches)

    def _append(self, data: bytes, batches: list[ValidatedBatch]) -> AppendInfo:
        for b in batches:
            self._bases.append(b.base_offset)
            self._nexts.append(b.next_offset)
            self._epochs.append(b.epoch)
            self._chunks.append(data)
            self._positions.append(b.position)
            self._sizes.append(b.size)
            latest = self._cache.latest_epoch
            if latest is None or b.epoch > latest:
                self._cache.assign(Epoch(b.epoch), Offset(b.base_offset))
        return info_of(batches)

    # ---- reads

    def read(self, offset: Offset, max_bytes: int, *, verify: bool = False) -> LogReadResult:
        end = self.end_offset
        if offset < self._start or offset > end:
            raise LogOffsetOutOfRangeError(f"offset {offset} outside [{self._start}, {end}]")
        if offset == end:
            return LogReadResult(end, end, memoryview(b""))
        first = bisect_right(self._bases, offset) - 1
        last = first + 1
        total = self._sizes[first]
        while last < len(self._bases) and total + self._sizes[last] <= max_bytes:
            total += self._sizes[last]
            last += 1
        chunk = self._chunks[first]
        pos = self._positions[first]
        # Zero copy when the batches sit side by side in one stored chunk.
        if all(self._chunks[i] is chunk for i in range(first + 1, last)):
            view = memoryview(chunk)[pos : pos + total]
        else:
            view = memoryview(
                b"".join(
                    memoryview(self._chunks[i])[
                        self._positions[i] : self._positions[i] + self._sizes[i]
                    ]
                    for i in range(first, last)
                )
            )
        if verify:
            # Batches were validated on the way in; this is for parity with the on-disk log.
            verify_batches(view, Path("<memory>"), 0)
        return LogReadResult(Offset(self._bases[first]), Offset(self._nexts[last - 1]), view)

    # ---- truncation and start offset

    def _drop_from(self, index: int) -> None:
        for column in (
            self._bases,
            self._nexts,
            self._epochs,
            self._chunks,
            self._positions,
            self._sizes,
        ):
            del column[index:]

    def truncate_to(self, offset: Offset) -> None:
        """Remove every batch at or after `offset`; inside a batch, from its base offset."""
        if offset < self._start:
            raise LogOffsetOutOfRangeError(f"truncate to {offset} below start {self._start}")
        if offset >= self.end_offset:
            return
        # The first batch that ends after `offset` goes, with everything after it.
        self._drop_from(bisect_right(self._nexts, offset))
        self._flushed = min(self._flushed, self.end_offset)
        self._cache.truncate_from_end(self.end_offset)

    def truncate_fully_and_start_at(self, offset: Offset) -> None:
        if offset < 0:
            raise LogOffsetOutOfRangeError(f"negative start offset {offset}")
        self._drop_from(0)
        self._start = offset
        self._flushed = offset
        self._cache.clear()

    def advance_start_offset(self, offset: Offset) -> None:
        if offset <= self._start:
            return
        if offset > self.end_offset:
            raise LogOffsetOutOfRangeError(
                f"start offset {offset} beyond end {self.end_offset}; "
                "use truncate_fully_and_start_at"
            )
        # Whole batches below the new start are released (the segmented log frees segments).
        drop = bisect_right(self._nexts, offset)
        for column in (
            self._bases,
            self._nexts,
            self._epochs,
            self._chunks,
            self._positions,
            self._sizes,
        ):
            del column[:drop]
        self._start = offset
        self._flushed = max(self._flushed, offset)
        self._cache.truncate_from_start(offset)

    # ---- epochs

    def end_offset_for_epoch(self, epoch: Epoch) -> OffsetAndEpoch:
        return self._cache.end_offset_for(epoch, self.end_offset)

    def epoch_entries(self) -> tuple[tuple[Epoch, Offset], ...]:
        return self._cache.pairs()

    # ---- durability

    def flush(self) -> None:
        self.flush_count += 1
        self._flushed = self.end_offset

    def close(self) -> None:
        self.flush()

    def simulate_crash(self, surviving_unflushed_batches: int = 0) -> None:
        """Lose what was not flushed, except the first `surviving_unflushed_batches` batches.

        A real crash may keep a prefix of unflushed writes; the default keeps none. The epoch
        cache is rebuilt from what survives, as SegmentedLog.open does.
        """
        first_unflushed = bisect_right(self._nexts, self._flushed)
        keep = min(len(self._bases), first_unflushed + max(surviving_unflushed_batches, 0))
        self._drop_from(keep)
        self._flushed = self.end_offset
        self._cache.truncate_from_end(self.end_offset)
