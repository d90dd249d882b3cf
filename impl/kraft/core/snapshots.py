"""Snapshots (KIP-630) on the side of the replica that holds them: when a snapshot may be
taken, when the log start may move up to one, when a Fetch is answered with a snapshot id,
and serving FetchSnapshot chunks. The transfer on the fetching side is
kraft.core.snapshot_transfer.

`SnapshotRole` takes these steps over the replica's state (kraft.core.replica owns the state;
kraft.core.dispatch routes events and messages here):

- CreateSnapshot: the state machine asks (event CreateSnapshot) to snapshot what it applied;
  allowed only at a committed offset (never past the high watermark: the spec's
  `SnapshotBeyondHwm` mutant), on a batch boundary (Kafka's createNewSnapshot), and after
  the latest snapshot (kraft's own rule: README, deviations). The driver writes it (effect
  WriteSnapshot) and reports it durable (event SnapshotWritten); only then does the replica
  hold it.
- AdvanceLogStartOffset (KIP-630 "When to Increase the LogStartOffset"): a leader moves its log
  start to the largest snapshot every live replica has replicated, or to its latest snapshot
  once the log start is older than `start_offset_lag_time_max_ms`; a follower to its largest
  snapshot at or below the leader's log start. The driver deletes what lies below. Under
  `LogStartPolicy.RETENTION` (the node's) that rule only bounds the move: the log start goes
  no further than the snapshot the driver's retention policy last asked for (event
  DeleteBeforeSnapshot: Kafka's `metadata.max.retention.bytes` / `.ms`), so history is kept
  as Kafka keeps it and is never deleted while a live replica still needs it.
- HandleFetchRequest's snapshot answer (Kafka's validateOffsetAndEpoch and its empty-log rule)
  and HandleFetchSnapshotRequest: chunks by byte position, read through the injected
  `SnapshotSource`, with KIP-630's errors.

The core reads snapshot bytes only through `SnapshotSource`, as it reads the log through
`LogReader`: no file is touched here.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Protocol

from kraft.core.effects import (
    ActionTaken,
    AdvanceLogStartOffset,
    SnapshotRefused,
    WriteSnapshot,
)
from kraft.core.events import CreateSnapshot, DeleteBeforeSnapshot, SnapshotWritten
from kraft.core.messages import (
    FetchRequest,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Records,
    Request,
)
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.records import CorruptRecordError, iter_batches

if TYPE_CHECKING:
    from kraft.core.replica import Replica

F = ReplicaState.FOLLOWER

# The snapshot id of an error answer (Kafka's default -1s).
UNKNOWN_SNAPSHOT = OffsetAndEpoch(Epoch(-1), Offset(-1))
# Kafka's BOOTSTRAP_SNAPSHOT_ID: the bootstrap checkpoint is never replicated.
BOOTSTRAP_SNAPSHOT = OffsetAndEpoch(Epoch(0), Offset(0))


class SnapshotSource(Protocol):
    """The driver's snapshots, for the leader to serve (like LogReader for the log)."""

    def size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        """The size in bytes of the complete snapshot `snapshot_id`, None if there is none."""
        ...

    def read(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> Records:
        """At most `max_bytes` bytes of it from byte `position` (< its size)."""
        ...


class _NoSnapshots:
    """The SnapshotSource of a driver that keeps no snapshots."""

    def size(self, _snapshot_id: OffsetAndEpoch) -> int | None:
        return None

    def read(self, _snapshot_id: OffsetAndEpoch, _position: int, _max_bytes: int) -> Records:
        return b""


NO_SNAPSHOTS: SnapshotSource = _NoSnapshots()


class LogStartPolicy(Enum):
    """When, and how far, the log start moves up to a snapshot (AdvanceLogStartOffset)."""

    # KIP-630's rule alone: as far as it allows, as soon as it allows (the simulator's).
    KIP_630 = "kip-630"
    # Kafka's retention within KIP-630's rule: no further than the snapshot the driver's
    # retention policy last asked for (DeleteBeforeSnapshot), nor than KIP-630 allows (the
    # node's).
    RETENTION = "retention"


class SnapshotRole:
    """KIP-630's steps on the holding side, over the replica's state."""

    __slots__ = ("_asked", "_leader_start", "_r", "_retention", "_source", "_start_since")

    def __init__(self, replica: Replica, source: SnapshotSource) -> None:
        self._r = replica
        self._source = source
        # When the log start last moved (or the replica started): the lag-time rule's clock.
        self._start_since = replica._now
        self._retention = replica._cfg.log_start_policy is LogStartPolicy.RETENTION
        # RETENTION: the furthest the log start may move (DeleteBeforeSnapshot asked so), and
        # the leader's log start of the last Fetch answer (a follower's bound).
        self._asked = replica._log.start_offset
        self._leader_start: Offset | None = None

    # ------------------------------------------------------------------ CreateSnapshot

    def on_create_snapshot(self, ev: CreateSnapshot) -> None:
        r = self._r
        offset = ev.end_offset
        problem = self.refusal(offset)
        if problem is not None:
            r._out.append(SnapshotRefused(offset, problem))
            return
        epoch = r._log.epoch_at(Offset(offset - 1))
        assert epoch is not None
        r._out.append(WriteSnapshot(OffsetAndEpoch(epoch, offset)))

    def refusal(self, offset: Offset) -> str | None:
        """Why no snapshot may end at `offset` now, or None (Kafka's createNewSnapshot, which
        writes one below the latest snapshot: README, deviations)."""
        r = self._r
        log = r._log
        hwm = r._hwm if r._hwm is not None else Offset(0)
        latest = log.latest_snapshot
        if offset > hwm:
            return f"end offset {offset} is past the high watermark {hwm}"
        if latest is not None and offset <= latest.offset:
            return f"end offset {offset} is not after the latest snapshot {latest}"
        if offset <= log.start_offset:
            return f"end offset {offset} is not after the log start {log.start_offset}"
        # epoch_at is None at and past the log end: this also refuses an offset past it.
        if log.epoch_at(Offset(offset - 1)) is None:
            return f"the log does not hold the record before {offset}"
        if not self._batch_aligned(offset):
            return f"end offset {offset} is inside a batch"
        return None

    def _batch_aligned(self, offset: Offset) -> bool:
        """A fetch from a snapshot's end must start a batch (Kafka: "batch aligned")."""
        r = self._r
        if offset >= r._log.end_offset:
            return True
        try:
            _, header = next(iter_batches(r._reader.read(offset, 1), verify=False))
        except (CorruptRecordError, StopIteration):
            return False
        return header.base_offset == offset

    def on_snapshot_written(self, ev: SnapshotWritten) -> None:
        """CreateSnapshot done: the replica holds the snapshot (the spec's CreateSnapshot)."""
        r = self._r
        log = r._log
        snap = ev.snapshot_id
        if not log.start_offset < snap.offset <= log.end_offset or (
            log.epoch_at(Offset(snap.offset - 1)) != snap.epoch
        ):
            return  # not a snapshot of this log (any more): nothing to hold
        r._out.append(ActionTaken(Action.CREATE_SNAPSHOT))
        log.add_snapshot(snap)
        self.maybe_advance_log_start()

    # ------------------------------------------------------------------ AdvanceLogStartOffset

    def maybe_advance_log_start(self, leader_log_start: Offset | None = None) -> None:
        """Move the log start up to a snapshot if KIP-630's rule allows: a leader, to the
        largest snapshot every live replica has, or its latest once the log start is older
        than the lag time; a follower, to its largest snapshot at or below the leader's log
        start (`leader_log_start`, from a Fetch answer)."""
        r = self._r
        log = r._log
        if self._retention and leader_log_start is not None:
            self._leader_start = leader_log_start
        latest = log.latest_snapshot
        if latest is None or latest.offset <= log.start_offset:
            return
        if self._retention:
            if self._asked <= log.start_offset:
                return  # retention asks for nothing more
            leader_log_start = self._leader_start
        if r._leader is not None:
            target = self._leader_target(latest)
        elif r._state is F and leader_log_start is not None:
            target = self._largest_snapshot_at_most(leader_log_start)
        else:
            return
        if target is not None and self._retention and target.offset > self._asked:
            target = self._largest_snapshot_at_most(self._asked)
        if target is None or target.offset <= log.start_offset:
            return
        r._out.append(ActionTaken(Action.ADVANCE_LOG_START_OFFSET))
        r._out.append(AdvanceLogStartOffset(target))
        log.advance_start(target.offset)
        self._start_since = r._now

    def on_delete_before_snapshot(self, ev: DeleteBeforeSnapshot) -> None:
        """The retention policy asks for the log start at `ev.snapshot_id` (Kafka's
        deleteBeforeSnapshot). Under RETENTION it is remembered and the log start moves as far
        towards it as KIP-630's rule allows now (the rest when a later step allows); under
        KIP_630 the log start already moves as far as the rule allows: nothing to do."""
        if not self._retention:
            return
        self._asked = max(self._asked, ev.snapshot_id.offset)
        self.maybe_advance_log_start()

    def _leader_target(self, latest: OffsetAndEpoch) -> OffsetAndEpoch | None:
        r = self._r
        ld = r._leader
        assert ld is not None
        now = r._now
        if now - self._start_since >= r._timing.start_offset_lag_time_max_ms:
            return latest
        # Live: fetched from us within a fetch timeout. Each must have replicated the offset.
        live = [
            p.end_offset
            for p in (*ld.voters.values(), *ld.observers.values())
            if p.last_fetch_ms is not None
            and now - p.last_fetch_ms <= r._timing.fetch_timeout_ms
            and p.end_offset is not None
        ]
        reached = min(live, default=r._log.end_offset)
        return self._largest_snapshot_at_most(Offset(reached))

    def _largest_snapshot_at_most(self, offset: Offset) -> OffsetAndEpoch | None:
        found = None
        for snap in self._r._log.snapshots:
            if snap.offset <= offset:
                found = snap
        return found

    # ------------------------------------------------------------------ Fetch answered

    def snapshot_for_fetch(self, req: FetchRequest) -> OffsetAndEpoch | None:
        """The snapshot a Fetch must be answered with, or None (Kafka: an empty fetcher gets
        the latest non-bootstrap snapshot; else ReplicatedLog.validateOffsetAndEpoch: below
        the log start, at it in another epoch, or with an epoch older than every snapshot)."""
        log = self._r._log
        latest = log.latest_snapshot
        earliest = log.earliest_snapshot
        if latest is None or earliest is None:
            return None
        if req.fetch_offset == 0 and latest != BOOTSTRAP_SNAPSHOT:
            return latest
        start = log.start_offset
        if start == 0 and req.fetch_offset == 0:
            return None
        fo, fe = req.fetch_offset, req.last_fetched_epoch
        if fo < start or (fo == start and fe != earliest.epoch) or fe < earliest.epoch:
            return latest
        return None

    # ------------------------------------------------------------------ FetchSnapshot

    def fetch_snapshot_refusal(self) -> FetchSnapshotResponse:
        return self._answer(ErrorCode.INVALID_REQUEST)

    def _answer(self, error: ErrorCode) -> FetchSnapshotResponse:
        r = self._r
        return FetchSnapshotResponse(
            error, r._leader_or_none(), r._epoch, UNKNOWN_SNAPSHOT, size=0, position=0
        )

    def handle_fetch_snapshot_request(
        self, src: NodeId, msg: FetchSnapshotRequest, _in_reply_to: Request | None
    ) -> None:
        """HandleFetchSnapshotRequest, checks in Kafka's order: cluster id, the leader's epoch
        (Replica._leader_only_error), the snapshot (SNAPSHOT_NOT_FOUND; the bootstrap snapshot
        is never served), the position (POSITION_OUT_OF_RANGE), a negative max bytes
        (INVALID_REQUEST); then at most max bytes from the position."""
        r = self._r
        r._out.append(ActionTaken(Action.HANDLE_FETCH_SNAPSHOT_REQUEST))
        err = r._request_error(msg.cluster_id)
        if err is None:
            err = r._leader_only_error(msg.replica_epoch)
        if err is not None:
            r._send(src, self._answer(err))
            return
        # A voter fetching a snapshot from us in our epoch counts for check-quorum; a replica
        # with the voter's id and another directory id is an observer (KIP-853).
        if r._voters.contains(msg.replica):
            r._lead.heard_from_voter(src)
        snap = msg.snapshot_id
        size = None if snap == BOOTSTRAP_SNAPSHOT else self._source.size(snap)
        if size is None:
            r._send(src, self._answer(ErrorCode.SNAPSHOT_NOT_FOUND))
            return
        if not 0 <= msg.position < size:
            r._send(src, self._answer(ErrorCode.POSITION_OUT_OF_RANGE))
            return
        if msg.max_bytes < 0:
            # Kafka's slice throws out of its handler here (README, deviations).
            r._send(src, self._answer(ErrorCode.INVALID_REQUEST))
            return
        # max_bytes 0 gets an empty chunk, as Kafka's slice(position, 0).
        max_bytes = min(msg.max_bytes, r._timing.fetch_max_bytes)
        chunk = self._source.read(snap, msg.position, min(max_bytes, size - msg.position))
        r._send(
            src,
            FetchSnapshotResponse(
                ErrorCode.NONE,
                r._leader_or_none(),
                r._epoch,
                snap,
                size=size,
                position=msg.position,
                chunk=chunk,
            ),
        )
