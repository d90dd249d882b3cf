"""The `ReplicatedLog` contract: what the node and the simulator ask of a replica's log
(`__cluster_metadata-0`), with the values it returns and the errors it raises.

Two implementations keep it: `kraft.storage.segmented_log.SegmentedLog` (Kafka's on-disk
layout) and `kraft.storage.memory_log.MemoryLog` (in memory, for the simulator and the core's
tests), with the same semantics:

- Appends are all or nothing: a rejected append raises `LogAppendError` and changes nothing.
- `append_as_follower` takes batches from elsewhere (a leader's fetch response) and checks each
  one in full: header, CRC, contiguous offsets, non-decreasing epochs. `append_leader_encoded`
  takes the one batch this replica's core just encoded as leader and checks only what is cheap
  (base offset, length, epoch continuity): the bytes are not parsed or CRC-checked again.
- `truncate_to(offset)` removes whole batches: an offset inside a batch truncates at that
  batch's base offset (a batch is the unit of replication, as in Kafka).
- `read` returns whole batches starting with the one that contains `offset`, at least one even
  if it is larger than `max_bytes` (Kafka's fetch rule). A read never spans two segments.
- Data is durable only up to `flushed_offset`; `flush()` makes everything appended durable.
  Truncation and start-offset changes are durable when they return (they are rare).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

from kraft.control_records import ControlRecord
from kraft.errors import KraftError
from kraft.ids import Epoch, Offset, OffsetAndEpoch

# Epoch of an empty log, as KafkaMetadataLog.lastFetchedEpoch answers without a snapshot.
EMPTY_LOG_EPOCH = Epoch(0)


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


# --------------------------------------------------------------------------- the contract


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
    def append_leader_encoded(
        self, data: bytes | memoryview, first_offset: Offset, last_offset: Offset, epoch: Epoch
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


__all__ = [
    "EMPTY_LOG_EPOCH",
    "AppendInfo",
    "AppendViolation",
    "CorruptLogError",
    "LogAppendError",
    "LogError",
    "LogOffsetOutOfRangeError",
    "LogReadResult",
    "ReplicatedLog",
]
