"""A fake replica log for tests of the pure core: encoded batches kept whole in memory, read
back by offset. Independent of kraft.log on purpose, so core tests do not rest on it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from kraft.core.log_metadata import LogState
from kraft.core.producers import producer_batch_of
from kraft.ids import DirectoryId, Epoch, NodeId, Offset, ReplicaKey
from kraft.records import encode_batch, iter_batches, iter_values


def key(i: int) -> ReplicaKey:
    return ReplicaKey(NodeId(i), DirectoryId(uuid.UUID(int=i + 1)))


class MemLog:
    """A log of encoded batches (one bytes object per batch, split with iter_batches)."""

    def __init__(self) -> None:
        self.batches_: list[tuple[int, int, int, bytes]] = []  # (base, next, epoch, bytes)
        self.flushed = 0

    @property
    def end_offset(self) -> int:
        return self.batches_[-1][1] if self.batches_ else 0

    def append(self, first: int, data: bytes | memoryview) -> None:
        assert first == self.end_offset, (first, self.end_offset)
        raw = bytes(data)
        for pos, h in iter_batches(raw):
            chunk = raw[pos : pos + h.size_in_bytes]
            self.batches_.append((h.base_offset, h.next_offset, h.partition_leader_epoch, chunk))

    def truncate(self, offset: int) -> None:
        self.batches_ = [b for b in self.batches_ if b[0] < offset]
        assert not self.batches_ or self.batches_[-1][1] <= offset, "truncation inside a batch"

    def read(self, offset: Offset, max_bytes: int) -> bytes:
        out = bytearray()
        for _base, nxt, _, raw in self.batches_:
            if nxt <= offset:
                continue
            if out and len(out) + len(raw) > max_bytes:
                break
            out += raw
        return bytes(out)

    def log_state(self) -> LogState:
        epochs: list[tuple[Epoch, Offset]] = []
        for base, _, epoch, _ in self.batches_:
            if not epochs or epochs[-1][0] != epoch:
                epochs.append((Epoch(epoch), Offset(base)))
        idempotent = tuple(
            producer_batch_of(h)
            for *_, data in self.batches_
            for _, h in iter_batches(data, verify=False)
            if h.producer_id >= 0
        )
        return LogState(Offset(0), Offset(self.end_offset), tuple(epochs), idempotent)

    def batches(self) -> list[tuple[int, int, int]]:
        """(base offset, next offset, epoch) per batch."""
        return [(b[0], b[1], b[2]) for b in self.batches_]

    def values(self) -> list[bytes]:
        """The values of the data (non-control) records, in order."""
        out: list[bytes] = []
        for _, _, _, raw in self.batches_:
            h = next(iter_batches(raw))[1]
            if not h.is_control:
                out.extend(v for _, v in iter_values(raw, 0, h) if v is not None)
        return out

    def entries(self) -> list[tuple[int, int]]:
        """(offset, epoch) of every record."""
        return [(o, b[2]) for b in self.batches_ for o in range(b[0], b[1])]


def build_log(epochs: Sequence[tuple[int, int]]) -> MemLog:
    """A log with, per (epoch, n), one batch of n records written in that epoch."""
    log = MemLog()
    for epoch, n in epochs:
        first = log.end_offset
        values = [f"e{epoch}o{first + i}".encode() for i in range(n)]
        log.append(first, encode_batch(first, epoch, values, timestamp_ms=0))
    return log
