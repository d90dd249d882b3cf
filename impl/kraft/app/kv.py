"""The embedded default state machine: a replicated key-value store.

Records are keyed, as Kafka records are: a record with a key and a value sets the key; a
record with a key and a null value deletes it; a record with a null key is a plain value
(counted, not stored). Only committed batches are applied, in offset order; control batches
(LeaderChange, Voters, ...) are skipped but move the applied offset. The store also keeps the
committed idempotent-producer table (kraft.core.producers), rebuilt from the batch headers it
applies, so that a snapshot of the store carries it.

A snapshot (kraft.app.port) is the store as records: one (key, value) per key, in key
order, then the producer table as records with a null key whose value is a fixed encoding of
one retained idempotent batch (`_PRODUCER_ENTRY`, version byte first).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

from kraft.app.port import (
    CommittedBatch,
    LeaderAndEpoch,
    SnapshotReader,
    SnapshotWriter,
    StateMachineError,
)
from kraft.core.producers import DEFAULT_MAX_PRODUCERS, ProducerBatch, ProducerTable
from kraft.ids import NO_PRODUCER, Epoch, Offset, ProducerId
from kraft.records import KeyValue

__all__ = ["KeyValueStore"]

# version i8 = 0 | producer id i64 | base sequence i32 | first offset i64 | last offset i64 |
# epoch i32
_PRODUCER_ENTRY: Final = struct.Struct(">bqiqqi")
_PRODUCER_ENTRY_VERSION: Final = 0
# Records per snapshot batch.
_SNAPSHOT_BATCH: Final = 1000
_START: Final = Offset(0)


class KeyValueStore:
    """The committed key-value state of one replica (implements kraft.app.port.StateMachine)."""

    __slots__ = (
        "_applied",
        "_data",
        "_epoch",
        "_plain",
        "last_append_timestamp_ms",
        "leader",
        "producers",
    )

    def __init__(
        self,
        start_offset: Offset = _START,
        *,
        max_producers: int = DEFAULT_MAX_PRODUCERS,
    ) -> None:
        self._data: dict[bytes, bytes] = {}
        self._applied = start_offset
        self._epoch = Epoch(0)
        self._plain = 0
        self.producers = ProducerTable(max_producers)
        self.leader: LeaderAndEpoch | None = None
        self.last_append_timestamp_ms = -1

    # ------------------------------------------------------------------ reads

    @property
    def applied_offset(self) -> Offset:
        return self._applied

    @property
    def applied_epoch(self) -> Epoch:
        return self._epoch

    @property
    def plain_values(self) -> int:
        """How many keyless records were applied (they set no key)."""
        return self._plain

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def items(self) -> list[tuple[bytes, bytes]]:
        """Every key and its value, in key order."""
        return sorted(self._data.items())

    # ------------------------------------------------------------------ the port

    def handle_commit(self, batches: Iterable[CommittedBatch]) -> None:
        for batch in batches:
            if batch.last_offset < self._applied:
                continue  # already applied (a redelivery)
            if batch.base_offset != self._applied:
                raise StateMachineError(
                    f"batch {batch.base_offset}..{batch.last_offset} does not follow the "
                    f"applied offset {self._applied}"
                )
            if not batch.control:
                self._apply(batch)
            self._applied = batch.next_offset
            self._epoch = batch.epoch
            self.last_append_timestamp_ms = batch.append_timestamp_ms

    def _apply(self, batch: CommittedBatch) -> None:
        data = self._data
        # A key ends as its last record leaves it, so the batch is applied as the dict of
        # each key's last value, built and merged in C; records without a key, and keys whose
        # last record deletes them, are then handled one by one.
        last: dict[bytes | None, bytes | None] = dict(batch.records)
        if None in last:
            self._plain += sum([1 for key, _ in batch.records if key is None])
            del last[None]
        if None in last.values():
            for key, value in last.items():
                if value is None:
                    data.pop(key, None)  # type: ignore[arg-type]
                else:
                    data[key] = value  # type: ignore[index]
        else:
            data.update(last)  # type: ignore[arg-type]
        if batch.producer != NO_PRODUCER:
            self.producers.record(
                ProducerBatch(
                    batch.producer,
                    batch.base_sequence,
                    batch.base_offset,
                    batch.last_offset,
                    batch.epoch,
                )
            )

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leader = leader

    def capture(self) -> KeyValueStore:
        """A copy of the store now (kraft.app.port.CapturingStateMachine): the key table is
        copied whole (one C-level dict copy), the producer table entry by entry."""
        copy = KeyValueStore(self._applied, max_producers=self.producers.max_producers)
        copy._data = self._data.copy()
        copy._epoch = self._epoch
        copy._plain = self._plain
        copy.leader = self.leader
        copy.last_append_timestamp_ms = self.last_append_timestamp_ms
        for b in self.producers.batches():
            copy.producers.record(b)
        return copy

    def produce_snapshot(self, writer: SnapshotWriter) -> None:
        """Streamed: the records go to `writer` a batch at a time, built as they are written
        (the only whole-state structure made is the sorted list of keys, a pointer a key)."""
        data = self._data
        keys = sorted(data)
        for i in range(0, len(keys), _SNAPSHOT_BATCH):
            writer.append([(k, data[k]) for k in keys[i : i + _SNAPSHOT_BATCH]])
        del keys
        entries: list[KeyValue] = []
        for b in self.producers.batches():
            entry = _PRODUCER_ENTRY.pack(
                _PRODUCER_ENTRY_VERSION,
                b.producer,
                b.base_sequence,
                b.first_offset,
                b.last_offset,
                b.epoch,
            )
            entries.append((None, entry))
            if len(entries) == _SNAPSHOT_BATCH:
                writer.append(entries)
                entries = []
        if entries:
            writer.append(entries)

    def load_snapshot(self, reader: SnapshotReader) -> None:
        """Replace the state with the snapshot's: what was applied before is forgotten."""
        data: dict[bytes, bytes] = {}
        producers = ProducerTable(self.producers.max_producers)
        for batch in reader.batches():
            # A batch of distinct keys with values (what produce_snapshot writes) is merged
            # whole, in C; any other (producer entries, a repeated key, a null) record by record.
            merged: dict[bytes | None, bytes | None] = dict(batch)
            if len(merged) == len(batch) and None not in merged and None not in merged.values():
                data.update(merged)  # type: ignore[arg-type]
                continue
            for key, value in batch:
                if key is not None:
                    if value is None:
                        raise StateMachineError(f"snapshot holds key {key!r} with a null value")
                    data[key] = value
                else:
                    producers.record(_producer_entry(value))
        self._data = data
        self.producers = producers
        self._applied = reader.end_offset
        self._epoch = reader.last_epoch


def _producer_entry(value: bytes | None) -> ProducerBatch:
    if value is None or len(value) != _PRODUCER_ENTRY.size:
        raise StateMachineError(
            f"snapshot producer entry of {0 if value is None else len(value)} bytes, "
            f"expected {_PRODUCER_ENTRY.size}"
        )
    version, producer, sequence, first, last, epoch = _PRODUCER_ENTRY.unpack(value)
    if version != _PRODUCER_ENTRY_VERSION:
        raise StateMachineError(f"snapshot producer entry version {version} is not known")
    return ProducerBatch(ProducerId(producer), sequence, Offset(first), Offset(last), Epoch(epoch))
