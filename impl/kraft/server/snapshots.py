"""KIP-630 snapshots on the node, the part that needs nothing from the core: start-up from the
latest valid snapshot, and the policy that writes new ones. The log is never truncated here
(its start offset stays), so no snapshot is ever the only copy of a committed record.

- `recover_state` (start-up): removes leftover `.part` / `.deleted` files and the checkpoint
  files that end below the log start (an AdvanceLogStartOffset that a crash interrupted after
  the new start was durable: Kafka's recoverSnapshots does the same), then loads the
  newest valid checkpoint file into the state machine, which is then at the snapshot's end
  offset, so the applier (kraft.server.applier) replays only the log after it. A file that
  fails validation, or does not match the log (the log's epoch at end offset - 1 differs), is
  skipped with a log line and the next older one is tried; none: the machine stays empty at
  the log start. A valid file that the state machine refuses to load (a key-value node
  holding a Kafka snapshot of metadata records) is skipped likewise, but if the log starts
  after offset 0 and nothing else was loaded, start-up fails with SnapshotRefusedError,
  which says so. A valid snapshot beyond the log end makes the log start and end at its end
  offset (KIP-630: the log is truncated fully and starts there).
- `Snapshotter` (the policy, as Kafka's SnapshotGenerator): as the driver releases a high
  watermark it counts the bytes of the newly committed batches (headers only, from the log);
  when they reach `metadata.log.max.record.bytes.between.snapshots`, or when
  `metadata.log.max.snapshot.interval.ms` (0: never) has passed since the last snapshot and
  something was committed since, it catches the state machine up to that high watermark in
  chunks between the driver's batches (never past the released high watermark), captures a
  copy of it on the event loop and asks the core (event CreateSnapshot at the applied
  offset). Only on the core's WriteSnapshot does it write the checkpoint, on a worker
  thread, then it reports it durable (event SnapshotWritten); a SnapshotRefused drops the
  copy. Never two at once. After each snapshot written or installed it runs the retention
  policy (kraft.server.retention), which may ask the core to move the log start; which
  snapshots and segments are deleted is the core's decision (AdvanceLogStartOffset, performed
  by the driver): nothing is deleted here but at start-up.
- The snapshot hooks of the driver (kraft.server.driver.SnapshotHooks): before the log start
  moves, the state machine is caught up to it; a snapshot fetched from the leader is loaded
  into it.
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
from kraft.control_records import VotersRecord
from kraft.core.events import CreateSnapshot, Event, SnapshotWritten
from kraft.core.log_metadata import LogMetadata, LogState
from kraft.core.voter_set import KRAFT_VERSION_DYNAMIC, VoterSet
from kraft.errors import KraftError
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.records import CorruptRecordError, iter_batches
from kraft.server.applier import Applier
from kraft.server.retention import Retention
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
    load_validated_snapshot,
)

__all__ = [
    "SnapshotLog",
    "SnapshotPolicy",
    "SnapshotRefusedError",
    "Snapshotter",
    "recover_state",
]

# Loads a checkpoint file into a state machine (snapshot_directory / snapshot_files).
SnapshotLoader = Callable[[Path, StateMachine], SnapshotSummary]

log = logging.getLogger("kraft.node")

# Reads (of about 1 MiB) the policy's catch-up does per chunk, between driver batches.
_CATCH_UP_READS: Final = 1
_COUNT_BYTES: Final = 1 << 20


class SnapshotLog(Protocol):
    """What the snapshot code reads of the log (kraft.storage.segmented_log.SegmentedLog)."""

    @property
    def start_offset(self) -> Offset: ...

    @property
    def end_offset(self) -> Offset: ...

    def epoch_entries(self) -> tuple[tuple[Epoch, Offset], ...]: ...

    def read(self, offset: Offset, max_bytes: int, *, verify: bool = False) -> LogReadResult: ...

    def truncate_fully_and_start_at(self, offset: Offset) -> None: ...


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    max_new_record_bytes: int
    max_interval_ms: int


# --------------------------------------------------------------------------- start-up


class SnapshotRefusedError(KraftError):
    """The log starts after offset 0, and the snapshot at its start is a valid checkpoint
    file that the configured state machine cannot load (a key-value node holding a Kafka
    snapshot of metadata records): the node cannot rebuild its state."""


def recover_state(
    directory: Path, machine: StateMachine, log_: SnapshotLog
) -> SnapshotSummary | None:
    """Start-up: remove leftovers, then load the newest usable snapshot into `machine` (see
    the module docstring); the snapshot loaded, or None."""
    for path in remove_leftovers(directory):
        log.info("removed the leftover snapshot file %s", path.name)
    _delete_below_start(directory, log_.start_offset)
    # The log's epochs by offset, as the replica will see them.
    log_meta = LogMetadata(
        LogState(log_.start_offset, log_.end_offset, log_.epoch_entries()), VoterSet(())
    )
    # The newest valid checkpoint file the machine refused to load: (name, reason).
    refused: tuple[str, str] | None = None
    for found in reversed(snapshot_files(directory)):
        if found.kind is not SnapshotFileKind.COMPLETE:
            continue
        sid = found.snapshot_id
        name = found.path.name
        if sid.offset == 0:
            continue  # holds no record of the log (Kafka's bootstrap snapshot)
        beyond = sid.offset > log_.end_offset
        if not beyond and sid.offset < log_.start_offset:
            log.warning(
                "snapshot %s is not used: it ends below the log start offset %d",
                name,
                log_.start_offset,
            )
            continue
        epoch = None if beyond else log_meta.epoch_at(Offset(sid.offset - 1))
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
            # Verifies the whole file before the machine sees any of it.
            summary = load_state_snapshot(found.path, machine)
        except (CorruptSnapshotError, OSError) as e:
            log.warning("snapshot %s is not used: it fails validation: %s", name, e)
            continue
        except StateMachineError as e:
            refused = refused or (name, str(e))
            log.warning(
                "snapshot %s is not used: it is a valid checkpoint file, but the state machine "
                "(%s) cannot load it: %s",
                name,
                type(machine).__name__,
                e,
            )
            continue
        if beyond:
            log.info(
                "snapshot %s ends beyond the log end %d: the log now starts and ends at %d",
                name,
                log_.end_offset,
                sid.offset,
            )
            log_.truncate_fully_and_start_at(sid.offset)
            _delete_below_start(directory, sid.offset)
            return summary
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
    if refused is not None and log_.start_offset > 0:
        # Without it the state below the log start is not here: say why it is not loaded
        # (the node's own "no valid snapshot" would send the operator after a damaged file).
        name, reason = refused
        raise SnapshotRefusedError(
            f"the log starts at offset {log_.start_offset} and the snapshot {name} holds the "
            f"state below it; the file is a valid checkpoint, but the configured state machine "
            f"(kraft.state.machine: {type(machine).__name__}) cannot load it: {reason}. Start "
            "the node with the state machine that wrote it (metadata for Kafka metadata "
            "records), or wipe and re-format the data directory so that the node fetches a "
            "snapshot from the leader"
        )
    return None


def _delete_below_start(directory: Path, start: Offset) -> None:
    """Delete the complete checkpoint files that end below the log start `start`."""
    for found in snapshot_files(directory):
        sid = found.snapshot_id
        complete = found.kind is SnapshotFileKind.COMPLETE
        if complete and 0 < sid.offset < start and delete_snapshot(directory, sid):
            log.info("snapshot %s deleted: it ends below the log start %d", found.path.name, start)


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
        submit: Callable[[Event], None],
        loaded: OffsetAndEpoch | None = None,
        retention: Retention | None = None,
    ) -> None:
        """`submit` hands an event to the driver (CreateSnapshot, SnapshotWritten);
        `retention` runs after each snapshot written or installed."""
        self.retention = retention
        self._applier = applier
        self._submit = submit
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
        # The copy captured for the CreateSnapshot asked, until the core answers.
        self._pending: tuple[StateMachine, int, int, str] | None = None
        # The Voters record a snapshot ending at an offset carries (KIP-853, kraft.version 1;
        # None: a static voter set, kraft.version 0). Set by the node from its replica.
        self.voters_at: Callable[[Offset], VotersRecord | None] = lambda _end: None

    @property
    def running(self) -> bool:
        """A snapshot is being prepared, waits for the core's answer, or is being written."""
        return self._task is not None or self._pending is not None

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
        if self.running or self._applier.failed is not None:
            return
        reason = self.due()
        if reason is not None:
            self._task = asyncio.get_running_loop().create_task(
                self._prepare(high_watermark, reason)
            )

    async def _prepare(self, target: Offset, reason: str) -> None:
        """Catch up to `target` in chunks, capture the state, ask the core (CreateSnapshot)."""
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
            self._pending = (machine.capture(), now, machine.last_append_timestamp_ms, reason)
            self._last_ms = now
            self.bytes_since = 0
            self._counted = sid.offset
            self._count(target)  # what committed past the snapshot counts toward the next
            self._submit(CreateSnapshot(now, sid.offset))
        finally:
            if self._task is asyncio.current_task():
                self._task = None

    # ------------------------------------------------------------ the driver's hooks

    def write_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """The core's WriteSnapshot: write the captured copy if it is that snapshot."""
        pending, self._pending = self._pending, None
        if pending is None:
            log.warning("WriteSnapshot %s with no snapshot prepared: ignored", snapshot_id)
            return
        copy, now, stamp, reason = pending
        have = OffsetAndEpoch(copy.applied_epoch, copy.applied_offset)
        if have != snapshot_id:
            log.error(
                "WriteSnapshot %s, but the state captured is at %s: not written", snapshot_id, have
            )
            return
        voters = self.voters_at(snapshot_id.offset)
        self._task = asyncio.get_running_loop().create_task(
            self._write(snapshot_id, copy, now, stamp, reason, voters=voters)
        )

    def snapshot_refused(self, end_offset: Offset, reason: str) -> None:
        if self._pending is not None and self._pending[0].applied_offset == end_offset:
            self._pending = None

    def before_log_start(self, snapshot_id: OffsetAndEpoch, path: Path) -> None:
        """The log is about to start at this snapshot's end. A state machine behind it loads
        the snapshot (the state at that offset) rather than replaying the log up to it: that
        costs the size of the state, not of the log, and runs on the event loop, where a long
        replay would stall fetches past the fetch timeout and cost an election."""
        machine = self._applier.machine
        if machine.applied_offset >= snapshot_id.offset or self._applier.failed is not None:
            return
        summary = self._load(path)
        if summary is None:
            return
        self._counted = max(self._counted, snapshot_id.offset)
        log.info(
            "state machine loaded from snapshot %s (%d records) before the log start moved past"
            " its applied offset",
            path.name,
            summary.records,
        )

    def snapshot_installed(self, path: Path) -> None:
        """A snapshot fetched from the leader is in place: the state machine becomes it."""
        summary = self._load(path, load_validated_snapshot)  # ValidateSnapshot checked it
        self._pending = None
        if summary is None:
            return
        self.latest = summary.snapshot_id
        self._counted = summary.snapshot_id.offset
        self.bytes_since = 0
        log.info(
            "state machine loaded from the fetched snapshot %s (%d records)",
            path.name,
            summary.records,
        )
        self._retain()

    def _load(
        self, path: Path, loader: SnapshotLoader = load_state_snapshot
    ) -> SnapshotSummary | None:
        """Load `path` into the state machine with `loader` (one that checks the whole file
        first unless it was validated already); one it cannot load (a Kafka snapshot of
        metadata records into the key-value store) stops the machine, as a batch it cannot
        apply does (Applier.failed), and the node goes on replicating."""
        try:
            return loader(path, self._applier.machine)
        except (CorruptSnapshotError, StateMachineError) as e:
            self._applier.failed = f"cannot load snapshot {path.name}: {e}"
            log.error("state machine stopped: %s", self._applier.failed)
            return None

    async def _write(
        self,
        sid: OffsetAndEpoch,
        copy: StateMachine,
        now: int,
        stamp: int,
        reason: str,
        *,
        voters: VotersRecord | None = None,
    ) -> None:
        try:
            path = await asyncio.get_running_loop().run_in_executor(
                None,
                lambda: write_state_snapshot(
                    copy,
                    self.directory,
                    timestamp_ms=now,
                    last_contained_log_timestamp=stamp,
                    kraft_version=0 if voters is None else KRAFT_VERSION_DYNAMIC,
                    voters=voters,
                ),
            )
            self.latest = sid
            self.written.append(path)
            log.info("snapshot %s written (%s)", path.name, reason)
            self._submit(SnapshotWritten(self._clock(), sid))
            self._retain()
        except (OSError, SnapshotError, ValueError) as e:
            self.last_error = str(e)
            log.error("snapshot %d-%d failed: %s", sid.offset, sid.epoch, e)
        finally:
            if self._task is asyncio.current_task():
                self._task = None

    def _retain(self) -> None:
        """Run the retention policy (after the event that makes the core hold the snapshot)."""
        if self.retention is not None:
            try:
                self.retention.check()
            except OSError as e:
                log.warning("retention check failed: %s", e)

    async def close(self) -> None:
        """Wait for a snapshot being written (its thread cannot be interrupted)."""
        task = self._task
        if task is not None:
            with contextlib.suppress(Exception):
                await task
