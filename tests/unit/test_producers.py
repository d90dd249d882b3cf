"""The idempotent-append table: a retry is told from new data, within bounds, across
truncation, and the same table comes back from reading the log in order."""

from __future__ import annotations

from kraft.core.producers import KEEP, ProducerBatch, ProducerTable, Verdict
from kraft.ids import Epoch, Offset, ProducerId

P, Q = ProducerId(11), ProducerId(22)


def batch(p: ProducerId, seq: int, first: int, count: int = 1, epoch: int = 1) -> ProducerBatch:
    return ProducerBatch(p, seq, Offset(first), Offset(first + count - 1), Epoch(epoch))


def test_a_retry_is_a_duplicate_with_the_offsets_it_already_has() -> None:
    t = ProducerTable()
    assert t.check(P, 0, 3).verdict is Verdict.NEW
    t.record(batch(P, 0, 10, 3))
    dup = t.check(P, 0, 3)
    assert dup.verdict is Verdict.DUPLICATE
    assert dup.batch == batch(P, 0, 10, 3)
    assert t.check(P, 3, 1).verdict is Verdict.NEW
    assert t.check(P, 5, 1).verdict is Verdict.OUT_OF_ORDER
    assert t.check(Q, 7, 1).verdict is Verdict.NEW  # a producer the table does not know


def test_only_the_last_few_batches_are_retained() -> None:
    t = ProducerTable()
    for i in range(KEEP + 2):
        t.record(batch(P, i, 100 + i))
    assert t.check(P, 0, 1).verdict is Verdict.TOO_OLD
    assert t.check(P, KEEP + 1, 1).verdict is Verdict.DUPLICATE
    assert t.check(P, 2, 1).verdict is Verdict.DUPLICATE


def test_truncation_forgets_what_the_log_no_longer_holds() -> None:
    t = ProducerTable()
    t.record(batch(P, 0, 10, 2))
    t.record(batch(Q, 0, 12))
    t.record(batch(P, 2, 13))
    t.truncate(Offset(12))
    # P's second batch is gone from the log: its retry must be appended again, once.
    assert t.check(P, 2, 1).verdict is Verdict.NEW
    assert t.check(P, 0, 2).verdict is Verdict.DUPLICATE
    assert t.check(Q, 0, 1).verdict is Verdict.NEW
    assert len(t) == 1


def test_the_table_is_bounded_forgetting_the_least_recently_appended_producer() -> None:
    t = ProducerTable(max_producers=2)
    t.record(batch(P, 0, 1))
    t.record(batch(Q, 0, 2))
    t.record(batch(P, 1, 3))
    t.record(batch(ProducerId(33), 0, 4))
    assert len(t) == 2
    assert t.check(Q, 0, 1).verdict is Verdict.NEW  # Q was forgotten, not P
    assert t.check(P, 1, 1).verdict is Verdict.DUPLICATE


def test_reading_the_log_in_order_rebuilds_the_same_table() -> None:
    history = [batch(ProducerId(i % 7), i // 7, i) for i in range(60)]
    live = ProducerTable(max_producers=5)
    for b in history:
        live.record(b)
    rebuilt = ProducerTable(max_producers=5)
    for b in sorted(history, key=lambda b: b.first_offset):
        rebuilt.record(b)
    assert live.batches() == rebuilt.batches()
