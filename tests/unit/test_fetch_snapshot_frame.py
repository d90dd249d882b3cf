"""FetchSnapshot answers without copying the chunk (kraft.protocol.rpc.fetch_snapshot,
kraft.server.snapshot_store): the zero-copy frame (encoded prefix, the chunk itself, encoded
suffix) is byte for byte the plain encoding at every version, for chunks and for error
answers; the leader's chunk is a view of the mapped checkpoint file that stays valid after the
file is deleted; the follower's decoded chunk is a view of the received frame; validation of a
fetched file runs on a worker thread and reports only for the file it checked."""

from __future__ import annotations

import asyncio
import mmap
import threading
from pathlib import Path

import pytest

from kraft.core.messages import FetchSnapshotResponse, Records
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.protocol import ApiKey, decode_response_payload, encode_response_payload
from kraft.protocol.rpc import Listener, response_from_wire, response_to_wire
from kraft.protocol.rpc.fetch_snapshot import fetch_snapshot_frame
from kraft.server.snapshot_store import FileSnapshots, Validation
from kraft.storage.snapshot_files import CheckpointWriter, checkpoint_path

SID = OffsetAndEpoch(Epoch(4), Offset(1234))
LEADER = Listener("CONTROLLER", "127.0.0.1", 9093)
KEY = ApiKey.FETCH_SNAPSHOT


def _snapshot(directory: Path, keys: int = 300) -> OffsetAndEpoch:
    with CheckpointWriter(directory, SID, timestamp_ms=1, last_contained_log_timestamp=1) as w:
        w.append([(f"k{i:05d}".encode(), bytes([i % 251]) * 200) for i in range(keys)])
        w.freeze()
    return SID


def _answer(chunk: Records, error: ErrorCode = ErrorCode.NONE) -> FetchSnapshotResponse:
    return FetchSnapshotResponse(
        error, NodeId(2), Epoch(7), SID, size=100_000, position=4096, chunk=chunk
    )


def _plain_and_frame(msg: FetchSnapshotResponse, version: int) -> tuple[bytes, bytes, object]:
    body = response_to_wire(msg, KEY, version, leader_listener=LEADER)
    plain = encode_response_payload(KEY, version, 99, body, framed=True)
    frame = fetch_snapshot_frame(body, version, 99, msg.chunk)
    assert len(frame) == len(plain)
    return plain, frame.joined(), frame.region


@pytest.mark.parametrize("version", [0, 1])
def test_the_zero_copy_frame_is_the_plain_encoding(tmp_path: Path, version: int) -> None:
    files = FileSnapshots(tmp_path)
    sid = _snapshot(tmp_path)
    chunk = files.read(sid, 4096, 20_000)
    assert isinstance(chunk.obj, mmap.mmap)  # a view of the mapped file, not a copy
    plain, joined, region = _plain_and_frame(_answer(chunk), version)
    assert joined == plain
    assert region is chunk  # the region is the chunk itself, left out of the encoded pieces
    # The prefix ends with the records' length and the suffix holds the tagged fields after it.
    frame = fetch_snapshot_frame(
        response_to_wire(_answer(chunk), KEY, version, leader_listener=LEADER), version, 99, chunk
    )
    assert plain.startswith(frame.prefix) and plain.endswith(frame.suffix)
    assert plain[len(frame.prefix) : len(plain) - len(frame.suffix)] == bytes(chunk)
    assert frame.suffix  # at least the tagged fields (current_leader is tag 0)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize(
    "error", [ErrorCode.SNAPSHOT_NOT_FOUND, ErrorCode.POSITION_OUT_OF_RANGE, ErrorCode.NONE]
)
def test_error_and_empty_answers_are_one_plain_piece(version: int, error: ErrorCode) -> None:
    plain, joined, region = _plain_and_frame(_answer(b"", error), version)
    assert joined == plain
    assert region == b""


@pytest.mark.parametrize("version", [0, 1])
def test_a_follower_decodes_a_view_of_the_frame(tmp_path: Path, version: int) -> None:
    files = FileSnapshots(tmp_path)
    chunk = files.read(_snapshot(tmp_path), 0, 10_000)
    msg = _answer(chunk)
    frame = fetch_snapshot_frame(
        response_to_wire(msg, KEY, version, leader_listener=LEADER), version, 5, chunk
    )
    payload = frame.joined()[4:]
    corr, body = decode_response_payload(KEY, version, payload)
    assert corr == 5
    back = response_from_wire(KEY, version, body)
    assert isinstance(back, FetchSnapshotResponse)
    assert back == msg
    assert isinstance(back.chunk, memoryview)  # not copied out of the frame
    assert back.chunk == chunk


def test_a_served_view_outlives_the_deleted_file(tmp_path: Path) -> None:
    files = FileSnapshots(tmp_path)
    sid = _snapshot(tmp_path)
    raw = checkpoint_path(tmp_path, sid).read_bytes()
    view = files.read(sid, 100, 5000)
    assert files.read(sid, 100, 5000).obj is view.obj  # one mapping per file
    assert files.read(sid, len(raw) - 10, 5000) == raw[-10:]  # clipped at the end
    assert files.delete_older_than(OffsetAndEpoch(Epoch(9), Offset(SID.offset + 1))) == [sid]
    assert view == raw[100:5100]
    assert files.size(sid) is None
    assert files.read(sid, 0, 10) == b""


def test_validation_runs_on_a_worker_thread_and_stale_outcomes_are_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader, follower = tmp_path / "l", tmp_path / "f"
    leader.mkdir()
    follower.mkdir()
    sid = _snapshot(leader)
    raw = checkpoint_path(leader, sid).read_bytes()
    files = FileSnapshots(follower)
    threads: list[int] = []
    real = FileSnapshots.validate

    def validate(self: FileSnapshots, snapshot_id: OffsetAndEpoch, size: int) -> Validation:
        threads.append(threading.get_ident())
        return real(self, snapshot_id, size)

    monkeypatch.setattr(FileSnapshots, "validate", validate)

    async def main() -> list[Validation]:
        got: list[Validation] = []
        checks: list[asyncio.Future[Validation] | None] = []
        files.write_chunk(sid, 0, raw)
        checks.append(files.validate_later(sid, len(raw), got.append))
        files.discard(sid)  # the transfer is abandoned before the check reports
        files.write_chunk(sid, 0, raw[:-1])  # and a new one started: a short file
        checks.append(files.validate_later(sid, len(raw), got.append))
        for check in checks:
            assert check is not None
            await check
        files.write_chunk(sid, len(raw) - 1, raw[-1:])
        last = files.validate_later(sid, len(raw), got.append)
        assert last is not None
        await last
        for _ in range(3):  # the done callbacks run after the futures complete
            await asyncio.sleep(0)
        return got

    got = asyncio.run(main())
    assert [v.valid for v in got] == [False, True]  # the first, stale outcome never reported
    assert len(threads) == 3
    assert threading.get_ident() not in threads


def test_the_mapping_of_a_file_deleted_elsewhere_is_dropped(tmp_path: Path) -> None:
    files = FileSnapshots(tmp_path)
    sid = _snapshot(tmp_path)
    first = files.read(sid, 0, 10).obj
    path = checkpoint_path(tmp_path, sid)
    path.chmod(0o644)
    path.unlink()  # retention deleting it by another path
    other = OffsetAndEpoch(Epoch(5), Offset(SID.offset + 10))
    with CheckpointWriter(tmp_path, other, timestamp_ms=1, last_contained_log_timestamp=1) as w:
        w.append([(b"k", b"v")])
        w.freeze()
    assert files.read(other, 0, 10).obj is not first
    assert sid not in files._maps  # mapping another file pruned the one of the deleted file
    assert files.read(sid, 0, 10) == b""
