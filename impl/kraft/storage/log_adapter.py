"""How a driver hands its log to the pure core: the log's state at start and a reader of
whole batches. The node and the simulator both use this."""

from __future__ import annotations

from kraft.core.log_metadata import LogState
from kraft.core.producers import ProducerBatch, producer_batch_of
from kraft.ids import Offset, OffsetAndEpoch
from kraft.records import iter_batches
from kraft.storage.replicated_log import ReplicatedLog

_SCAN_BYTES = 8 << 20


class BatchReader:
    """The core's LogReader over any ReplicatedLog: whole batches from `offset`, as a
    zero-copy view (of an mmap for the on-disk log: valid until the next truncation).

    With `verify` (the real node), every batch is checked before it is handed out, and a
    damaged one raises CorruptLogError (file and position) instead of being served: the node
    must not lead on a log it cannot serve. The simulator's logs are never damaged."""

    __slots__ = ("_log", "_verify")

    def __init__(self, log: ReplicatedLog, *, verify: bool = False) -> None:
        self._log = log
        self._verify = verify

    def read(self, offset: Offset, max_bytes: int) -> memoryview:
        return self._log.read(offset, max_bytes, verify=self._verify).data


def log_state_of(log: ReplicatedLog, snapshots: tuple[OffsetAndEpoch, ...] = ()) -> LogState:
    """The log's state for the core, with the ids of the valid snapshots held (KIP-630)."""
    return LogState(
        log.start_offset,
        log.end_offset,
        log.epoch_entries(),
        producer_batches_of(log),
        snapshots=snapshots,
    )


def producer_batches_of(log: ReplicatedLog) -> tuple[ProducerBatch, ...]:
    """The idempotent batches of the log in order, from a scan of the batch headers only."""
    found: list[ProducerBatch] = []
    offset = log.start_offset
    while offset < log.end_offset:
        result = log.read(offset, _SCAN_BYTES)
        for _, h in iter_batches(result.data, verify=False):
            if h.producer_id >= 0:
                found.append(producer_batch_of(h))
        if result.next_offset <= offset:
            break
        offset = result.next_offset
    return tuple(found)
