"""The leader-epoch cache (Kafka's LeaderEpochFileCache semantics) and its checkpoint file."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.storage.epoch_cache import (
    CheckpointFormatError,
    EpochEntry,
    LeaderEpochCache,
    decode_checkpoint,
    encode_checkpoint,
    read_checkpoint_file,
    write_checkpoint_file,
)


def cache_of(*pairs: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(EpochEntry(Epoch(e), Offset(o)) for e, o in pairs)


def pairs_of(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries()]


# KIP-595: "the fetch response will indicate the largest epoch and its end offset before the
# requested epoch". The end offset of an epoch is the start offset of the next larger epoch.
@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (2, (2, 10)),  # cached epoch, not the latest: start of the next epoch
        (3, (2, 10)),  # absent epoch between 2 and 5: largest epoch below it
        (4, (2, 10)),
        (5, (5, 20)),  # the latest epoch: the log end offset
        (6, (-1, -1)),  # above every cached epoch: undefined
        (1, (1, 0)),  # below the first epoch: (requested, start of the first epoch)
        (-1, (-1, -1)),  # undefined epoch
    ],
)
def test_end_offset_for_matches_kafka(requested: int, expected: tuple[int, int]) -> None:
    cache = cache_of((2, 0), (5, 10))
    result = cache.end_offset_for(Epoch(requested), Offset(20))
    assert result == OffsetAndEpoch(Epoch(expected[0]), Offset(expected[1]))


def test_end_offset_for_on_empty_cache_is_undefined() -> None:
    assert LeaderEpochCache().end_offset_for(Epoch(0), Offset(0)) == OffsetAndEpoch(
        Epoch(-1), Offset(-1)
    )


def test_assign_same_epoch_later_offset_is_a_no_op() -> None:
    cache = cache_of((1, 0))
    assert not cache.assign(Epoch(1), Offset(5))
    assert pairs_of(cache) == [(1, 0)]


def test_assign_removes_entries_that_break_monotonicity() -> None:
    cache = cache_of((1, 0), (3, 10), (4, 20))
    assert cache.assign(Epoch(3), Offset(15))
    assert pairs_of(cache) == [(1, 0), (3, 15)]
    assert cache.assign(Epoch(5), Offset(12))
    assert pairs_of(cache) == [(1, 0), (5, 12)]


def test_truncate_from_end_removes_entries_starting_at_or_after_offset() -> None:
    cache = cache_of((1, 0), (2, 10), (3, 20))
    assert cache.truncate_from_end(Offset(20))
    assert pairs_of(cache) == [(1, 0), (2, 10)]
    assert not cache.truncate_from_end(Offset(15))
    assert cache.truncate_from_end(Offset(0))
    assert pairs_of(cache) == []


def test_truncate_from_start_keeps_the_epoch_in_force_at_the_new_start() -> None:
    cache = cache_of((1, 0), (2, 10), (3, 20))
    assert cache.truncate_from_start(Offset(15))
    assert pairs_of(cache) == [(2, 15), (3, 20)]
    # "truncateFromStart(6) will retain an entry at offset 6": exclusive of the new start.
    assert cache.truncate_from_start(Offset(20))
    assert pairs_of(cache) == [(3, 20)]


def test_checkpoint_golden_text() -> None:
    # Kafka's leader-epoch-checkpoint: version line, count line, "epoch startOffset" lines.
    golden = b"0\n3\n1 0\n4 117\n9 2048\n"
    entries = (
        EpochEntry(Epoch(1), Offset(0)),
        EpochEntry(Epoch(4), Offset(117)),
        EpochEntry(Epoch(9), Offset(2048)),
    )
    assert encode_checkpoint(entries) == golden
    assert decode_checkpoint(golden) == entries
    assert encode_checkpoint(()) == b"0\n0\n"


@pytest.mark.parametrize(
    "text",
    [b"", b"1\n0\n", b"0\n2\n1 0\n", b"0\nx\n", b"0\n1\n1\n", b"0\n1\na b\n", b"\xff\n"],
)
def test_malformed_checkpoint_is_rejected(text: bytes) -> None:
    with pytest.raises(CheckpointFormatError):
        decode_checkpoint(text)


def test_checkpoint_file_round_trip_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    assert read_checkpoint_file(path) is None
    write_checkpoint_file(path, [EpochEntry(Epoch(7), Offset(3))])
    assert path.read_bytes() == b"0\n1\n7 3\n"
    assert read_checkpoint_file(path) == (EpochEntry(Epoch(7), Offset(3)),)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["leader-epoch-checkpoint"]
