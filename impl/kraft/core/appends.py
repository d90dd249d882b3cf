"""The leader's client appends (ClientAppend), and Kafka's BatchAccumulator.

Plain appends wait in the leader's `Lingering` accumulator for `append_linger_ms`
(quorum.append.linger.ms) from the first one, and are written as one batch in the leader's
epoch when the linger runs out (the leader's tick, kraft.core.leader). A batch holds at most
`MAX_BATCH_BYTES` with its header (Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES), as Kafka
4.3.1's BatchAccumulator keeps it: an append that does not fit beside what waits completes
what waits as one batch and starts the next, and both are written at once (Kafka drains a
completed batch, with the one after it, at its next poll, without waiting for the linger); an
append too large for a batch of its own is refused with RECORD_LIST_TOO_LARGE (Kafka's
RecordBatchTooLargeException) and what waits keeps waiting. The replica keeps stepping other
events meanwhile: a linger delays only the appends. An idempotent client's append
(kraft.core.producers) is its own batch carrying its producer id and sequence, written after
whatever waits so that appends keep their arrival order. With no linger every append is
written in the step that receives it (the driver's group commit still shares one fsync among
the appends of one loop iteration, kraft.server.driver).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.core.effects import ActionTaken, AppendResult
from kraft.core.events import ClientAppend
from kraft.core.producers import MAX_SEQUENCE, ProducerBatch, Verdict
from kraft.core.vocabulary import Action
from kraft.errors import ErrorCode
from kraft.ids import NO_PRODUCER, Offset
from kraft.records import BATCH_HEADER_SIZE, KeyValue, encode_records

if TYPE_CHECKING:
    from kraft.core.replica import Replica

# Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the most one batch takes, its header included.
MAX_BATCH_BYTES = 8 * 1024 * 1024
# Per record, besides its key and value: a bound on the record's own framing (length, attributes,
# timestamp and offset deltas, key and value lengths, header count; all varints), Kafka's
# DefaultRecord.MAX_RECORD_OVERHEAD. Measured with it a batch may end a little before Kafka's
# (which counts exact sizes), never after.
RECORD_OVERHEAD_BYTES = 21
# The most records_bytes one batch holds beside its header.
MAX_RECORDS_BYTES = MAX_BATCH_BYTES - BATCH_HEADER_SIZE


def records_bytes(records: tuple[KeyValue, ...]) -> int:
    """An upper bound on the bytes these records take in a batch (without its header)."""
    return sum(RECORD_OVERHEAD_BYTES + len(k or b"") + len(v or b"") for k, v in records)


class Lingering:
    """The appends waiting to be written together: (request id, records) in arrival order,
    when the linger runs out (None: nothing waits) and their size (records_bytes)."""

    __slots__ = ("entries", "size", "until")

    def __init__(self) -> None:
        self.entries: list[tuple[int, tuple[KeyValue, ...]]] = []
        self.until: int | None = None
        self.size = 0


class ClientAppends:
    """ClientAppend on the replica's state: refused unless leading, accumulated, written."""

    __slots__ = ("_r",)

    def __init__(self, replica: Replica) -> None:
        self._r = replica

    def refuse(self, request_id: int) -> None:
        r = self._r
        r._out.append(
            AppendResult(request_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_id=r._leader_id)
        )

    def on_client_append(self, ev: ClientAppend) -> None:
        r = self._r
        ld = r._leader
        if ld is None or r._shutting_down:  # not leading, or leaving
            self.refuse(ev.request_id)
            return
        if not ev.records or (
            ev.producer != NO_PRODUCER
            and not 0 <= ev.sequence <= MAX_SEQUENCE - len(ev.records) + 1
        ):
            r._out.append(AppendResult(ev.request_id, ErrorCode.INVALID_REQUEST))
            return
        size = records_bytes(ev.records)
        if size > MAX_RECORDS_BYTES:  # no batch could hold it
            r._out.append(AppendResult(ev.request_id, ErrorCode.RECORD_LIST_TOO_LARGE))
            return
        if ev.producer != NO_PRODUCER:
            self._idempotent_append(ev)
            return
        r._out.append(ActionTaken(Action.CLIENT_APPEND))
        waiting = ld.lingering
        full = waiting.size + size > MAX_RECORDS_BYTES
        if full:  # what waits is a batch complete without this append
            self.append_lingering()
            waiting = ld.lingering
        waiting.entries.append((ev.request_id, ev.records))
        waiting.size += size
        if full or r._timing.append_linger_ms <= 0:
            self.append_lingering()
        elif waiting.until is None:
            waiting.until = r._now + r._timing.append_linger_ms

    def _idempotent_append(self, ev: ClientAppend) -> None:
        """A resend of a batch the log holds is answered with that batch's offsets and epoch
        (acknowledged once it commits, like any append), a gap or a resend too old to tell is
        refused, and new values become their own batch after whatever lingers."""
        r = self._r
        check = r._producers.check(ev.producer, ev.sequence, len(ev.records))
        if check.verdict is Verdict.DUPLICATE:
            b = check.batch
            assert b is not None
            r.accept(ev.request_id, b.first_offset, b.last_offset, b.epoch)
            return
        if check.verdict is not Verdict.NEW:
            refused = (
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                if check.verdict is Verdict.OUT_OF_ORDER
                else ErrorCode.DUPLICATE_SEQUENCE_NUMBER
            )
            r._out.append(AppendResult(ev.request_id, refused))
            return
        r._out.append(ActionTaken(Action.CLIENT_APPEND))
        self.append_lingering()  # appends keep their arrival order
        first = r._log.end_offset
        last = Offset(first + len(ev.records) - 1)
        data = encode_records(
            first,
            r._epoch,
            ev.records,
            timestamp_ms=r._now,
            producer_id=ev.producer,
            base_sequence=ev.sequence,
        )
        r._lead._append(first, last, data)
        r._producers.record(ProducerBatch(ev.producer, ev.sequence, first, last, r._epoch))
        r.accept(ev.request_id, first, last, r._epoch)
        r._lead._maybe_advance_hwm()

    def append_lingering(self) -> None:
        """Write the waiting client values as one batch in our epoch, durable before the
        AppendResults that answer them."""
        r = self._r
        ld = r._leader
        assert ld is not None
        waiting = ld.lingering.entries
        ld.lingering = Lingering()
        if not waiting:
            return
        records = [rec for _, recs in waiting for rec in recs]
        first = r._log.end_offset
        data = encode_records(first, r._epoch, records, timestamp_ms=r._now)
        r._lead._append(first, Offset(first + len(records) - 1), data)
        at = first
        for request_id, vs in waiting:
            last = Offset(at + len(vs) - 1)
            r.accept(request_id, at, last, r._epoch)
            at = Offset(last + 1)
        r._lead._maybe_advance_hwm()
