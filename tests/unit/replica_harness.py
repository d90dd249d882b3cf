"""A tiny deterministic harness for unit tests of one Replica: a fake log (batches built
with kraft.records, read back whole), a seeded rng, and helpers to pick effects."""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from typing import TypeVar

from kraft.core.effects import (
    AppendToLog,
    Effect,
    ElectionState,
    FlushLog,
    PersistElectionState,
    Send,
    TruncateLog,
)
from kraft.core.events import Event, Receive, Tick
from kraft.core.messages import Message, Request
from kraft.core.replica import LogState, Replica, ReplicaConfig
from kraft.ids import ClusterId, DirectoryId, Epoch, NodeId, Offset, ReplicaKey
from kraft.records import encode_batch, iter_batches, iter_values

CLUSTER = ClusterId("unit-cluster")
T = TypeVar("T")


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
        return LogState(Offset(0), Offset(self.end_offset), tuple(epochs))

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


class Harness:
    """One replica under test plus its fake log; `step` applies log effects to the log."""

    def __init__(
        self,
        node: int = 1,
        voters: Sequence[int] = (1, 2, 3),
        *,
        election: ElectionState | None = None,
        log: MemLog | None = None,
        seed: int = 0,
        now: int = 0,
        **cfg: int,
    ) -> None:
        self.now = now
        self.log = log or MemLog()
        self.config = ReplicaConfig(
            key(node),
            CLUSTER,
            tuple(key(v) for v in voters),
            **cfg,  # type: ignore[arg-type]
        )
        self.replica = Replica(
            self.config,
            election_state=election,
            log_state=self.log.log_state(),
            reader=self.log,
            rng=random.Random(seed),
            now_ms=now,
        )
        self.stored = election
        self.start_effects = self.apply(self.replica.start())

    def apply(self, effects: list[Effect]) -> list[Effect]:
        for e in effects:
            if isinstance(e, AppendToLog):
                self.log.append(e.first_offset, e.data)
            elif isinstance(e, TruncateLog):
                self.log.truncate(e.offset)
            elif isinstance(e, PersistElectionState):
                self.stored = e.state
        return effects

    def step(self, event: Event) -> list[Effect]:
        return self.apply(self.replica.step(event))

    def recv(self, src: int, msg: Message, in_reply_to: Request | None = None) -> list[Effect]:
        return self.step(Receive(self.now, NodeId(src), msg, in_reply_to))

    def tick(self, to: int | None = None) -> list[Effect]:
        self.now = self.replica.next_deadline_ms() if to is None else to
        return self.step(Tick(self.now))

    @property
    def view(self):  # type: ignore[no-untyped-def]
        return self.replica.view()


def of(effects: Sequence[Effect], cls: type[T]) -> list[T]:
    return [e for e in effects if isinstance(e, cls)]


def sent(effects: Sequence[Effect], cls: type[T]) -> list[tuple[int, T]]:
    return [(int(e.dst), e.message) for e in of(effects, Send) if isinstance(e.message, cls)]


def index(effects: Sequence[Effect], pred: object) -> int:
    assert callable(pred)
    for i, e in enumerate(effects):
        if pred(e):
            return i
    raise AssertionError("no such effect")


__all__ = [
    "CLUSTER",
    "Epoch",
    "FlushLog",
    "Harness",
    "MemLog",
    "Offset",
    "build_log",
    "index",
    "iter_batches",
    "iter_values",
    "key",
    "of",
    "sent",
]
