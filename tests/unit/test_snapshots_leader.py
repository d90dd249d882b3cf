"""KIP-630 on the side that holds snapshots (kraft.core.snapshots): CreateSnapshot only at a
committed offset, AdvanceLogStartOffset, a Fetch answered with a snapshot id, and
HandleFetchSnapshotRequest serving chunks by position with KIP-630's errors."""

from __future__ import annotations

from replica_harness import CLUSTER, Harness, build_log, key, of, sent, stand

from kraft.core.effects import (
    ActionTaken,
    AdvanceLogStartOffset,
    SnapshotRefused,
    WriteSnapshot,
)
from kraft.core.events import CreateSnapshot, SnapshotWritten
from kraft.core.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteResponse,
)
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.storage.memory_snapshots import MemorySnapshots

S = ReplicaState
SNAP = OffsetAndEpoch(Epoch(1), Offset(5))


def fetch(src: int, epoch: int, offset: int, last_epoch: int) -> FetchRequest:
    return FetchRequest(
        CLUSTER, key(src), Epoch(epoch), Offset(offset), Epoch(last_epoch), Offset(0)
    )


def leader(**cfg: int) -> Harness:
    """Node 1 leads epoch 2 over a log of epoch 1 (batches 0..2, 3..4) and its LeaderChange
    at 5; node 2 fetched everything, so the HWM is 6."""
    h = Harness(log=build_log([(1, 3), (1, 2)]), snapshots=MemorySnapshots(), **cfg)
    stand(h)
    for v in (2, 3):
        if h.view.state is S.CANDIDATE:
            h.recv(v, VoteResponse(ErrorCode.NONE, NodeId(-1), h.view.epoch, True))
    assert h.view.state is S.LEADER and h.view.epoch == 2
    h.recv(2, fetch(2, 2, 6, 2))
    assert h.view.high_watermark == 6
    return h


def snapshot(h: Harness, offset: int) -> OffsetAndEpoch:
    [w] = of(h.step(CreateSnapshot(h.now, Offset(offset))), WriteSnapshot)
    h.step(SnapshotWritten(h.now, w.snapshot_id))
    return w.snapshot_id


def answer(effects: list[object]) -> FetchResponse:
    [(_, resp)] = sent(effects, FetchResponse)  # type: ignore[arg-type]
    return resp


# ---------------------------------------------------------------- CreateSnapshot


def test_a_snapshot_is_taken_only_at_a_committed_offset() -> None:
    """KIP-630: snapshots of committed records; Kafka refuses one past the high watermark (the
    spec's SnapshotBeyondHwm mutant)."""
    h = leader()
    effects = h.step(CreateSnapshot(h.now, Offset(7)))  # the log ends at 6: past the HWM
    [refused] = of(effects, SnapshotRefused)
    assert "high watermark" in refused.reason and not of(effects, WriteSnapshot)
    h.step(CreateSnapshot(h.now, Offset(6)))  # the HWM itself is fine
    assert of(h.step(CreateSnapshot(h.now, Offset(6))), WriteSnapshot) == [
        WriteSnapshot(OffsetAndEpoch(Epoch(2), Offset(6)))
    ]


def test_a_snapshot_ends_on_a_batch_boundary_after_the_latest_one() -> None:
    h = leader()
    [refused] = of(h.step(CreateSnapshot(h.now, Offset(4))), SnapshotRefused)
    assert "inside a batch" in refused.reason
    [refused] = of(h.step(CreateSnapshot(h.now, Offset(0))), SnapshotRefused)
    assert "log start" in refused.reason
    assert snapshot(h, 3) == OffsetAndEpoch(Epoch(1), Offset(3))
    [refused] = of(h.step(CreateSnapshot(h.now, Offset(3))), SnapshotRefused)
    assert "latest snapshot" in refused.reason


def test_the_replica_holds_a_snapshot_only_once_it_is_written() -> None:
    h = leader()
    [w] = of(h.step(CreateSnapshot(h.now, Offset(5))), WriteSnapshot)
    assert h.replica._log.latest_snapshot is None
    effects = h.step(SnapshotWritten(h.now, w.snapshot_id))
    assert ActionTaken(Action.CREATE_SNAPSHOT) in effects
    assert h.replica._log.latest_snapshot == SNAP
    # A report of a snapshot that is not of this log changes nothing.
    bogus = OffsetAndEpoch(Epoch(2), Offset(3))
    assert not of(h.step(SnapshotWritten(h.now, bogus)), ActionTaken)


# ---------------------------------------------------------------- AdvanceLogStartOffset


def test_the_leader_waits_for_every_live_replica_before_moving_its_log_start() -> None:
    """KIP-630: the log start moves to a snapshot once all live replicas replicated it."""
    h = leader()
    h.recv(3, fetch(3, 2, 2, 1))  # node 3 is live and at 2
    effects = h.step(SnapshotWritten(h.now, SNAP))
    assert not of(effects, AdvanceLogStartOffset) and h.view.log_start_offset == 0
    effects = h.recv(3, fetch(3, 2, 5, 1))  # it reached the snapshot's end
    assert of(effects, AdvanceLogStartOffset) == [AdvanceLogStartOffset(SNAP)]
    assert h.view.log_start_offset == 5 and h.log.start_offset == 5


def test_a_replica_silent_for_a_fetch_timeout_is_not_waited_for() -> None:
    h = leader(fetch_timeout_ms=2000)
    h.recv(3, fetch(3, 2, 2, 1))
    h.step(SnapshotWritten(h.now, SNAP))
    assert h.view.log_start_offset == 0
    h.now += 2001
    effects = h.recv(2, fetch(2, 2, 6, 2))
    assert of(effects, AdvanceLogStartOffset) == [AdvanceLogStartOffset(SNAP)]


def test_the_lag_time_moves_the_log_start_even_past_a_live_replica() -> None:
    h = leader(start_offset_lag_time_max_ms=10_000)
    h.recv(3, fetch(3, 2, 2, 1))
    h.step(SnapshotWritten(h.now, SNAP))
    h.now += 5_000
    h.recv(3, fetch(3, 2, 2, 1))
    assert h.view.log_start_offset == 0
    h.now += 5_000
    effects = h.recv(3, fetch(3, 2, 2, 1))
    assert of(effects, AdvanceLogStartOffset) == [AdvanceLogStartOffset(SNAP)]
    assert h.view.log_start_offset == 5


# ---------------------------------------------------------------- Fetch answers


def leader_with_log_start() -> Harness:
    h = leader()
    snapshot(h, 5)  # node 3 never fetched: not live; node 2 is at 6
    assert h.view.log_start_offset == 5
    return h


def test_a_fetch_below_the_log_start_gets_the_latest_snapshot_id() -> None:
    h = leader_with_log_start()
    resp = answer(h.recv(3, fetch(3, 2, 2, 1)))
    assert resp.error is ErrorCode.NONE and resp.snapshot_id == SNAP
    assert resp.diverging_epoch is None and len(resp.records) == 0
    assert resp.log_start_offset == 5


def test_kafka_sends_the_snapshot_to_an_empty_fetcher_or_an_older_epoch() -> None:
    """Kafka: an empty fetcher (offset 0) gets the latest non-bootstrap snapshot; so does a
    fetch at the log start in another epoch, or with an epoch older than every snapshot."""
    h = leader()
    snapshot(h, 3)  # log start stays 0 (node 2 is at 6, node 3 silent: moves to 3) ...
    snap3 = OffsetAndEpoch(Epoch(1), Offset(3))
    assert answer(h.recv(3, fetch(3, 2, 0, 0))).snapshot_id == snap3
    h2 = leader_with_log_start()
    assert answer(h2.recv(3, fetch(3, 2, 5, 2))).snapshot_id == SNAP  # at start, epoch 2 != 1
    assert answer(h2.recv(3, fetch(3, 2, 6, 0))).snapshot_id == SNAP  # epoch 0 < 1
    # A fetch the log can serve is served.
    resp = answer(h2.recv(3, fetch(3, 2, 5, 1)))
    assert resp.snapshot_id is None and len(resp.records) > 0


# ---------------------------------------------------------------- FetchSnapshot


def fetch_snapshot(
    position: int, *, epoch: int = 2, snap: OffsetAndEpoch = SNAP, max_bytes: int = 1 << 20
) -> FetchSnapshotRequest:
    return FetchSnapshotRequest(CLUSTER, key(3), Epoch(epoch), snap, position, max_bytes)


def snapshot_answer(h: Harness, req: FetchSnapshotRequest) -> FetchSnapshotResponse:
    effects = h.recv(3, req)
    assert ActionTaken(Action.HANDLE_FETCH_SNAPSHOT_REQUEST) in effects
    [(_, resp)] = sent(effects, FetchSnapshotResponse)
    return resp


def test_fetch_snapshot_serves_chunks_by_position() -> None:
    h = leader_with_log_start()
    assert h.snapshots is not None
    data = h.snapshots.complete[SNAP]
    got = b""
    while len(got) < len(data):
        resp = snapshot_answer(h, fetch_snapshot(len(got), max_bytes=50))
        assert resp.error is ErrorCode.NONE and resp.snapshot_id == SNAP
        assert resp.size == len(data) and resp.position == len(got)
        assert 0 < len(resp.chunk) <= 50
        got += resp.chunk
    assert got == data


def test_fetch_snapshot_errors() -> None:
    h = leader_with_log_start()
    assert h.snapshots is not None
    size = len(h.snapshots.complete[SNAP])
    other = OffsetAndEpoch(Epoch(1), Offset(3))
    assert snapshot_answer(h, fetch_snapshot(0, snap=other)).error is ErrorCode.SNAPSHOT_NOT_FOUND
    bootstrap = OffsetAndEpoch(Epoch(0), Offset(0))
    assert snapshot_answer(h, fetch_snapshot(0, snap=bootstrap)).error is (
        ErrorCode.SNAPSHOT_NOT_FOUND
    )
    assert snapshot_answer(h, fetch_snapshot(size)).error is ErrorCode.POSITION_OUT_OF_RANGE
    assert snapshot_answer(h, fetch_snapshot(0, epoch=1)).error is ErrorCode.FENCED_LEADER_EPOCH
    resp = snapshot_answer(h, fetch_snapshot(0, epoch=3))
    assert resp.error is ErrorCode.UNKNOWN_LEADER_EPOCH
    assert resp.leader_id == 1 and resp.leader_epoch == 2


def test_only_the_leader_serves_snapshots() -> None:
    h = Harness(log=build_log([(1, 3)]), snapshots=MemorySnapshots())
    resp = snapshot_answer(h, fetch_snapshot(0, epoch=int(h.view.epoch)))
    assert resp.error is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_replica_without_snapshots_answers_snapshot_not_found() -> None:
    h = Harness(log=build_log([(1, 3)]))
    stand(h)
    for v in (2, 3):
        if h.view.state is S.CANDIDATE:
            h.recv(v, VoteResponse(ErrorCode.NONE, NodeId(-1), h.view.epoch, True))
    resp = snapshot_answer(h, fetch_snapshot(0, epoch=int(h.view.epoch)))
    assert resp.error is ErrorCode.SNAPSHOT_NOT_FOUND
