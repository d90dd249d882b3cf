"""How a driver hands its log to the pure core: the log's state at start and a reader of
whole batches. The node and the simulator both use this."""

from __future__ import annotations

from kraft.core.log_mirror import LogState
from kraft.ids import Offset
from kraft.log import ReplicatedLog


class BatchReader:
    """The core's LogReader over any ReplicatedLog: whole batches from `offset`, as a
    zero-copy view (of an mmap for the on-disk log: valid until the next truncation)."""

    __slots__ = ("_log",)

    def __init__(self, log: ReplicatedLog) -> None:
        self._log = log

    def read(self, offset: Offset, max_bytes: int) -> memoryview:
        return self._log.read(offset, max_bytes).data


def log_state_of(log: ReplicatedLog) -> LogState:
    return LogState(log.start_offset, log.end_offset, log.epoch_entries())
