"""Small helpers for the core's tests over the one in-memory log,
`kraft.storage.memory_log.MemoryLog` (the simulator's log): replica keys, a log built from
(epoch, n) batches, performing a replica's log effects as the node does, and reading a log's
batches, values and (offset, epoch) entries back."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from kraft.core.effects import AppendToLog
from kraft.ids import DirectoryId, NodeId, ReplicaKey
from kraft.records import BatchHeader, encode_batch, iter_batches, iter_values
from kraft.storage.memory_log import MemoryLog
from kraft.storage.memory_snapshots import perform_snapshot_effect


def key(i: int) -> ReplicaKey:
    return ReplicaKey(NodeId(i), DirectoryId(uuid.UUID(int=i + 1)))


def build_log(epochs: Sequence[tuple[int, int]]) -> MemoryLog:
    """A flushed log with, per (epoch, n), one batch of n records written in that epoch."""
    log = MemoryLog()
    for epoch, n in epochs:
        first = log.end_offset
        values = [f"e{epoch}o{first + i}".encode() for i in range(n)]
        log.append_as_follower(encode_batch(first, epoch, values, timestamp_ms=0))
    log.flush()
    return log


def perform_append(log: MemoryLog, e: AppendToLog) -> None:
    """An AppendToLog effect, performed as the node performs it."""
    if e.leader_encoded:
        log.append_leader_encoded(e.data, e.first_offset, e.last_offset, e.epoch)
    else:
        log.append_as_follower(e.data)
    assert log.end_offset == e.last_offset + 1


def raw_batches(log: MemoryLog) -> list[tuple[BatchHeader, bytes]]:
    """Every batch of the log, in order: its header and its bytes."""
    out: list[tuple[BatchHeader, bytes]] = []
    offset = log.start_offset
    while offset < log.end_offset:
        result = log.read(offset, 1 << 30)
        data = bytes(result.data)
        out.extend((h, data[pos : pos + h.size_in_bytes]) for pos, h in iter_batches(data))
        offset = result.next_offset
    return out


def batches(log: MemoryLog) -> list[tuple[int, int, int]]:
    """(base offset, next offset, epoch) per batch."""
    return [(h.base_offset, h.next_offset, h.partition_leader_epoch) for h, _ in raw_batches(log)]


def values(log: MemoryLog) -> list[bytes]:
    """The values of the data (non-control) records, in order."""
    out: list[bytes] = []
    for h, raw in raw_batches(log):
        if not h.is_control:
            out.extend(v for _, v in iter_values(raw, 0, h) if v is not None)
    return out


def entries(log: MemoryLog) -> list[tuple[int, int]]:
    """(offset, epoch) of every record."""
    return [(o, e) for base, nxt, e in batches(log) for o in range(base, nxt)]


__all__ = [
    "batches",
    "build_log",
    "entries",
    "key",
    "perform_append",
    "perform_snapshot_effect",
    "raw_batches",
    "values",
]
