"""The key-value state machine (kraft.app.kv) through the application port (kraft.app.port):
keyed records set, a null value deletes, only committed batches in offset order are applied,
control batches are skipped, the idempotent-producer table is kept, and a snapshot round trip
gives the same state."""

from __future__ import annotations

import pytest

from kraft.app.kv import KeyValueStore
from kraft.app.port import (
    CommittedBatch,
    LeaderAndEpoch,
    MemorySnapshot,
    StateMachine,
    StateMachineError,
)
from kraft.core.producers import ProducerBatch
from kraft.ids import NO_PRODUCER, Epoch, NodeId, Offset, ProducerId
from kraft.records import KeyValue


def batch(
    base: int,
    *records: KeyValue,
    epoch: int = 1,
    control: bool = False,
    count: int | None = None,
    producer: int = NO_PRODUCER,
    sequence: int = -1,
) -> CommittedBatch:
    n = count if count is not None else len(records)
    return CommittedBatch(
        Offset(base),
        Offset(base + n - 1),
        Epoch(epoch),
        records,
        control=control,
        producer=ProducerId(producer),
        base_sequence=sequence,
    )


def kv(key: str, value: str | None) -> KeyValue:
    return (key.encode(), None if value is None else value.encode())


def test_the_store_implements_the_port() -> None:
    store: StateMachine = KeyValueStore()
    assert store.applied_offset == 0


def test_a_keyed_record_sets_and_a_null_value_deletes() -> None:
    s = KeyValueStore()
    s.handle_commit([batch(0, kv("a", "1"), kv("b", "2"))])
    assert s.get(b"a") == b"1" and s.get(b"b") == b"2"
    s.handle_commit([batch(2, kv("a", "3"), kv("b", None))])
    assert s.get(b"a") == b"3"
    assert s.get(b"b") is None and b"b" not in s
    assert s.items() == [(b"a", b"3")]
    assert s.applied_offset == 4


def test_deleting_a_missing_key_is_no_error() -> None:
    s = KeyValueStore()
    s.handle_commit([batch(0, kv("nothing", None))])
    assert len(s) == 0 and s.applied_offset == 1


def test_keyless_records_set_no_key_but_are_applied() -> None:
    s = KeyValueStore()
    s.handle_commit([batch(0, (None, b"plain"), kv("k", "v"))])
    assert s.items() == [(b"k", b"v")]
    assert s.plain_values == 1
    assert s.applied_offset == 2


def test_control_batches_are_skipped_but_move_the_applied_offset() -> None:
    s = KeyValueStore()
    s.handle_commit([batch(0, control=True, count=1), batch(1, kv("k", "v"), epoch=2)])
    assert s.items() == [(b"k", b"v")]
    assert s.applied_offset == 2 and s.applied_epoch == 2


def test_a_control_batch_is_not_applied_even_if_it_carried_records() -> None:
    s = KeyValueStore()
    s.handle_commit([batch(0, kv("k", "v"), control=True)])
    assert len(s) == 0 and s.applied_offset == 1


def test_batches_apply_in_offset_order_and_a_gap_is_refused() -> None:
    s = KeyValueStore()
    s.handle_commit([batch(0, kv("a", "1"))])
    with pytest.raises(StateMachineError, match="does not follow"):
        s.handle_commit([batch(2, kv("a", "2"))])
    assert s.get(b"a") == b"1" and s.applied_offset == 1


def test_a_redelivered_batch_is_not_applied_twice() -> None:
    s = KeyValueStore()
    s.handle_commit([batch(0, kv("a", "1")), batch(1, kv("a", "2"))])
    s.handle_commit([batch(0, kv("a", "1")), batch(2, kv("b", "3"))])
    assert s.items() == [(b"a", b"2"), (b"b", b"3")]
    assert s.applied_offset == 3


def test_the_store_keeps_the_committed_producer_table() -> None:
    s = KeyValueStore()
    s.handle_commit(
        [
            batch(0, kv("a", "1"), kv("b", "2"), producer=7, sequence=0),
            batch(2, kv("c", "3")),
            batch(3, kv("d", "4"), producer=7, sequence=2, epoch=2),
        ]
    )
    assert s.producers.batches() == (
        ProducerBatch(ProducerId(7), 0, Offset(0), Offset(1), Epoch(1)),
        ProducerBatch(ProducerId(7), 2, Offset(3), Offset(3), Epoch(2)),
    )


def test_the_leader_change_is_kept() -> None:
    s = KeyValueStore()
    s.handle_leader_change(LeaderAndEpoch(NodeId(2), Epoch(5)))
    assert s.leader == LeaderAndEpoch(NodeId(2), Epoch(5))


def test_a_snapshot_round_trip_gives_the_same_state() -> None:
    s = KeyValueStore()
    s.handle_commit(
        [
            batch(0, kv("x", "1"), kv("y", "2"), producer=9, sequence=0),
            batch(2, kv("y", None), kv("z", ""), epoch=3),
            batch(4, (b"\x00\xff", b"\x01"), producer=11, sequence=5, epoch=3),
        ]
    )
    snap = MemorySnapshot(s.applied_offset, s.applied_epoch)
    s.produce_snapshot(snap)
    # The state as records: one per key, in key order, then the producer table (null keys).
    keyed = [r for b in snap.written for r in b if r[0] is not None]
    assert keyed == [(b"\x00\xff", b"\x01"), kv("x", "1"), kv("z", "")]
    loaded = KeyValueStore()
    loaded.handle_commit([batch(0, kv("stale", "gone"))])  # replaced by the snapshot
    loaded.load_snapshot(snap)
    assert loaded.items() == s.items()
    assert loaded.producers.batches() == s.producers.batches()
    assert loaded.applied_offset == 5 and loaded.applied_epoch == 3
    # It goes on from the snapshot's end offset.
    loaded.handle_commit([batch(5, kv("after", "1"), epoch=3)])
    assert loaded.get(b"after") == b"1"


def test_a_large_snapshot_is_written_in_several_batches() -> None:
    s = KeyValueStore()
    s.handle_commit([batch(0, *(kv(f"k{i:05}", str(i)) for i in range(2500)))])
    snap = MemorySnapshot(s.applied_offset, s.applied_epoch)
    s.produce_snapshot(snap)
    assert [len(b) for b in snap.written] == [1000, 1000, 500]
    loaded = KeyValueStore()
    loaded.load_snapshot(snap)
    assert loaded.items() == s.items()


def test_a_snapshot_with_a_bad_producer_entry_is_refused() -> None:
    snap = MemorySnapshot(Offset(3), Epoch(1), [((None, b"short"),)])
    s = KeyValueStore()
    with pytest.raises(StateMachineError, match="producer entry"):
        s.load_snapshot(snap)
    assert s.applied_offset == 0  # unchanged


def test_a_snapshot_with_a_deleted_key_is_refused() -> None:
    snap = MemorySnapshot(Offset(3), Epoch(1), [(kv("k", None),)])
    with pytest.raises(StateMachineError, match="null value"):
        KeyValueStore().load_snapshot(snap)


def test_capture_is_a_copy_the_store_does_not_touch_again() -> None:
    store = KeyValueStore()
    store.handle_commit(
        [
            CommittedBatch(
                Offset(0),
                Offset(1),
                Epoch(3),
                ((b"a", b"1"), (b"b", b"2")),
                append_timestamp_ms=77,
                producer=ProducerId(9),
                base_sequence=0,
            )
        ]
    )
    copy = store.capture()
    store.handle_commit([CommittedBatch(Offset(2), Offset(2), Epoch(4), ((b"a", None),))])
    assert copy.items() == [(b"a", b"1"), (b"b", b"2")]
    assert (copy.applied_offset, copy.applied_epoch) == (2, 3)
    assert copy.last_append_timestamp_ms == 77
    assert copy.producers.batches() == store.producers.batches()
    assert store.items() == [(b"b", b"2")]
    assert (store.applied_offset, store.applied_epoch) == (3, 4)
