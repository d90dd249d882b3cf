"""The node's checkpoint files as the core sees them (kraft.server.snapshot_store): serving by
byte position, a fetched snapshot written chunk by chunk, validated (a short or damaged file is
refused), installed by rename, discarded; deletion of the snapshots below a log start."""

from __future__ import annotations

from pathlib import Path

from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.server.snapshot_store import FileSnapshots
from kraft.storage.snapshot_files import CheckpointWriter, checkpoint_path

E = Epoch(3)


def _snapshot(directory: Path, offset: int, keys: int = 50) -> OffsetAndEpoch:
    sid = OffsetAndEpoch(E, Offset(offset))
    with CheckpointWriter(directory, sid, timestamp_ms=0, last_contained_log_timestamp=0) as w:
        w.append([(f"k{i}".encode(), b"v" * 100) for i in range(keys)])
        w.freeze()
    return sid


def test_serves_by_position_and_lists_valid_ones(tmp_path: Path) -> None:
    files = FileSnapshots(tmp_path)
    sid = _snapshot(tmp_path, 10)
    raw = checkpoint_path(tmp_path, sid).read_bytes()
    assert files.size(sid) == len(raw)
    assert files.read(sid, 100, 50) == raw[100:150]
    assert files.size(OffsetAndEpoch(E, Offset(11))) is None
    (tmp_path / checkpoint_path(tmp_path, OffsetAndEpoch(E, Offset(20))).name).write_bytes(b"x")
    assert files.ids() == (sid,)  # the damaged one is left out


def test_fetch_chunks_validate_install(tmp_path: Path) -> None:
    leader, follower = tmp_path / "l", tmp_path / "f"
    leader.mkdir()
    follower.mkdir()
    sid = _snapshot(leader, 10)
    raw = checkpoint_path(leader, sid).read_bytes()
    files = FileSnapshots(follower)
    files.write_chunk(sid, 0, raw[:1000])
    assert not files.validate(sid, len(raw)).valid  # short
    files.write_chunk(sid, 1000, memoryview(raw)[1000:])
    assert files.validate(sid, len(raw)).valid
    path = files.install(sid)
    assert path.read_bytes() == raw
    assert not files.part_path(sid).exists()
    assert files.ids() == (sid,)


def test_a_damaged_fetch_is_refused_and_discarded(tmp_path: Path) -> None:
    leader, follower = tmp_path / "l", tmp_path / "f"
    leader.mkdir()
    follower.mkdir()
    sid = _snapshot(leader, 10)
    raw = bytearray(checkpoint_path(leader, sid).read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    files = FileSnapshots(follower)
    files.write_chunk(sid, 0, bytes(raw))
    v = files.validate(sid, len(raw))
    assert not v.valid
    assert v.reason
    files.discard(sid)
    assert list(follower.iterdir()) == []


def test_delete_older_than(tmp_path: Path) -> None:
    files = FileSnapshots(tmp_path)
    a, b, c = (_snapshot(tmp_path, o) for o in (10, 20, 30))
    assert files.delete_older_than(b) == [a]
    assert files.ids() == (b, c)
