"""KIP-630 checkpoint files (kraft.storage.snapshot_files and snapshot_directory): Kafka's
layout (header batch at offset 0, records, footer alone and last, the snapshot's epoch on every
batch), the durable write through `.part`, validation of every batch with a typed error naming
the file, start-up cleanup, the listing of valid snapshots, the state machine round trip
through real files, and bounded memory for a snapshot much larger than the bound."""

from __future__ import annotations

import os
import stat
import tracemalloc
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraft.app.kv import KeyValueStore
from kraft.app.port import CommittedBatch
from kraft.cli import main
from kraft.control_records import (
    Endpoint,
    KRaftVersionRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    VoterEntry,
    VotersRecord,
    decode_control_batch,
)
from kraft.ids import Epoch, Offset, OffsetAndEpoch, ProducerId
from kraft.records import iter_batches
from kraft.storage.snapshot_directory import (
    delete_snapshot,
    latest_snapshot,
    list_snapshots,
    load_state_snapshot,
    remove_leftovers,
    snapshot_files,
    write_state_snapshot,
)
from kraft.storage.snapshot_files import (
    CheckpointReader,
    CheckpointWriter,
    CorruptSnapshotError,
    SnapshotError,
    SnapshotFileKind,
    check_snapshot,
    checkpoint_name,
    parse_snapshot_path,
)


def sid(offset: int, epoch: int) -> OffsetAndEpoch:
    return OffsetAndEpoch(Epoch(epoch), Offset(offset))


def write(
    directory: Path,
    offset: int,
    epoch: int,
    batches: list[list[tuple[bytes | None, bytes | None]]],
    **kwargs: object,
) -> Path:
    with CheckpointWriter(
        directory,
        sid(offset, epoch),
        timestamp_ms=5000,
        last_contained_log_timestamp=4000,
        **kwargs,  # type: ignore[arg-type]
    ) as writer:
        for records in batches:
            writer.append(records)
        return writer.freeze()


def store_with_state() -> KeyValueStore:
    store = KeyValueStore()
    store.handle_commit(
        [
            CommittedBatch(Offset(0), Offset(0), Epoch(1), (), control=True),
            CommittedBatch(
                Offset(1),
                Offset(3),
                Epoch(1),
                ((b"a", b"1"), (b"b", b"2"), (b"c", b"3")),
                producer=ProducerId(77),
                base_sequence=0,
            ),
            CommittedBatch(Offset(4), Offset(5), Epoch(2), ((b"b", None), (b"d", b"4"))),
        ]
    )
    return store


def batch_positions(path: Path) -> list[int]:
    return [pos for pos, _ in iter_batches(path.read_bytes())]


def rewrite(path: Path, data: bytes) -> None:
    os.chmod(path, 0o644)
    path.write_bytes(data)


# --------------------------------------------------------------------------- layout


def test_names_are_kafkas(tmp_path: Path) -> None:
    assert checkpoint_name(sid(5120793, 2)) == "00000000000005120793-0000000002.checkpoint"
    parsed = parse_snapshot_path(tmp_path / "00000000000000000010-0000000003.checkpoint")
    assert parsed is not None and parsed.snapshot_id == sid(10, 3)
    assert parsed.kind is SnapshotFileKind.COMPLETE
    part = parse_snapshot_path(tmp_path / "00000000000000000010-0000000003-123abc.checkpoint.part")
    assert part is not None and part.kind is SnapshotFileKind.PARTIAL
    gone = parse_snapshot_path(tmp_path / "00000000000000000010-0000000003.checkpoint.deleted")
    assert gone is not None and gone.kind is SnapshotFileKind.DELETED
    for other in ("00000000000000000000.log", "bootstrap.checkpoint", "10-3.checkpoint"):
        assert parse_snapshot_path(tmp_path / other) is None


def test_layout_header_records_footer_as_kafka_writes_them(tmp_path: Path) -> None:
    path = write(tmp_path, 42, 7, [[(b"k1", b"v1"), (b"k2", b"v2")], [(b"k3", None)]])
    assert path.name == "00000000000000000042-0000000007.checkpoint"
    assert not stat.S_IMODE(path.stat().st_mode) & 0o222  # read-only, as Kafka leaves it
    data = path.read_bytes()
    batches = list(iter_batches(data))
    assert [h.base_offset for _, h in batches] == [0, 1, 4]
    assert [h.is_control for _, h in batches] == [True, False, True]
    assert {h.partition_leader_epoch for _, h in batches} == {7}
    assert {h.max_timestamp for _, h in batches} == {5000}
    _, first = decode_control_batch(data, batches[0][0])
    assert first == [SnapshotHeaderRecord(0, 4000)]
    _, last = decode_control_batch(data, batches[-1][0])
    assert last == [SnapshotFooterRecord(0)]
    with CheckpointReader(path) as reader:
        assert (reader.end_offset, reader.last_epoch) == (42, 7)
        assert list(reader.batches()) == [((b"k1", b"v1"), (b"k2", b"v2"), (b"k3", None))]


def test_header_batch_carries_kraft_version_and_voters(tmp_path: Path) -> None:
    voters = VotersRecord(
        0, (VoterEntry(1, uuid.UUID(int=5), (Endpoint("CONTROLLER", "h", 9093),), 0, 1),)
    )
    path = write(tmp_path, 0, 0, [], kraft_version=1, voters=voters)
    _, first = decode_control_batch(path.read_bytes(), 0)
    assert first == [SnapshotHeaderRecord(0, 4000), KRaftVersionRecord(0, 1), voters]
    summary = check_snapshot(path)
    assert (summary.kraft_version, summary.voters, summary.records) == (1, voters, 0)
    with pytest.raises(ValueError, match=r"kraft\.version"):
        CheckpointWriter(
            tmp_path, sid(1, 1), timestamp_ms=0, last_contained_log_timestamp=0, voters=voters
        )


def test_records_are_split_into_bounded_batches(tmp_path: Path) -> None:
    records = [(b"key%03d" % i, b"x" * 100) for i in range(100)]
    path = write(tmp_path, 100, 1, [records], batch_bytes=1000)
    with CheckpointReader(path) as reader:
        sizes = [h.size_in_bytes for h, _ in reader.key_value_batches()]
        got = [kv for batch in reader.batches() for kv in batch]
    assert len(sizes) > 10 and max(sizes) < 1000 + 61 + 200
    assert got == records


def test_an_unfrozen_writer_leaves_no_file(tmp_path: Path) -> None:
    with (
        pytest.raises(RuntimeError),
        CheckpointWriter(
            tmp_path, sid(9, 1), timestamp_ms=0, last_contained_log_timestamp=0
        ) as writer,
    ):
        writer.append([(b"a", b"b")])
        assert writer.part_path.name.endswith(".checkpoint.part")
        assert writer.part_path.exists()
        raise RuntimeError("the state machine failed")
    assert list(tmp_path.iterdir()) == []
    path = write(tmp_path, 9, 1, [])
    with (
        pytest.raises(SnapshotError),
        CheckpointWriter(
            tmp_path, sid(10, 1), timestamp_ms=0, last_contained_log_timestamp=0
        ) as writer,
    ):
        writer.freeze()
        writer.append([(b"late", b"x")])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [path.name, checkpoint_name(sid(10, 1))]
    )


def test_freeze_makes_the_file_durable_before_and_after_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    writer = CheckpointWriter(tmp_path, sid(4, 2), timestamp_ms=0, last_contained_log_timestamp=0)
    writer.append([(b"a", b"1")])
    assert not writer.path.exists()  # only the .part file until freeze

    def fsync(fd: int) -> None:
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
        calls.append("fsync dir" if is_dir else "fsync file")
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        calls.append(f"rename {Path(src).name.endswith('.checkpoint.part')}")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    path = writer.freeze()
    assert calls == ["fsync file", "rename True", "fsync dir"]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_part_file_is_read_as_the_snapshot_it_was_fetched_for(tmp_path: Path) -> None:
    path = write(tmp_path, 8, 2, [[(b"a", b"1")]])
    part = tmp_path / (path.name + ".part")
    part.write_bytes(path.read_bytes())
    assert check_snapshot(part, sid(8, 2)).records == 1
    with pytest.raises(CorruptSnapshotError, match="name"):
        check_snapshot(part)
    with pytest.raises(CorruptSnapshotError, match="epoch"):
        check_snapshot(part, sid(8, 3))


def test_control_records_out_of_place_are_rejected(tmp_path: Path) -> None:
    """A LeaderChange in the header batch, and a header batch where the footer belongs."""
    from kraft.control_records import LeaderChangeMessage, encode_control_records

    path = write(tmp_path, 3, 1, [])
    footer = batch_positions(path)[-1]
    data = path.read_bytes()
    odd = encode_control_records(
        0, 1, [SnapshotHeaderRecord(0, 0), LeaderChangeMessage(0, 1, (1,), (1,))], timestamp_ms=0
    )
    rewrite(path, odd + encode_control_records(2, 1, [SnapshotFooterRecord(0)], timestamp_ms=0))
    with pytest.raises(CorruptSnapshotError, match="LeaderChangeMessage in the header batch"):
        check_snapshot(path)
    again = encode_control_records(1, 1, [SnapshotHeaderRecord(0, 0)], timestamp_ms=0)
    rewrite(path, data[:footer] + again)
    with pytest.raises(CorruptSnapshotError, match="where the footer belongs"):
        check_snapshot(path)


# --------------------------------------------------------------------------- the port


def test_key_value_store_round_trip_through_a_file(tmp_path: Path) -> None:
    store = store_with_state()
    path = write_state_snapshot(
        store, tmp_path, timestamp_ms=9000, last_contained_log_timestamp=8000
    )
    assert path.name == checkpoint_name(sid(6, 2))
    loaded = KeyValueStore()
    summary = load_state_snapshot(path, loaded)
    assert summary.snapshot_id == sid(6, 2) and summary.header.last_contained_log_timestamp == 8000
    assert loaded.items() == store.items() == [(b"a", b"1"), (b"c", b"3"), (b"d", b"4")]
    assert list(loaded.producers.batches()) == list(store.producers.batches())
    assert (loaded.applied_offset, loaded.applied_epoch) == (6, 2)
    # The loaded store goes on from the snapshot's end offset.
    loaded.handle_commit([CommittedBatch(Offset(6), Offset(6), Epoch(2), ((b"e", b"5"),))])
    assert loaded.get(b"e") == b"5"


def test_a_corrupt_snapshot_never_reaches_the_state_machine(tmp_path: Path) -> None:
    path = write_state_snapshot(
        store_with_state(), tmp_path, timestamp_ms=1, last_contained_log_timestamp=1
    )
    data = bytearray(path.read_bytes())
    footer = batch_positions(path)[-1]
    data[footer - 1] ^= 0x01  # the last byte of the last data batch
    rewrite(path, bytes(data))
    target = KeyValueStore()
    target.handle_commit([CommittedBatch(Offset(0), Offset(0), Epoch(1), ((b"old", b"x"),))])
    with pytest.raises(CorruptSnapshotError) as caught:
        load_state_snapshot(path, target)
    assert str(path) in str(caught.value) and "CRC" in str(caught.value)
    assert target.items() == [(b"old", b"x")] and target.applied_offset == 1


# --------------------------------------------------------------------------- validation


def test_every_corrupted_byte_is_a_typed_error_naming_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, 3, 1, [[(b"a", b"1"), (b"b", b"2")]])
    good = path.read_bytes()
    for position in range(len(good)):
        damaged = bytearray(good)
        damaged[position] ^= 0x40
        rewrite(path, bytes(damaged))
        with pytest.raises(CorruptSnapshotError) as caught:
            check_snapshot(path)
        assert caught.value.path == path
        assert str(path) in str(caught.value)
    rewrite(path, good)
    assert check_snapshot(path).records == 2


def test_a_truncated_file_is_rejected_at_every_length(tmp_path: Path) -> None:
    path = write(tmp_path, 3, 1, [[(b"a", b"1"), (b"b", b"2")]])
    good = path.read_bytes()
    for length in range(len(good)):
        rewrite(path, good[:length])
        with pytest.raises(CorruptSnapshotError):
            check_snapshot(path)


def test_a_missing_footer_or_data_after_it_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, 3, 1, [[(b"a", b"1")]])
    good = path.read_bytes()
    footer = batch_positions(path)[-1]
    rewrite(path, good[:footer])
    with pytest.raises(CorruptSnapshotError, match="no SnapshotFooter"):
        check_snapshot(path)
    rewrite(path, good + good[footer:])
    with pytest.raises(CorruptSnapshotError, match="after the SnapshotFooter"):
        check_snapshot(path)


def test_header_first_offsets_and_epoch_are_checked(tmp_path: Path) -> None:
    a = write(tmp_path / "a", 3, 1, [[(b"a", b"1")]])
    header, data_start, footer = batch_positions(a)
    data = a.read_bytes()
    # No header: the data batch first.
    rewrite(a, data[data_start:])
    with pytest.raises(CorruptSnapshotError, match="first"):
        check_snapshot(a)
    # A gap in the offsets: the same snapshot with its data batch left out.
    rewrite(a, data[header:data_start] + data[footer:])
    with pytest.raises(CorruptSnapshotError, match="base offset 2, expected 1"):
        check_snapshot(a)
    # A batch whose epoch is not the snapshot's: the file renamed to another epoch.
    rewrite(a, data)
    other = a.with_name(checkpoint_name(sid(3, 2)))
    os.replace(a, other)
    with pytest.raises(CorruptSnapshotError, match="epoch"):
        check_snapshot(other)
    bad_name = other.with_name("notes.checkpoint")
    os.replace(other, bad_name)
    with pytest.raises(CorruptSnapshotError, match="name"):
        check_snapshot(bad_name)


# --------------------------------------------------------------------------- the directory


def test_leftover_part_and_deleted_files_are_removed_at_start(tmp_path: Path) -> None:
    kept = write(tmp_path, 5, 1, [[(b"a", b"1")]])
    crashed = CheckpointWriter(tmp_path, sid(9, 1), timestamp_ms=0, last_contained_log_timestamp=0)
    crashed.append([(b"b", b"2")])
    os.close(crashed._fd or -1)  # a crash: the process is gone, its .part file stays
    marked = tmp_path / (checkpoint_name(sid(2, 1)) + ".deleted")
    marked.write_bytes(b"old")
    other = tmp_path / "00000000000000000000.log"
    other.write_bytes(b"")
    assert {f.kind for f in snapshot_files(tmp_path)} == set(SnapshotFileKind)
    removed = remove_leftovers(tmp_path)
    assert sorted(removed) == sorted([crashed.part_path, marked])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([kept.name, other.name])
    assert remove_leftovers(tmp_path) == []


def test_listing_gives_the_valid_snapshots_newest_first(tmp_path: Path) -> None:
    old = write(tmp_path, 10, 1, [[(b"a", b"1")]])
    mid = write(tmp_path, 20, 2, [[(b"a", b"2")]])
    new = write(tmp_path, 15, 3, [[(b"a", b"3")]])  # a later epoch is newer (KIP-595 order)
    assert [s.path for s in list_snapshots(tmp_path)] == [new, mid, old]
    latest = latest_snapshot(tmp_path)
    assert latest is not None and latest.path == new
    rewrite(new, new.read_bytes()[:-1])
    assert [s.path for s in list_snapshots(tmp_path)] == [mid, old]
    latest = latest_snapshot(tmp_path)
    assert latest is not None and latest.snapshot_id == sid(20, 2)
    assert delete_snapshot(tmp_path, sid(20, 2)) is True
    assert delete_snapshot(tmp_path, sid(20, 2)) is False
    assert [s.path for s in list_snapshots(tmp_path)] == [old]
    assert latest_snapshot(tmp_path / "missing") is None


# --------------------------------------------------------------------------- memory


def test_peak_memory_is_bounded_for_a_snapshot_much_larger_than_the_bound(
    tmp_path: Path,
) -> None:
    value = b"v" * 8192
    total = 64 * 1024 * 1024
    count = total // len(value)
    bound = 4 * 1024 * 1024

    def records() -> Iterator[tuple[bytes | None, bytes | None]]:
        for i in range(count):
            yield (i.to_bytes(8, "big"), value)

    tracemalloc.start()
    try:
        with CheckpointWriter(
            tmp_path, sid(count, 1), timestamp_ms=0, last_contained_log_timestamp=0
        ) as writer:
            chunk: list[tuple[bytes | None, bytes | None]] = []
            for record in records():
                chunk.append(record)
                if len(chunk) == 100:
                    writer.append(chunk)
                    chunk = []
            writer.append(chunk)
            path = writer.freeze()
        _, write_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        seen = 0
        with CheckpointReader(path) as reader:
            reader.verify()
            for batch in reader.batches():
                seen += len(batch)
        _, read_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert path.stat().st_size > total
    assert seen == count
    assert write_peak < bound, write_peak
    assert read_peak < bound, read_peak


# --------------------------------------------------------------------------- dump-log


def test_dump_log_prints_a_checkpoint_and_flags_an_invalid_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, 3, 1, [[(b"a", b"1"), (b"b", b"2")]])
    assert main(["dump-log", "--print-records", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Snapshot end offset: 3, epoch: 1" in out
    assert out.index("SnapshotHeaderRecord(") < out.index("payload: b'1'")
    assert out.index("payload: b'2'") < out.index("SnapshotFooterRecord(")
    footer = batch_positions(path)[-1]
    rewrite(path, path.read_bytes()[:footer])
    assert main(["dump-log", str(path)]) == 1
    assert "no SnapshotFooter" in capsys.readouterr().err
