"""Snapshots as streams of batches at both ends of the port: the key-value store writes its
records a batch at a time (kraft.app.kv), and a fetched snapshot already validated is handed
to the store in one reading of the file (kraft.storage.snapshot_files.load_validated_snapshot),
each batch still checked as it is read."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from kraft.app.kv import KeyValueStore
from kraft.app.port import CommittedBatch
from kraft.ids import Epoch, Offset, ProducerId
from kraft.records import KeyValue
from kraft.storage.snapshot_directory import load_state_snapshot, write_state_snapshot
from kraft.storage.snapshot_files import (
    CheckpointReader,
    CorruptSnapshotError,
    check_snapshot,
    load_validated_snapshot,
)

KEYS = 2500


def _store() -> KeyValueStore:
    store = KeyValueStore()
    records = tuple((f"key-{i:05d}".encode(), f"value-{i}".encode()) for i in range(KEYS))
    store.handle_commit(
        [
            CommittedBatch(Offset(0), Offset(KEYS - 1), Epoch(3), records),
            CommittedBatch(
                Offset(KEYS),
                Offset(KEYS),
                Epoch(3),
                ((b"key-00000", b"again"),),
                producer=ProducerId(7),
                base_sequence=0,
            ),
        ]
    )
    return store


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[KeyValue, ...]] = []

    def append(self, records: Sequence[KeyValue]) -> None:
        self.calls.append(tuple(records))


def test_the_store_writes_its_records_a_batch_at_a_time() -> None:
    store = _store()
    writer = _Recorder()
    store.produce_snapshot(writer)
    assert max(len(c) for c in writer.calls) <= 1000
    keyed = [kv for call in writer.calls for kv in call if kv[0] is not None]
    assert keyed == store.items()  # every key once, in key order
    producers = [kv for call in writer.calls for kv in call if kv[0] is None]
    assert len(producers) == 1


def test_a_validated_snapshot_loads_in_one_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store()
    path = write_state_snapshot(store, tmp_path, timestamp_ms=0, last_contained_log_timestamp=0)
    summary = check_snapshot(path)
    reads: list[int] = []
    real = CheckpointReader._read_batch

    def counted(self: CheckpointReader, position: int) -> object:
        reads.append(position)
        return real(self, position)

    monkeypatch.setattr(CheckpointReader, "_read_batch", counted)
    loaded = KeyValueStore()
    assert load_validated_snapshot(path, loaded) == summary
    assert len(reads) == summary.data_batches + 2  # header, each data batch, footer: once
    assert len(set(reads)) == len(reads)
    assert loaded.items() == store.items()
    assert loaded.applied_offset == store.applied_offset
    assert loaded.producers.batches() == store.producers.batches()
    reads.clear()
    load_state_snapshot(path, KeyValueStore())  # verifies first: reads every batch twice
    assert len(reads) > 2 * summary.data_batches


def test_a_file_damaged_after_validation_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    path = write_state_snapshot(_store(), tmp_path, timestamp_ms=0, last_contained_log_timestamp=0)
    raw = bytearray(path.read_bytes())
    raw[len(raw) * 3 // 4] ^= 0x40
    path.chmod(0o644)
    path.write_bytes(bytes(raw))
    loaded = KeyValueStore()
    loaded.handle_commit([CommittedBatch(Offset(0), Offset(0), Epoch(1), ((b"mine", b"1"),))])
    with pytest.raises(CorruptSnapshotError):
        load_validated_snapshot(path, loaded)
    assert loaded.items() == [(b"mine", b"1")]
    assert loaded.applied_offset == 1
