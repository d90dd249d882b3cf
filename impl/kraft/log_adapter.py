"""How a driver hands its log to the pure core: the log's state at start and a reader of
whole batches. The node and the simulator both use this."""

from __future__ import annotations

from kraft.core.log_mirror import LogState
from kraft.ids import Offset
from kraft.log import ReplicatedLog


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


def log_state_of(log: ReplicatedLog) -> LogState:
    return LogState(log.start_offset, log.end_offset, log.epoch_entries())
