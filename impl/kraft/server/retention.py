"""Kafka's retention of the metadata log and its snapshots on the node: which snapshot the
log start should move to under `metadata.max.retention.bytes` and `metadata.max.retention.ms`
(Kafka's KafkaRaftLog.maybeClean), asked of the replica.

The rule (`retention_target`, pure), over the complete checkpoint files at or after the log
start, oldest first; the latest is never deleted:
- size: while the log's segments and all the snapshots kept together exceed the bytes
  limit, the oldest snapshot goes and the log start moves to the next one, which deletes the
  segments wholly below it (so the log's size is counted as it would be then);
- time: while the oldest snapshot's last contained record (its SnapshotHeader's
  LastContainedLogTimestamp) is older than the time limit, likewise.
A negative limit is off; both run, and the further target wins.

`Retention` applies it: after every snapshot written or installed, and at least every
`interval_ms` (Kafka cleans every 60 s), it asks the replica to move the log start to the
target (event DeleteBeforeSnapshot). The core moves it that far only as KIP-630's rule allows
(kraft.core.snapshots, LogStartPolicy.RETENTION), and the driver performs the move
(AdvanceLogStartOffset): the new start durable first, then the segments below it deleted,
then the older checkpoint files (kraft.storage.segmented_log, kraft.server.snapshot_store).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from kraft.core.events import DeleteBeforeSnapshot, Event
from kraft.ids import Offset, OffsetAndEpoch
from kraft.storage.snapshot_directory import snapshot_files
from kraft.storage.snapshot_files import CheckpointReader, CorruptSnapshotError, SnapshotFileKind

__all__ = [
    "CLEAN_INTERVAL_MS",
    "Retention",
    "RetentionLimits",
    "RetentionLog",
    "SnapshotFile",
    "retention_target",
]

log = logging.getLogger("kraft.node")

# Kafka's KafkaRaftClient runs the cleaner every 60 s.
CLEAN_INTERVAL_MS: Final = 60_000


@dataclass(frozen=True, slots=True)
class RetentionLimits:
    """`metadata.max.retention.bytes` and `metadata.max.retention.ms`; < 0: no limit."""

    max_bytes: int
    max_ms: int


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    """A complete checkpoint file: its id, its size, and how to read its header's
    LastContainedLogTimestamp (None: unreadable)."""

    snapshot_id: OffsetAndEpoch
    size: int
    timestamp: Callable[[], int | None]


class RetentionLog(Protocol):
    """What retention reads of the log (kraft.storage.segmented_log.SegmentedLog)."""

    @property
    def start_offset(self) -> Offset: ...

    @property
    def size_in_bytes(self) -> int: ...

    def size_from(self, offset: Offset) -> int: ...


def retention_target(
    snapshots: Sequence[SnapshotFile], log_: RetentionLog, now_ms: int, limits: RetentionLimits
) -> tuple[OffsetAndEpoch, str] | None:
    """The snapshot the log start should move to, and why; None: nothing to delete."""
    snaps = sorted(snapshots, key=lambda s: s.snapshot_id.offset)
    keep = 0  # index of the oldest snapshot kept
    why = ""
    if limits.max_bytes >= 0:
        total = sum(s.size for s in snaps)
        while keep < len(snaps) - 1:
            log_bytes = (
                log_.size_in_bytes if keep == 0 else log_.size_from(snaps[keep].snapshot_id.offset)
            )
            if log_bytes + total <= limits.max_bytes:
                break
            why = (
                f"the log ({log_bytes} bytes) and the snapshots ({total} bytes) exceed"
                f" metadata.max.retention.bytes ({limits.max_bytes})"
            )
            total -= snaps[keep].size
            keep += 1
    if limits.max_ms >= 0:
        by_time = 0
        while by_time < len(snaps) - 1:
            stamp = snaps[by_time].timestamp()
            if stamp is None or now_ms - stamp <= limits.max_ms:
                break
            by_time += 1
        if by_time > keep:
            keep = by_time
            why = (
                f"snapshot {_name(snaps[by_time - 1].snapshot_id)} holds records older than"
                f" metadata.max.retention.ms ({limits.max_ms})"
            )
    if keep == 0:
        return None
    return snaps[keep].snapshot_id, why


def _name(sid: OffsetAndEpoch) -> str:
    return f"{sid.offset}-{sid.epoch}"


def _header_timestamp(path: Path) -> Callable[[], int | None]:
    def read() -> int | None:
        try:
            with CheckpointReader(path) as reader:
                return reader.header.last_contained_log_timestamp
        except (CorruptSnapshotError, OSError):
            return None

    return read


def checkpoint_files(directory: Path, start: Offset) -> list[SnapshotFile]:
    """The complete checkpoint files at or after `start` (the bootstrap one left out)."""
    out = []
    for found in snapshot_files(directory):
        sid = found.snapshot_id
        if found.kind is not SnapshotFileKind.COMPLETE or sid.offset <= 0 or sid.offset < start:
            continue
        try:
            size = found.path.stat().st_size
        except OSError:
            continue  # deleted meanwhile
        out.append(SnapshotFile(sid, size, _header_timestamp(found.path)))
    return out


class Retention:
    """Asks the replica to delete what retention no longer keeps (see the module docstring)."""

    def __init__(
        self,
        log_: RetentionLog,
        directory: Path,
        limits: RetentionLimits,
        clock: Callable[[], int],
        *,
        submit: Callable[[Event], None],
        interval_ms: int = CLEAN_INTERVAL_MS,
    ) -> None:
        self._log = log_
        self.directory = directory
        self.limits = limits
        self._clock = clock
        self._submit = submit
        self.interval_ms = interval_ms
        # The furthest snapshot asked for (the core remembers it; asked again only if further).
        self.asked: OffsetAndEpoch | None = None
        self.checks = 0
        self._task: asyncio.Task[None] | None = None

    def check(self) -> OffsetAndEpoch | None:
        """Apply the rule now; the snapshot asked for, if a new one."""
        self.checks += 1
        if self.limits.max_bytes < 0 and self.limits.max_ms < 0:
            return None
        files = checkpoint_files(self.directory, self._log.start_offset)
        found = retention_target(files, self._log, self._clock(), self.limits)
        if found is None:
            return None
        target, why = found
        if target.offset <= self._log.start_offset or (
            self.asked is not None and target.offset <= self.asked.offset
        ):
            return None
        self.asked = target
        log.info("retention: asking to delete before snapshot %s: %s", _name(target), why)
        self._submit(DeleteBeforeSnapshot(self._clock(), target))
        return target

    def start(self) -> None:
        """Check every `interval_ms` until `close` (on the running loop)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_ms / 1000)
            try:
                self.check()
            except OSError as e:
                log.warning("retention check failed: %s", e)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
