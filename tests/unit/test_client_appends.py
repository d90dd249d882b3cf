"""kraft.core.appends: the leader's accumulator, as Kafka's BatchAccumulator: appends wait for
the linger, but an append that does not fit beside them in a batch (MAX_BATCH_BYTES) has both
written at once, as two batches; the replica keeps serving other requests while appends
linger."""

from __future__ import annotations

from replica_harness import of, sent
from test_replica_leader import fetch, leader

from kraft.core.appends import MAX_BATCH_BYTES, RECORD_OVERHEAD_BYTES, records_bytes
from kraft.core.effects import AppendResult, AppendToLog
from kraft.core.events import ClientAppend, Tick
from kraft.core.messages import FetchResponse


def test_an_append_that_does_not_fit_completes_the_batch_without_waiting_for_the_linger() -> None:
    h = leader(append_linger_ms=60_000)
    t = h.now
    half = b"x" * (MAX_BATCH_BYTES // 2)
    first = h.step(ClientAppend(t, ((None, half),), request_id=1))
    assert not of(first, AppendToLog)
    full = h.step(ClientAppend(t + 1, ((None, half),), request_id=2))
    # Two halves and a batch header exceed a batch: each is written as its own batch at once.
    batches = of(full, AppendToLog)
    assert [(b.first_offset, b.last_offset) for b in batches] == [
        (batches[0].first_offset, batches[0].first_offset),
        (batches[0].first_offset + 1, batches[0].first_offset + 1),
    ]
    assert [r.request_id for r in of(full, AppendResult)] == [1, 2]
    # The accumulator starts empty again: the next append lingers anew.
    assert not of(h.step(ClientAppend(t + 2, ((None, b"y"),), request_id=3)), AppendToLog)
    assert h.replica.next_deadline_ms() <= t + 2 + 60_000


def test_a_fetch_is_answered_while_appends_linger() -> None:
    h = leader(append_linger_ms=60_000)
    t = h.now
    end = h.view.end_offset
    h.step(ClientAppend(t, ((None, b"a"),), request_id=1))
    answered = h.recv(2, fetch(2, int(h.view.epoch), int(end), int(h.view.last_epoch)))
    assert sent(answered, FetchResponse)  # served now, not after the linger
    assert not of(answered, AppendToLog)
    h.step(ClientAppend(t + 10, ((None, b"b"),), request_id=2))
    [append] = of(h.step(Tick(t + 60_000)), AppendToLog)
    assert (append.first_offset, append.last_offset) == (end, end + 1)


def test_records_bytes_bounds_keys_values_and_framing() -> None:
    assert records_bytes(((None, b"abc"), (b"k", None))) == 2 * RECORD_OVERHEAD_BYTES + 4
