"""KIP-630 snapshots on the node, the part that needs nothing from the core: start-up from the
latest valid snapshot, and the policy that writes new ones. The log is never truncated here
(its start offset stays), so no snapshot is ever the only copy of a committed record.

- `recover_state` (start-up): removes leftover `.part` / `.deleted` files, then loads the
  newest valid checkpoint file into the state machine, which is then at the snapshot's end
  offset, so the applier (kraft.server.applier) replays only the log after it. A file that
  fails validation, or does not match the log (the log's epoch at end offset - 1 differs), is
  skipped with a log line and the next older one is tried; none: the machine stays empty at
  the log start. A valid snapshot beyond the log end is refused (`SnapshotAheadOfLogError`):
  KIP-630 then makes log start = log end = the snapshot's end offset, which needs the core to
  know of it (`LogMetadata.install_snapshot`), or the replica would vote and stand with a log
  shorter than the committed state it holds.
- `Snapshotter` (the policy, as Kafka's SnapshotGenerator): as the driver releases a high
  watermark it counts the bytes of the newly committed batches (headers only, from the log);
  when they reach `metadata.log.max.record.bytes.between.snapshots`, or when
  `metadata.log.max.snapshot.interval.ms` (0: never) has passed since the last snapshot and
  something was committed since, it catches the state machine up to that high watermark in
  chunks between the driver's batches (never past the released high watermark: a snapshot is
  only ever at a committed offset), captures a copy of it on the event loop, and writes the
  checkpoint `<applied offset>-<epoch of the last applied batch>` on a worker thread. Never
  two at once. Then only the newest `kraft.metadata.snapshots.retained` files are kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Generic, Protocol, TypeVar

from kraft.app.port import CapturingStateMachine, StateMachine, StateMachineError
from kraft.errors import KraftError
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.records import CorruptRecordError, iter_batches
from kraft.server.applier import Applier
from kraft.storage.replicated_log import LogError, LogReadResult
from kraft.storage.snapshot_directory import (
    delete_snapshot,
    load_state_snapshot,
    remove_leftovers,
    snapshot_files,
    write_state_snapshot,
)
from kraft.storage.snapshot_files import (
    CorruptSnapshotError,
    SnapshotError,
    SnapshotFileKind,
    SnapshotSummary,
    check_snapshot,
)

__all__ = [
    "SnapshotAheadOfLogError",
    "SnapshotLog",
    "SnapshotPolicy",
    "Snapshotter",
    "recover_state",
]

log = logging.getLogger("kraft.node")

# Reads (of about 1 MiB) the policy's catch-up does per chunk, between driver batches.
_CATCH_UP_READS: Final = 4
_COUNT_BYTES: Final = 1 << 20


class SnapshotAheadOfLogError(KraftError):
    """The newest valid snapshot ends beyond the log end: not supported without the core."""


class SnapshotLog(Protocol):
    """What the snapshot code reads of the log (kraft.storage.segmented_log.SegmentedLog)."""

    @property
    def start_offset(self) -> Offset: ...

    @property
    def end_offset(self) -> Offset: ...

    def epoch_entries(self) -> tuple[tuple[Epoch, Offset], ...]: ...

    def read(self, offset: Offset, max_bytes: int, *, verify: bool = False) -> LogReadResult: ...


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    max_new_record_bytes: int
    max_interval_ms: int
    retained: int


def _epoch_at(entries: tuple[tuple[Epoch, Offset], ...], offset: Offset) -> Epoch | None:
    """The epoch of the record at `offset` by the leader epoch cache (None: not known)."""
    found: Epoch | None = None
    for epoch, start in entries:
        if start > offset:
            break
        found = epoch
    return found


# --------------------------------------------------------------------------- start-up


def recover_state(
    directory: Path, machine: StateMachine, log_: SnapshotLog
) -> SnapshotSummary | None:
    """Start-up: remove leftovers, then load the newest usable snapshot into `machine` (see
    the module docstring); the snapshot loaded, or None."""
    for path in remove_leftovers(directory):
        log.info("removed the leftover snapshot file %s", path.name)
    entries = log_.epoch_entries()
    for found in reversed(snapshot_files(directory)):
        if found.kind is not SnapshotFileKind.COMPLETE:
            continue
        sid = found.snapshot_id
        name = found.path.name
        if sid.offset == 0:
            continue  # holds no record of the log (Kafka's bootstrap snapshot)
        try:
            check_snapshot(found.path)
        except (CorruptSnapshotError, OSError) as e:
            log.warning("snapshot %s is not used: it fails validation: %s", name, e)
            continue
        if sid.offset > log_.end_offset:
            raise SnapshotAheadOfLogError(
                f"snapshot {name} ends at offset {sid.offset}, beyond the log end "
                f"{log_.end_offset}: starting from it needs the log start and end to move to "
                "its end offset (KIP-630), which this node does not support yet"
            )
        if sid.offset < log_.start_offset:
            log.warning(
                "snapshot %s is not used: it ends below the log start offset %d",
                name,
                log_.start_offset,
            )
            continue
        epoch = _epoch_at(entries, Offset(sid.offset - 1))
        if epoch is not None and epoch != sid.epoch:
            log.warning(
                "snapshot %s is not used: the log's record at offset %d has epoch %d, not %d",
                name,
                sid.offset - 1,
                epoch,
                sid.epoch,
            )
            continue
        try:
            summary = load_state_snapshot(found.path, machine)
        except (CorruptSnapshotError, StateMachineError, OSError) as e:
            log.warning("snapshot %s is not used: it cannot be loaded: %s", name, e)
            continue
        log.info(
            "state machine loaded from snapshot %s (%d records): end offset %d, epoch %d; "
            "the log is replayed from offset %d",
            name,
            summary.records,
            sid.offset,
            sid.epoch,
            sid.offset,
        )
        return summary
    return None


# --------------------------------------------------------------------------- the policy

C = TypeVar("C", bound=CapturingStateMachine)


class Snapshotter(Generic[C]):
    """Writes a snapshot of the applier's state machine when the policy says so."""

    def __init__(
        self,
        applier: Applier[C],
        log_: SnapshotLog,
        directory: Path,
        policy: SnapshotPolicy,
        clock: Callable[[], int],
        *,
        loaded: OffsetAndEpoch | None = None,
    ) -> None:
        self._applier = applier
        self._log = log_
        self.directory = directory
        self.policy = policy
        self._clock = clock
        # Committed batch bytes are counted from here (whole batches, below the HWM).
        self._counted = applier.machine.applied_offset
        self.bytes_since = 0
        self._last_ms = clock()
        self.latest: OffsetAndEpoch | None = loaded
        self.written: list[Path] = []
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def _count(self, high_watermark: Offset) -> None:
        """Add the bytes of the whole batches between the counted offset and the HWM (a
        follower's HWM may be past its log end: counted up to the log end then)."""
        while self._counted < high_watermark:
            moved = False
            try:
                got = self._log.read(self._counted, _COUNT_BYTES, verify=False)
                for _, h in iter_batches(got.data, verify=False):
                    if h.last_offset >= high_watermark:
                        break
                    self.bytes_since += h.size_in_bytes
                    self._counted = Offset(h.next_offset)
                    moved = True
            except (CorruptRecordError, LogError) as e:
                # The applier finds and reports a damaged batch when it reaches it.
                log.debug("snapshot policy: cannot count from offset %d: %s", self._counted, e)
                return
            if not moved:
                return

    def due(self) -> str | None:
        """Why a snapshot is due now (Kafka's SnapshotGenerator: bytes first, then time)."""
        if self.bytes_since >= self.policy.max_new_record_bytes:
            return f"{self.bytes_since} committed bytes since the last snapshot"
        interval = self.policy.max_interval_ms
        if interval > 0 and self.bytes_since > 0 and self._clock() - self._last_ms >= interval:
            return f"{interval} ms since the last snapshot"
        return None

    def on_high_watermark(self, high_watermark: Offset) -> None:
        """The driver released a high watermark: count, and start a snapshot when due."""
        self._count(high_watermark)
        if self._task is not None or self._applier.failed is not None:
            return
        reason = self.due()
        if reason is not None:
            self._task = asyncio.get_running_loop().create_task(
                self._snapshot(high_watermark, reason)
            )

    async def _snapshot(self, target: Offset, reason: str) -> None:
        try:
            applier = self._applier
            machine = applier.machine
            # In chunks: each is a bounded amount of work between the driver's batches.
            while machine.applied_offset < target and applier.failed is None:
                if applier.catch_up(max_reads=_CATCH_UP_READS):
                    break
                await asyncio.sleep(0)
            if applier.failed is not None:
                return
            sid = OffsetAndEpoch(machine.applied_epoch, machine.applied_offset)
            if sid.offset == 0 or (self.latest is not None and sid.offset <= self.latest.offset):
                return
            now = self._clock()
            copy = machine.capture()
            stamp = machine.last_append_timestamp_ms
            self._last_ms = now
            self.bytes_since = 0
            self._counted = sid.offset
            self._count(target)  # what committed past the snapshot counts toward the next
            path = await asyncio.get_running_loop().run_in_executor(
                None, self._write, copy, now, stamp
            )
            self.latest = sid
            self.written.append(path)
            log.info("snapshot %s written (%s)", path.name, reason)
        except (OSError, SnapshotError, ValueError) as e:
            self.last_error = str(e)
            log.error("snapshot at offset %d failed: %s", self._applier.machine.applied_offset, e)
        finally:
            self._task = None

    def _write(self, copy: StateMachine, now: int, stamp: int) -> Path:
        """On a worker thread: the checkpoint file, then the retention of old ones."""
        path = write_state_snapshot(
            copy, self.directory, timestamp_ms=now, last_contained_log_timestamp=stamp
        )
        complete = [
            f for f in snapshot_files(self.directory) if f.kind is SnapshotFileKind.COMPLETE
        ]
        for old in complete[: max(0, len(complete) - self.policy.retained)]:
            delete_snapshot(self.directory, old.snapshot_id)
            log.info(
                "snapshot %s deleted (the newest %d are kept)", old.path.name, self.policy.retained
            )
        return path

    async def close(self) -> None:
        """Wait for a snapshot being written (its thread cannot be interrupted)."""
        task = self._task
        if task is not None:
            with contextlib.suppress(Exception):
                await task
