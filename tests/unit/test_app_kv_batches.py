"""KeyValueStore applies a batch as one merge of each key's last record (kraft.app.kv._apply):
the same state as applying its records one by one, whatever mix of sets, deletes, repeated
keys and keyless records the batch holds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.app.kv import KeyValueStore
from kraft.app.port import CommittedBatch
from kraft.ids import Epoch, Offset
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
