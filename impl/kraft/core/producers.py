"""Idempotent client appends: what each producer last appended, to tell a retry from new data.

A client that lost its connection after sending an append cannot know whether the leader got
it; it resends the same values. Like Kafka's idempotent producer, each append carries the
producer's id and the sequence number of its first record (per record, as in the batch
header's BaseSequence), and the leader keeps, per producer, its last few batches. A resend of
one of them is answered with the offsets it already has instead of being appended twice.

The table lives in the log itself: an idempotent batch carries ProducerId and BaseSequence in
its header, so any replica rebuilds the same table by reading the log in order, and the table
follows the log through truncation. It is bounded: at most `max_producers` producers (the one
whose newest batch is oldest is forgotten first, a deterministic stand-in for Kafka's
producer.id.expiration.ms) and `KEEP` batches each (Kafka's max.in.flight limit).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from enum import Enum

from kraft.ids import Epoch, Offset, ProducerId
from kraft.records import BatchHeader

KEEP = 5
# The batch header's BaseSequence is an int32; a sequence never wraps here (it is refused).
MAX_SEQUENCE = 2**31 - 1
DEFAULT_MAX_PRODUCERS = 10_000


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """One idempotent append as the log holds it."""

    producer: ProducerId
    base_sequence: int
    first_offset: Offset
    last_offset: Offset
    epoch: Epoch

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + (self.last_offset - self.first_offset)


def producer_batch_of(h: BatchHeader) -> ProducerBatch:
    """The idempotent append a batch header describes (producer id >= 0)."""
    return ProducerBatch(
        ProducerId(h.producer_id),
        h.base_sequence,
        Offset(h.base_offset),
        Offset(h.next_offset - 1),
        Epoch(h.partition_leader_epoch),
    )


class Verdict(Enum):
    NEW = "new"  # the next sequence (or a producer not known): append it
    DUPLICATE = "duplicate"  # a retained batch: answer with its offsets
    OUT_OF_ORDER = "out-of-order"  # a gap after the last sequence: refuse
    TOO_OLD = "too-old"  # before the retained batches: refuse, its outcome is unknown


@dataclass(frozen=True, slots=True)
class Check:
    verdict: Verdict
    batch: ProducerBatch | None = None


class ProducerTable:
    __slots__ = ("_batches", "max_producers")

    def __init__(self, max_producers: int = DEFAULT_MAX_PRODUCERS) -> None:
        self.max_producers = max_producers
        # Producer -> its retained batches, oldest first; producers in the order of their
        # newest batch in the log (least recently appended first).
        self._batches: OrderedDict[ProducerId, list[ProducerBatch]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._batches)

    def check(self, producer: ProducerId, base_sequence: int, count: int) -> Check:
        kept = self._batches.get(producer)
        if not kept:
            return Check(Verdict.NEW)
        for b in kept:
            if b.base_sequence == base_sequence and b.last_sequence == base_sequence + count - 1:
                return Check(Verdict.DUPLICATE, b)
        last = kept[-1].last_sequence
        if base_sequence == last + 1:
            return Check(Verdict.NEW)
        if base_sequence > last + 1:
            return Check(Verdict.OUT_OF_ORDER)
        return Check(Verdict.TOO_OLD)

    def record(self, batch: ProducerBatch) -> None:
        kept = self._batches.pop(batch.producer, None) or []
        kept.append(batch)
        if len(kept) > KEEP:
            del kept[0]
        self._batches[batch.producer] = kept
        while len(self._batches) > self.max_producers:
            self._batches.popitem(last=False)

    def clear(self) -> None:
        """Forget every batch (a snapshot replaced the whole log)."""
        self._batches.clear()

    def truncate(self, offset: Offset) -> None:
        """Forget batches at or after `offset` (the log was truncated there)."""
        for producer in [p for p, kept in self._batches.items() if kept[-1].last_offset >= offset]:
            kept = [b for b in self._batches[producer] if b.last_offset < offset]
            if kept:
                self._batches[producer] = kept
            else:
                del self._batches[producer]

    def batches(self) -> tuple[ProducerBatch, ...]:
        """Every retained batch (for checkers and tests)."""
        return tuple(b for kept in self._batches.values() for b in kept)
