"""KIP-630 answers on both sides of a FetchSnapshot transfer, in corners the simulator's sweep
rarely draws (its checkers: refinement.invariants_answers, AnswerEpochAdopted and
UndecidedAppendHeld, and refinement.invariants_snapshot_transfer):

- a leader serves exactly the bytes asked for, from the position asked, down to one byte
  (Kafka's handleFetchSnapshotRequest slices min(MaxBytes, size) bytes from the position);
  MaxBytes 0 gets an empty chunk without error, as Kafka's slice; a negative MaxBytes is
  INVALID_REQUEST (Kafka's slice throws out of its handler: README, deviations);
- a Fetch answer naming a snapshot the follower refuses (one ending below its high watermark,
  of an epoch past its own, with a negative epoch, the bootstrap checkpoint) is handled as an
  unsuccessful answer: the follower fetches again quorum.retry.backoff.ms later, as Kafka's
  request manager backs off after a response it could not handle;
- a chunk answer saying the request's epoch is stale (FENCED_LEADER_EPOCH, naming the new
  leader and epoch) moves the follower to that epoch as the new leader's follower, and the
  transfer is dropped (Kafka's maybeHandleCommonResponse, then FollowerState.close);
- a deposed leader that installs a fetched snapshot over the appends it accepted and never
  committed reports each of them lost in the step that installs it (kraft.core.commits: the
  log no longer holds them).
"""

from __future__ import annotations

from memory_logs import key
from scenario_harness import CLUSTER, Cluster, Recording, committed, elect

from kraft.core.effects import (
    AppendCommitted,
    AppendLost,
    AppendResult,
    DiscardSnapshotFetch,
    InstallSnapshot,
    Send,
)
from kraft.core.events import CreateSnapshot, Receive
from kraft.core.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from kraft.core.snapshots import UNKNOWN_SNAPSHOT
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.storage.memory_snapshots import MemorySnapshots

S = ReplicaState
RETRY_BACKOFF_MS = 20  # quorum.retry.backoff.ms (Kafka's default)


def _snaps(c: Cluster, i: int) -> MemorySnapshots:
    snaps = c.nodes[i].snaps
    assert snaps is not None
    return snaps


def _leader_with_snapshot(c: Cluster) -> tuple[int, OffsetAndEpoch]:
    lead = elect(c)
    committed(c, lead, 6)
    hwm = c.view(lead).high_watermark
    assert hwm is not None
    c.step(lead, CreateSnapshot(c.now, hwm))
    c.run(c.now + 5)
    [sid] = [s for s in _snaps(c, lead).complete if s.offset == hwm]
    return lead, sid


def _fetch_snapshot(
    c: Cluster, lead: int, follower: int, sid: OffsetAndEpoch, position: int, max_bytes: int
) -> FetchSnapshotResponse:
    """The leader's answer to the follower's FetchSnapshot, in the leader's epoch."""
    req = FetchSnapshotRequest(
        cluster_id=CLUSTER,
        replica=key(follower),
        replica_epoch=c.view(lead).epoch,
        snapshot_id=sid,
        position=position,
        max_bytes=max_bytes,
    )
    effects = c.step(lead, Receive(c.now, NodeId(follower), req))
    [answer] = [
        e.message
        for e in effects
        if isinstance(e, Send) and isinstance(e.message, FetchSnapshotResponse)
    ]
    return answer


def test_a_leader_serves_exactly_the_bytes_asked_for_down_to_one() -> None:
    c = Cluster(3, seed=41, snapshots=True)
    lead, sid = _leader_with_snapshot(c)
    data = bytes(_snaps(c, lead).complete[sid])
    size = len(data)
    follower = next(i for i in c.nodes if i != lead)
    for position in (0, 1, size // 2, size - 2, size - 1):
        for max_bytes in (1, 2, 3, 17, size, size + 5):
            answer = _fetch_snapshot(c, lead, follower, sid, position, max_bytes)
            want = data[position : position + min(max_bytes, size - position)]
            assert answer.error is ErrorCode.NONE, (position, max_bytes)
            assert (answer.snapshot_id, answer.position, answer.size) == (sid, position, size)
            assert bytes(answer.chunk) == want, (position, max_bytes, len(answer.chunk))


def test_a_fetch_snapshot_for_no_bytes_gets_an_empty_chunk_and_a_negative_one_is_refused() -> None:
    c = Cluster(3, seed=41, snapshots=True)
    lead, sid = _leader_with_snapshot(c)
    size = len(_snaps(c, lead).complete[sid])
    follower = next(i for i in c.nodes if i != lead)
    before = c.view(lead)
    answers = {m: _fetch_snapshot(c, lead, follower, sid, 1, m) for m in (0, -1, -(2**31))}
    # The forged requests change nothing the leader holds or has committed.
    after = c.view(lead)
    assert (after.epoch, after.end_offset, after.high_watermark) == (
        before.epoch,
        before.end_offset,
        before.high_watermark,
    )
    assert sid in _snaps(c, lead).complete
    empty = answers[0]
    assert empty.error is ErrorCode.NONE
    assert (empty.snapshot_id, empty.position, empty.size) == (sid, 1, size)
    assert bytes(empty.chunk) == b""
    for max_bytes in (-1, -(2**31)):
        refused = answers[max_bytes]
        assert refused.error is ErrorCode.INVALID_REQUEST, max_bytes
        assert (refused.snapshot_id, refused.size, bytes(refused.chunk)) == (
            UNKNOWN_SNAPSHOT,
            0,
            b"",
        )


def test_a_refused_snapshot_id_is_an_unsuccessful_answer_fetch_again_after_the_backoff() -> None:
    c = Recording(3, observers=1, seed=43, snapshots=True)
    lead = elect(c)
    committed(c, lead, 6)
    c.run_until(lambda: c.view(4).high_watermark == c.view(lead).high_watermark)
    epoch = c.view(lead).epoch
    hwm = c.view(4).high_watermark
    assert hwm is not None and hwm > 2
    for bad in (
        OffsetAndEpoch(epoch, Offset(hwm - 1)),  # ends below its HWM: would take it back
        OffsetAndEpoch(Epoch(epoch + 1), Offset(hwm + 3)),  # no leader of its epoch holds it
        OffsetAndEpoch(Epoch(-1), Offset(hwm + 3)),  # a negative epoch
        OffsetAndEpoch(Epoch(0), Offset(0)),  # the bootstrap checkpoint: never replicated
    ):
        c.run(c.now + 50)  # its Fetch is in flight (a long poll the leader holds)
        answer = FetchResponse(
            ErrorCode.NONE, NodeId(lead), epoch, Offset(hwm), Offset(0), snapshot_id=bad
        )
        at = c.now
        c.sent.clear()
        c.step(4, Receive(at, NodeId(lead), answer))
        c.run(at + RETRY_BACKOFF_MS)
        mine = [(t, m) for t, src, dst, m in c.sent if src == 4 and dst == lead]
        assert not [m for _, m in mine if isinstance(m, FetchSnapshotRequest)], bad
        fetched = [t for t, m in mine if isinstance(m, FetchRequest)]
        assert fetched == [at + RETRY_BACKOFF_MS], (bad, at, fetched)
        assert c.view(4).state is S.FOLLOWER and c.view(4).leader_id == lead


def test_a_fenced_chunk_answer_moves_the_follower_to_the_new_epoch_and_ends_the_transfer() -> None:
    c = Recording(3, observers=1, seed=47, snapshots=True, fetch_max_bytes=24)
    c.isolate(4)
    c.run_until(
        lambda: c.leader() is not None and all(c.view(i).leader_id == c.leader() for i in (1, 2, 3))
    )
    lead = c.leader()
    assert lead is not None
    committed(c, lead, 12)
    c.run(c.now + 3000)
    hwm = c.view(lead).high_watermark
    assert hwm is not None
    c.step(lead, CreateSnapshot(c.now, hwm))
    c.run_until(lambda: c.view(lead).log_start_offset == hwm)
    [sid] = [s for s in _snaps(c, lead).complete if s.offset == hwm]
    size = len(_snaps(c, lead).complete[sid])
    c.heal()
    parts = _snaps(c, 4).parts
    c.run_until(lambda: sid in parts and 0 < len(parts[sid]) < size, step_ms=1)
    epoch = c.view(4).epoch
    other = next(i for i in (1, 2, 3) if i != lead)
    fenced = FetchSnapshotResponse(
        ErrorCode.FENCED_LEADER_EPOCH,
        NodeId(other),
        Epoch(epoch + 1),
        UNKNOWN_SNAPSHOT,
        size=0,
        position=0,
    )
    effects = c.step(4, Receive(c.now, NodeId(lead), fenced))
    v = c.view(4)
    assert (v.state, v.epoch, v.leader_id) == (S.FOLLOWER, epoch + 1, other)
    assert DiscardSnapshotFetch(sid) in effects
    assert sid not in parts


def test_a_deposed_leader_installing_a_snapshot_reports_its_uncommitted_appends_lost() -> None:
    c = Recording(3, seed=53, snapshots=True)
    old = elect(c)
    committed(c, old, 3)
    c.isolate(old)
    accepted = [  # accepted one by one, never replicated
        rid
        for rid in range(100, 130)
        for e in c.append(old, f"lost{rid}".encode(), request_id=rid)
        if isinstance(e, AppendResult) and e.error is ErrorCode.NONE
    ]
    assert len(accepted) == 30
    others = [i for i in c.nodes if i != old]
    c.run_until(lambda: any(c.view(i).state is S.LEADER for i in others))
    new = next(i for i in others if c.view(i).state is S.LEADER)
    committed(c, new, 3)
    hwm = c.view(new).high_watermark
    assert hwm is not None
    c.step(new, CreateSnapshot(c.now, hwm))
    c.run_until(lambda: c.view(new).log_start_offset == hwm)
    c.heal()
    installed = lambda: any(isinstance(e, InstallSnapshot) for _, e in c.effects[old])  # noqa: E731
    c.run_until(installed, step_ms=1)
    at = next(t for t, e in c.effects[old] if isinstance(e, InstallSnapshot))
    decided = {
        e.request_id: type(e)
        for t, e in c.effects[old]
        if t <= at and isinstance(e, AppendCommitted | AppendLost)
    }
    assert all(decided.get(rid) is AppendLost for rid in accepted), (hwm, decided)
