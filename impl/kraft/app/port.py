"""The application port: what a state machine on top of the replicated log implements, and
what the node (and later the simulator) drives it with. Modelled on Apache Kafka's
`RaftClient.Listener` (handleCommit, handleLoadSnapshot, handleLeaderChange), in our words.

- `handle_commit`: committed batches, in offset order, each whole (base offset, last offset,
  the leader epoch that wrote it, its records as (key, value)). Control batches are delivered
  too, marked `control` and with no records, so that a state machine's applied offset moves
  over them; it does not apply them.
- `handle_leader_change`: the leader and epoch, when either changes.
- Snapshots (KIP-630; the checkpoint files are the next issue): `produce_snapshot` writes the
  whole state as records to a `SnapshotWriter`; `load_snapshot` replaces the state with what
  a `SnapshotReader` yields and sets the applied offset to the snapshot's end offset. A
  snapshot taken at applied offset N holds the effect of every record below N.

- `CapturingStateMachine.capture`: a copy of the state as it is now, that the node snapshots on
  a worker thread while the machine itself moves on (kraft.server.snapshots).
- `ReadableStateMachine.get`: a read by key (KraftGet); what a node runs (kraft.app.machines).

`MemorySnapshot` is a snapshot held in memory (writer and reader), for tests and until the
checkpoint files exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kraft.ids import NO_PRODUCER, Epoch, NodeId, Offset, ProducerId
from kraft.records import KeyValue

__all__ = [
    "CapturingStateMachine",
    "CommittedBatch",
    "LeaderAndEpoch",
    "MemorySnapshot",
    "ReadableStateMachine",
    "SnapshotReader",
    "SnapshotWriter",
    "StateMachine",
    "StateMachineError",
]


class StateMachineError(Exception):
    """A state machine was driven out of order (a gap in offsets, a snapshot it cannot read)."""


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """One committed record batch as the log holds it."""

    base_offset: Offset
    last_offset: Offset
    epoch: Epoch
    records: tuple[KeyValue, ...]
    control: bool = False
    append_timestamp_ms: int = -1
    # An idempotent append's producer id and first sequence (kraft.core.producers).
    producer: ProducerId = NO_PRODUCER
    base_sequence: int = -1

    @property
    def next_offset(self) -> Offset:
        return Offset(self.last_offset + 1)


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    """The leader of `epoch`, None while it is not known."""

    leader_id: NodeId | None
    epoch: Epoch


class SnapshotWriter(Protocol):
    def append(self, records: Sequence[KeyValue]) -> None:
        """Add records to the snapshot (in order; one call may become one batch)."""
        ...


class SnapshotReader(Protocol):
    @property
    def end_offset(self) -> Offset:
        """The snapshot holds the effect of every committed record below this offset."""
        ...

    @property
    def last_epoch(self) -> Epoch:
        """The epoch of the record just below end_offset."""
        ...

    def batches(self) -> Iterator[tuple[KeyValue, ...]]:
        """The records, batch by batch, in the order they were written."""
        ...


class StateMachine(Protocol):
    @property
    def applied_offset(self) -> Offset:
        """Every committed record below this offset is applied; the next batch starts here."""
        ...

    @property
    def applied_epoch(self) -> Epoch:
        """The epoch of the last record applied (with applied_offset: a snapshot's id)."""
        ...

    def handle_commit(self, batches: Iterable[CommittedBatch]) -> None: ...

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None: ...

    def produce_snapshot(self, writer: SnapshotWriter) -> None: ...

    def load_snapshot(self, reader: SnapshotReader) -> None: ...


class CapturingStateMachine(StateMachine, Protocol):
    @property
    def last_append_timestamp_ms(self) -> int:
        """The append time of the last batch applied (-1 when not known): a snapshot's
        LastContainedLogTimestamp."""
        ...

    def capture(self) -> StateMachine:
        """A copy of the state now (same applied offset and epoch), owned by the caller: it may
        be snapshotted on another thread while this machine goes on applying."""
        ...


class ReadableStateMachine(CapturingStateMachine, Protocol):
    """What a node runs (kraft.app.machines): a capturing state machine that also answers a
    read by key (KraftGet)."""

    def get(self, key: bytes) -> bytes | None:
        """The committed value this machine holds for `key`, None if it holds none."""
        ...


@dataclass(slots=True)
class MemorySnapshot:
    """A snapshot in memory: written by produce_snapshot, read back by load_snapshot."""

    end_offset: Offset
    last_epoch: Epoch
    written: list[tuple[KeyValue, ...]] = field(default_factory=list)

    def append(self, records: Sequence[KeyValue]) -> None:
        if records:
            self.written.append(tuple(records))

    def batches(self) -> Iterator[tuple[KeyValue, ...]]:
        return iter(self.written)
