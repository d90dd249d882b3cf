"""KeyValueStore applies a batch as one merge of each key's last record (kraft.app.kv._apply),
and loads a snapshot batch of distinct keys as one merge: the same state as its records one by
one, whatever mix of sets, deletes, repeated keys, keyless records and nulls a batch holds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.app.kv import KeyValueStore
from kraft.app.port import CommittedBatch, StateMachineError
from kraft.core.producers import ProducerBatch, ProducerTable
from kraft.ids import Epoch, Offset, ProducerId
from kraft.records import KeyValue

_keys = st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b""]))
_values = st.one_of(st.none(), st.binary(max_size=3))
_batch = st.lists(st.tuples(_keys, _values), min_size=1, max_size=12)


def _one_by_one(batches: list[list[KeyValue]]) -> tuple[dict[bytes, bytes], int]:
    data: dict[bytes, bytes] = {}
    plain = 0
    for batch in batches:
        for key, value in batch:
            if key is None:
                plain += 1
            elif value is None:
                data.pop(key, None)
            else:
                data[key] = value
    return data, plain


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(_batch, min_size=1, max_size=5))
def test_batches_apply_as_their_records_one_by_one(batches: list[list[KeyValue]]) -> None:
    store = KeyValueStore()
    offset = 0
    for records in batches:
        last = offset + len(records) - 1
        store.handle_commit(
            [CommittedBatch(Offset(offset), Offset(last), Epoch(1), tuple(records))]
        )
        offset = last + 1
    data, plain = _one_by_one(batches)
    assert dict(store.items()) == data
    assert store.plain_values == plain
    assert store.applied_offset == offset


class _Snapshot:
    def __init__(self, batches: list[list[KeyValue]]) -> None:
        self._batches = batches

    @property
    def end_offset(self) -> Offset:
        return Offset(10)

    @property
    def last_epoch(self) -> Epoch:
        return Epoch(2)

    def batches(self) -> Iterator[tuple[KeyValue, ...]]:
        for batch in self._batches:
            yield tuple(batch)


_ENTRY = bytes(1) + (7).to_bytes(8, "big") + bytes(4) + bytes(8) + (3).to_bytes(8, "big") + bytes(4)
_snapshot_batch = st.lists(
    st.one_of(
        st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b""]), st.binary(max_size=3)),
        st.tuples(st.sampled_from([b"a", b"b"]), st.none()),
        st.just((None, _ENTRY)),
    ),
    max_size=8,
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(_snapshot_batch, max_size=4))
def test_a_snapshot_loads_as_its_records_one_by_one(batches: list[list[KeyValue]]) -> None:
    records = [r for batch in batches for r in batch]
    store = KeyValueStore()
    if any(key is not None and value is None for key, value in records):
        with pytest.raises(StateMachineError, match="null value"):
            store.load_snapshot(_Snapshot(batches))
        return
    store.load_snapshot(_Snapshot(batches))
    expected = {key: value for key, value in records if key is not None}
    assert dict(store.items()) == expected
    entries = ProducerTable(store.producers.max_producers)
    for key, _ in records:
        if key is None:
            entries.record(ProducerBatch(ProducerId(7), 0, Offset(0), Offset(3), Epoch(0)))
    assert store.producers.batches() == entries.batches()
    assert store.applied_offset == 10
