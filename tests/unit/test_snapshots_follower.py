"""KIP-630 on the fetching side (kraft.core.snapshot_transfer): a Fetch answer naming a
snapshot pauses Fetch; the snapshot comes in chunks by position; the driver validates it and
only then is it installed (log start = end = its end offset), and Fetch resumes from there
with LastFetchedEpoch = its epoch. A lost chunk, a duplicate chunk, a failed validation, a
leader that lost the snapshot and a leader change all leave a consistent replica."""

from __future__ import annotations

from replica_harness import CLUSTER, Harness, build_log, key, of, sent

from kraft.core.effects import (
    ActionTaken,
    AppendToLog,
    DiscardSnapshotFetch,
    ElectionState,
    HighWatermarkMoved,
    InstallSnapshot,
    SnapshotRequired,
    ValidateSnapshot,
    WriteSnapshotChunk,
)
from kraft.core.events import SnapshotValidated, Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteRequest,
    VoteResponse,
)
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.records import encode_batch
from kraft.storage.memory_snapshots import MemorySnapshots, encode_snapshot

S = ReplicaState
SNAP = OffsetAndEpoch(Epoch(2), Offset(100))
DATA = encode_snapshot(SNAP, [(f"k{i}".encode(), b"v" * 40) for i in range(20)])
CHUNK = 300


def follower(**cfg: int) -> Harness:
    """Node 1 follows leader 2 in epoch 2 with two records of epoch 1."""
    return Harness(
        log=build_log([(1, 2)]),
        election=ElectionState(Epoch(2), leader_id=NodeId(2)),
        snapshots=MemorySnapshots(),
        fetch_max_bytes=CHUNK,
        **cfg,
    )


def snapshot_answer(snap: OffsetAndEpoch = SNAP, leader: int = 2, epoch: int = 2) -> FetchResponse:
    return FetchResponse(
        ErrorCode.NONE, NodeId(leader), Epoch(epoch), Offset(150), Offset(100), snapshot_id=snap
    )


def chunk_for(req: FetchSnapshotRequest, data: bytes = DATA) -> FetchSnapshotResponse:
    """The leader's answer: at most max bytes from the position asked for."""
    part = data[req.position : req.position + req.max_bytes]
    return FetchSnapshotResponse(
        ErrorCode.NONE, NodeId(2), Epoch(2), req.snapshot_id, len(data), req.position, part
    )


def one_request(effects: list[object]) -> FetchSnapshotRequest:
    [(dst, req)] = sent(effects, FetchSnapshotRequest)  # type: ignore[arg-type]
    assert dst == 2
    return req


def start_transfer(h: Harness) -> FetchSnapshotRequest:
    effects = h.recv(2, snapshot_answer())
    assert not of(effects, SnapshotRequired) and not of(effects, AppendToLog)
    req = one_request(effects)
    assert req.snapshot_id == SNAP and req.position == 0 and req.replica_epoch == 2
    assert ActionTaken(Action.SEND_FETCH_SNAPSHOT_REQUEST) in effects
    return req


def fetch_all(h: Harness, req: FetchSnapshotRequest) -> list[object]:
    """Answer every chunk request; returns the effects of the last answer."""
    while True:
        effects = h.recv(2, chunk_for(req))
        if of(effects, ValidateSnapshot):
            return effects  # type: ignore[return-value]
        req = one_request(effects)


def test_a_snapshot_is_fetched_in_chunks_validated_then_installed() -> None:
    h = follower()
    req = start_transfer(h)
    effects = h.recv(2, chunk_for(req))
    [w] = of(effects, WriteSnapshotChunk)
    assert (w.snapshot_id, w.position, w.size, bytes(w.data)) == (SNAP, 0, len(DATA), DATA[:CHUNK])
    assert one_request(effects).position == CHUNK
    effects = fetch_all(h, one_request(effects))
    assert of(effects, ValidateSnapshot) == [ValidateSnapshot(SNAP, len(DATA))]
    assert not sent(effects, FetchSnapshotRequest) and not sent(effects, FetchRequest)
    # Validated: nothing changed yet.
    assert h.view.end_offset == 2 and h.view.log_start_offset == 0
    assert h.snapshots is not None and h.snapshots.validate(SNAP, len(DATA)) is None
    effects = h.step(SnapshotValidated(h.now, SNAP, True))
    assert of(effects, InstallSnapshot) == [InstallSnapshot(SNAP)]
    assert ActionTaken(Action.INSTALL_SNAPSHOT) in effects
    assert (h.view.log_start_offset, h.view.end_offset, h.view.last_epoch) == (100, 100, 2)
    assert (h.log.start_offset, h.log.end_offset) == (100, 100)
    assert of(effects, HighWatermarkMoved) == [HighWatermarkMoved(Offset(100))]
    assert h.snapshots.complete[SNAP] == DATA
    # Fetch resumes from the snapshot's end, with its epoch.
    [(dst, fetch)] = sent(effects, FetchRequest)
    assert dst == 2 and fetch.fetch_offset == 100 and fetch.last_fetched_epoch == 2
    # And records after the snapshot append.
    batch = encode_batch(100, 2, [b"after"], timestamp_ms=0)
    resp = FetchResponse(
        ErrorCode.NONE, NodeId(2), Epoch(2), Offset(101), Offset(100), records=batch
    )
    h.recv(2, resp)
    assert h.log.end_offset == 101 and h.view.high_watermark == 101


def test_a_lost_chunk_is_asked_for_again_after_the_request_timeout() -> None:
    h = follower(request_timeout_ms=500)
    req = start_transfer(h)
    effects = h.recv(2, chunk_for(req))
    lost = one_request(effects)  # never answered
    assert not sent(h.step(Tick(h.now + 499)), FetchSnapshotRequest)
    h.now += 500
    again = one_request(h.step(Tick(h.now)))
    assert again.position == lost.position == CHUNK
    effects = fetch_all(h, again)
    assert of(effects, ValidateSnapshot)


def test_a_duplicate_chunk_is_written_once() -> None:
    h = follower()
    req = start_transfer(h)
    first = h.recv(2, chunk_for(req))
    assert len(of(first, WriteSnapshotChunk)) == 1
    dup = h.recv(2, chunk_for(req))
    assert not of(dup, WriteSnapshotChunk) and not sent(dup, FetchSnapshotRequest)
    effects = fetch_all(h, one_request(first))
    assert of(effects, ValidateSnapshot)
    assert h.snapshots is not None and h.snapshots.validate(SNAP, len(DATA)) is None


def test_a_failed_validation_leaves_the_replica_as_it_was_and_starts_over() -> None:
    h = follower()
    fetch_all(h, start_transfer(h))
    effects = h.step(SnapshotValidated(h.now, SNAP, False, reason="bad crc"))
    assert of(effects, DiscardSnapshotFetch) == [DiscardSnapshotFetch(SNAP)]
    assert not of(effects, InstallSnapshot)
    assert (h.view.log_start_offset, h.view.end_offset, h.view.high_watermark) == (0, 2, None)
    # After a backoff: Fetch again from the old log, which names the snapshot again.
    h.now = h.replica.next_deadline_ms()
    [(_, fetch)] = sent(h.step(Tick(h.now)), FetchRequest)
    assert fetch.fetch_offset == 2 and fetch.last_fetched_epoch == 1
    assert start_transfer(h).position == 0
    # A late answer for the abandoned transfer changes nothing.
    assert not of(h.step(SnapshotValidated(h.now, SNAP, True)), InstallSnapshot)


def test_a_corrupt_part_fails_the_memory_validation() -> None:
    """The driver's check (here MemorySnapshots) catches a flipped byte."""
    h = follower()
    req = start_transfer(h)
    bad = bytearray(DATA)
    bad[CHUNK + 70] ^= 0xFF
    while True:
        effects = h.recv(2, chunk_for(req, bytes(bad)))
        if of(effects, ValidateSnapshot):
            break
        req = one_request(effects)
    assert h.snapshots is not None
    problem = h.snapshots.validate(SNAP, len(DATA))
    assert problem is not None and "corrupt" in problem


def test_the_leader_losing_the_snapshot_restarts_from_fetch() -> None:
    h = follower()
    start_transfer(h)
    gone = FetchSnapshotResponse(
        ErrorCode.SNAPSHOT_NOT_FOUND,
        NodeId(2),
        Epoch(2),
        OffsetAndEpoch(Epoch(-1), Offset(-1)),
        0,
        0,
    )
    effects = h.recv(2, gone)
    assert of(effects, DiscardSnapshotFetch) == [DiscardSnapshotFetch(SNAP)]
    [(_, fetch)] = sent(effects, FetchRequest)
    assert fetch.fetch_offset == 2
    newer = OffsetAndEpoch(Epoch(2), Offset(120))
    effects = h.recv(2, snapshot_answer(newer))
    assert one_request(effects).snapshot_id == newer


def test_a_leader_change_mid_transfer_abandons_it() -> None:
    h = follower()
    req = start_transfer(h)
    old = chunk_for(req)
    effects = h.recv(3, BeginQuorumEpochRequest(CLUSTER, NodeId(3), Epoch(3)))
    assert of(effects, DiscardSnapshotFetch) == [DiscardSnapshotFetch(SNAP)]
    assert h.view.leader_id == 3 and h.view.epoch == 3
    [(dst, fetch)] = sent(effects, FetchRequest)
    assert dst == 3 and fetch.fetch_offset == 2  # the old log, untouched
    # The old leader's chunk, arriving late, is not written.
    late = h.recv(2, old)
    assert not of(late, WriteSnapshotChunk) and not sent(late, FetchSnapshotRequest)
    assert h.snapshots is not None and SNAP not in h.snapshots.parts
    assert (h.view.log_start_offset, h.view.end_offset) == (0, 2)


def test_a_leader_change_while_validating_abandons_the_install() -> None:
    h = follower()
    fetch_all(h, start_transfer(h))
    effects = h.recv(3, BeginQuorumEpochRequest(CLUSTER, NodeId(3), Epoch(3)))
    assert of(effects, DiscardSnapshotFetch)
    assert not of(h.step(SnapshotValidated(h.now, SNAP, True)), InstallSnapshot)
    assert (h.view.log_start_offset, h.view.end_offset) == (0, 2)


def test_an_inconsistent_answer_starts_over() -> None:
    """A chunk past the announced size, or a size that changed, cannot belong to the snapshot."""
    h = follower()
    req = start_transfer(h)
    h.recv(2, chunk_for(req))
    shrunk = FetchSnapshotResponse(
        ErrorCode.NONE, NodeId(2), Epoch(2), SNAP, CHUNK + 1, CHUNK, DATA[CHUNK : 2 * CHUNK]
    )
    effects = h.recv(2, shrunk)
    assert of(effects, DiscardSnapshotFetch) and not of(effects, WriteSnapshotChunk)


def test_the_leader_answering_chunks_is_alive() -> None:
    """Each chunk resets the fetch timer (Kafka resetFetchTimeoutForSuccessfulFetch)."""
    h = follower(fetch_timeout_ms=2000, request_timeout_ms=10_000)
    req = start_transfer(h)
    for _ in range(6):
        h.now += 1500
        effects = h.recv(2, chunk_for(req))
        assert h.view.state is S.FOLLOWER
        if of(effects, ValidateSnapshot):
            break
        req = one_request(effects)


def test_a_replica_without_snapshots_still_reports_snapshot_required() -> None:
    h = Harness(log=build_log([(1, 2)]), election=ElectionState(Epoch(2), leader_id=NodeId(2)))
    effects = h.recv(2, snapshot_answer())
    assert of(effects, SnapshotRequired) and not sent(effects, FetchSnapshotRequest)


# ---------------------------------------------------------------- elections


def installed() -> Harness:
    h = follower()
    fetch_all(h, start_transfer(h))
    h.step(SnapshotValidated(h.now, SNAP, True))
    return h


def test_a_candidate_stands_with_its_snapshot_as_its_last_epoch_and_offset() -> None:
    """KIP-630: the latest of the snapshot and the log, when standing."""
    h = installed()
    h.now += 60_000
    effects = h.step(Tick(h.now))  # the leader went silent: pre-vote
    assert h.view.state is S.PROSPECTIVE
    votes = [req for _, req in sent(effects, VoteRequest)]
    assert votes and all((v.last_epoch, v.last_end_offset) == (2, 100) for v in votes)


def test_a_voter_compares_a_candidate_with_its_snapshot() -> None:
    """KIP-630: the latest of the snapshot and the log, when voting: a candidate at the end
    of the old log (epoch 1, offset 2) is behind the snapshot (epoch 2, offset 100)."""
    h = installed()
    behind = VoteRequest(CLUSTER, key(3), Epoch(3), Epoch(1), Offset(500))
    [(_, resp)] = sent(h.recv(3, behind), VoteResponse)
    assert not resp.vote_granted
    level = VoteRequest(CLUSTER, key(3), Epoch(4), Epoch(2), Offset(100))
    [(_, resp)] = sent(h.recv(3, level), VoteResponse)
    assert resp.vote_granted


def test_a_snapshot_id_no_leader_of_our_epoch_can_hold_is_not_fetched() -> None:
    """Kafka: an answer naming a snapshot with a bad id is logged and backed off from."""
    h = follower(retry_backoff_ms=20)
    for bad in (OffsetAndEpoch(Epoch(3), Offset(100)), OffsetAndEpoch(Epoch(2), Offset(0))):
        effects = h.recv(2, snapshot_answer(bad))
        assert not sent(effects, FetchSnapshotRequest) and not sent(effects, FetchRequest)
        h.now = h.replica.next_deadline_ms()
        [(_, fetch)] = sent(h.step(Tick(h.now)), FetchRequest)
        assert fetch.fetch_offset == 2


def test_a_snapshot_ending_below_the_high_watermark_is_not_installed() -> None:
    """Kafka installs a fetched snapshot by truncating the log fully to its end offset, whose
    HWM is then that offset (truncateToLatestSnapshot, UnifiedLog.truncateFullyAndStartAt),
    and refuses to move the follower's HWM down (FollowerState: "Non-monotonic update of high
    watermark"). A snapshot ending below what this follower already committed would lose
    committed records from its log and leave its HWM above its log end: it is not fetched,
    the log and the HWM stay, and Fetch resumes after a backoff."""
    h = Harness(
        log=build_log([(1, 6)]),
        election=ElectionState(Epoch(2), leader_id=NodeId(2)),
        snapshots=MemorySnapshots(),
        fetch_max_bytes=CHUNK,
        retry_backoff_ms=20,
    )
    h.recv(2, FetchResponse(ErrorCode.NONE, NodeId(2), Epoch(2), Offset(5), Offset(0)))
    assert (h.view.end_offset, h.view.high_watermark) == (6, 5)
    low = OffsetAndEpoch(Epoch(1), Offset(3))
    data = encode_snapshot(low, [(b"k", b"v")])
    effects = h.recv(2, snapshot_answer(low))
    # Were it fetched, complete it: the outcome is what matters.
    while reqs := sent(effects, FetchSnapshotRequest):
        [(_, req)] = reqs
        effects = h.recv(2, chunk_for(req, data))
    if of(effects, ValidateSnapshot):
        effects = h.step(SnapshotValidated(h.now, low, True))
    assert not of(effects, InstallSnapshot)
    assert h.view.high_watermark is not None and h.view.high_watermark <= h.view.end_offset
    assert (h.view.log_start_offset, h.view.end_offset, h.view.high_watermark) == (0, 6, 5)
    assert h.log.end_offset == 6
    h.now = h.replica.next_deadline_ms()
    [(_, fetch)] = sent(h.step(Tick(h.now)), FetchRequest)
    assert fetch.fetch_offset == 6 and fetch.last_fetched_epoch == 1
