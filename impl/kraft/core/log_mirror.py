"""The replica's own picture of its log's metadata: start, end and the epoch cache.

Updated together with the AppendToLog/TruncateLog effects the replica emits, so a step sees
its own appends. Holds no record bytes.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from kraft.core.producers import ProducerBatch
from kraft.ids import Epoch, Offset, OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class LogState:
    """What the driver tells the replica about its log at start."""

    start_offset: Offset
    end_offset: Offset
    # (epoch, start offset) pairs in increasing order, like leader-epoch-checkpoint.
    epochs: tuple[tuple[Epoch, Offset], ...] = ()
    # The idempotent batches of the log, in log order (rebuilds the producer table).
    producer_batches: tuple[ProducerBatch, ...] = ()


class LogMirror:
    __slots__ = ("_end", "_epochs", "_start", "_starts", "version")

    def __init__(self, state: LogState) -> None:
        if not 0 <= state.start_offset <= state.end_offset:
            raise ValueError(f"bad log offsets {state.start_offset}..{state.end_offset}")
        self._start = state.start_offset
        self._end = state.end_offset
        self._epochs: list[Epoch] = []
        self._starts: list[Offset] = []
        # Bumped by append and truncate, so that a reader can tell cheaply that nothing changed.
        self.version = 0
        for epoch, start in state.epochs:
            if start < state.end_offset:
                self._assign(epoch, start)

    @property
    def start_offset(self) -> Offset:
        return self._start

    @property
    def end_offset(self) -> Offset:
        return self._end

    @property
    def last_epoch(self) -> Epoch:
        """The epoch of the last record; 0 for a log that never had one (as Kafka)."""
        return self._epochs[-1] if self._epochs else Epoch(0)

    @property
    def end(self) -> OffsetAndEpoch:
        return OffsetAndEpoch(self.last_epoch, self._end)

    def epoch_entries(self) -> tuple[tuple[Epoch, Offset], ...]:
        return tuple(zip(self._epochs, self._starts, strict=True))

    def epoch_at(self, offset: Offset) -> Epoch | None:
        """The epoch of the record at `offset`; None if the log does not hold that offset."""
        if not self._start <= offset < self._end:
            return None
        i = bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def start_offset_of(self, epoch: Epoch) -> Offset | None:
        for e, s in zip(self._epochs, self._starts, strict=True):
            if e == epoch:
                return s
        return None

    def _assign(self, epoch: Epoch, start: Offset) -> None:
        if self._epochs and epoch <= self._epochs[-1]:
            if epoch < self._epochs[-1]:
                raise ValueError(f"epoch {epoch} after {self._epochs[-1]}")
            return
        self._epochs.append(epoch)
        self._starts.append(start)

    def append(self, batches: list[tuple[Epoch, Offset]], next_offset: Offset) -> None:
        """Record appended batches given as (epoch, base offset), ending before next_offset."""
        for epoch, base in batches:
            self._assign(epoch, base)
        self._end = next_offset
        self.version += 1

    def truncate(self, offset: Offset) -> None:
        """Forget everything at or after `offset`."""
        if offset >= self._end:
            return
        while self._starts and self._starts[-1] >= offset:
            self._starts.pop()
            self._epochs.pop()
        self._end = max(offset, self._start)
        self.version += 1

    def end_offset_for_epoch(self, epoch: Epoch) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` in this log and the offset where it ends (Kafka's
        endOffsetForEpoch). With no such epoch, the log has nothing from `epoch` or earlier
        in common with anyone: answer (epoch, start offset)."""
        if self._epochs and epoch >= self._epochs[-1]:
            return OffsetAndEpoch(self._epochs[-1], self._end)
        i = bisect_right(self._epochs, epoch)
        if i == 0:
            return OffsetAndEpoch(epoch, self._start)
        return OffsetAndEpoch(self._epochs[i - 1], self._starts[i])
