"""The leader: BeginQuorumEpoch, Fetch handling, the high watermark, client appends."""

from __future__ import annotations

from replica_harness import CLUSTER, Harness, build_log, key, of, sent, stand

from kraft.core.effects import (
    ActionTaken,
    AppendResult,
    AppendToLog,
    ElectionState,
    FlushLog,
    HighWatermarkMoved,
)
from kraft.core.events import ClientAppend, SendFailed, Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    VoteResponse,
)
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.records import iter_batches

S = ReplicaState


def leader(voters=(1, 2, 3), log=((1, 2),), epoch: int = 1, **cfg) -> Harness:
    """Node 1 elected leader in epoch+1 over a log with the given (epoch, n) batches."""
    h = Harness(
        voters=voters, log=build_log(list(log)), election=ElectionState(Epoch(epoch)), **cfg
    )
    stand(h)
    for v in voters[1:]:
        if h.view.state is S.CANDIDATE:
            h.recv(v, VoteResponse(ErrorCode.NONE, NodeId(-1), Epoch(epoch + 1), True))
    assert h.view.state is S.LEADER
    return h


def fetch(
    src: int, epoch: int, offset: int, last_epoch: int, *, wait: int = 0, cluster: str = CLUSTER
) -> FetchRequest:
    return FetchRequest(
        ClusterId(cluster),
        key(src),
        Epoch(epoch),
        Offset(offset),
        Epoch(last_epoch),
        Offset(0),
        max_wait_ms=wait,
    )


def reply(effects) -> FetchResponse:
    [(_, resp)] = sent(effects, FetchResponse)
    return resp


def test_begin_quorum_epoch_resent_to_voters_that_do_not_fetch() -> None:
    """ "The leader will continue sending BeginQuorumEpoch to each known voter until it has
    received its endorsement." As Kafka 4.3 does it (LeaderState's beginQuorumEpochTimer):
    every fetch timeout / 2, to each voter that has not fetched within it, an answer or
    not."""
    h = leader(request_timeout_ms=500, retry_backoff_ms=20)
    t0 = h.now
    assert h.replica.next_deadline_ms() == t0 + 1000  # fetch timeout 2000 / 2
    effects = h.step(Tick(t0 + 1000))
    assert sorted(d for d, _ in sent(effects, BeginQuorumEpochRequest)) == [2, 3]
    h.now = t0 + 1000
    effects = h.recv(2, BeginQuorumEpochResponse(ErrorCode.NONE, NodeId(1), Epoch(2)))
    assert ActionTaken(Action.HANDLE_BEGIN_QUORUM_EPOCH_RESPONSE) in effects
    assert not sent(effects, BeginQuorumEpochRequest)
    # Voter 2 answered but does not fetch: it is asked again at the next round.
    effects = h.step(Tick(t0 + 2000))
    assert sorted(d for d, _ in sent(effects, BeginQuorumEpochRequest)) == [2, 3]
    # an unreachable voter backs off, but is asked again only at a round
    [req] = [r for d, r in sent(effects, BeginQuorumEpochRequest) if d == 3]
    h.step(SendFailed(t0 + 2000, NodeId(3), req))
    assert h.replica.next_deadline_ms() == t0 + 3000


def test_fetch_in_new_epoch_counts_as_endorsement() -> None:
    """ "An endorsement from an existing voter may also be inferred through a received
    FetchQuorumRecords request with the new leader's epoch\""""
    h = leader(request_timeout_ms=500)
    t0 = h.now
    h.now = t0 + 500
    h.recv(2, fetch(2, 2, 2, 1))
    h.recv(3, fetch(3, 2, 2, 1))
    # The round of t0 + 1000 (fetch timeout / 2) asks no voter that fetched within 1000 ms.
    effects = h.step(Tick(t0 + 1000))
    assert h.view.state is S.LEADER
    assert not sent(effects, BeginQuorumEpochRequest)
    effects = h.step(Tick(t0 + 2000))
    assert sorted(d for d, _ in sent(effects, BeginQuorumEpochRequest)) == [2, 3]


def test_fetch_returns_records_and_hwm_piggybacked() -> None:
    """ "We piggyback current leader and epoch information on all responses.\""""
    h = leader()
    resp = reply(h.recv(2, fetch(2, 2, 0, 0)))
    assert (resp.error, resp.leader_id, resp.leader_epoch) == (ErrorCode.NONE, 1, 2)
    offsets = [(hd.base_offset, hd.partition_leader_epoch) for _, hd in iter_batches(resp.records)]
    assert offsets == [(0, 1), (2, 2)]


def test_diverging_fetch_gets_end_offset_for_epoch() -> None:
    """ "If they do not match, the fetch response will indicate the largest epoch and its end
    offset before the requested epoch.\""""
    h = leader(log=((1, 2), (3, 3)), epoch=3)  # epochs 1:[0,2) 3:[2,5) 4:[5,6)
    # fetcher has epoch 2 at offset 4: our largest epoch <= 2 is 1, ending at 2
    resp = reply(h.recv(2, fetch(2, 4, 4, 2)))
    assert resp.diverging_epoch == OffsetAndEpoch(Epoch(1), Offset(2))
    assert resp.records == b""
    # fetcher claims epoch 3 up to offset 7, but our epoch 3 ends at 5
    resp = reply(h.recv(2, fetch(2, 4, 7, 3)))
    assert resp.diverging_epoch == OffsetAndEpoch(Epoch(3), Offset(5))
    # consistent position: no divergence
    resp = reply(h.recv(2, fetch(2, 4, 4, 3)))
    assert resp.diverging_epoch is None and len(resp.records) > 0


def test_fetch_errors_as_kafka_uses_them() -> None:
    """FENCED_LEADER_EPOCH for an older epoch, UNKNOWN_LEADER_EPOCH for a newer one,
    NOT_LEADER_OR_FOLLOWER at a non-leader, INCONSISTENT_CLUSTER_ID for another cluster."""
    h = leader()
    assert reply(h.recv(2, fetch(2, 1, 0, 0))).error is ErrorCode.FENCED_LEADER_EPOCH
    assert reply(h.recv(2, fetch(2, 3, 0, 0))).error is ErrorCode.UNKNOWN_LEADER_EPOCH
    assert h.view.epoch == 2  # a fetcher's epoch is not a leader's claim: no transition
    bad = reply(h.recv(2, fetch(2, 2, 0, 0, cluster="x")))
    assert bad.error is ErrorCode.INCONSISTENT_CLUSTER_ID
    follower = Harness(election=ElectionState(Epoch(2), leader_id=NodeId(3)))
    resp = reply(follower.recv(4, fetch(4, 2, 0, 0)))
    assert (resp.error, resp.leader_id, resp.leader_epoch) == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        3,
        2,
    )


def test_hwm_needs_majority_and_a_record_of_the_leaders_epoch() -> None:
    """ "The high watermark for the quorum is not advanced until a record from the current
    epoch has been written.\""""
    h = leader(voters=(1, 2, 3, 4, 5), log=((1, 4),))  # epoch 2 starts at offset 4
    assert h.view.high_watermark is None
    h.recv(2, fetch(2, 2, 4, 1))
    h.recv(3, fetch(3, 2, 4, 1))
    # offset 4 is on a majority (1, 2, 3) but it is only the start of epoch 2
    assert h.view.high_watermark is None
    h.recv(2, fetch(2, 2, 5, 2))
    assert h.view.high_watermark is None  # 1 and 2 have 5: not a majority of 5
    effects = h.recv(3, fetch(3, 2, 5, 2))
    assert h.view.high_watermark == 5
    assert HighWatermarkMoved(Offset(5)) in effects
    assert ActionTaken(Action.ADVANCE_HIGH_WATERMARK) in effects


def test_hwm_is_never_lowered() -> None:
    h = leader()
    h.recv(2, fetch(2, 2, 3, 2))
    assert h.view.high_watermark == 3
    # a voter restarted with a shorter log: the exposed HWM stays
    effects = h.recv(2, fetch(2, 2, 1, 1))
    assert h.view.high_watermark == 3
    assert not of(effects, HighWatermarkMoved)


def test_observer_fetches_do_not_count_for_hwm() -> None:
    h = leader()
    h.recv(4, fetch(4, 2, 3, 2))
    assert h.view.high_watermark is None
    [obs] = h.replica.describe_quorum().observers
    assert obs.replica == key(4) and obs.log_end_offset == 3


def test_client_append_is_flushed_before_its_result() -> None:
    h = leader()
    effects = h.step(ClientAppend(h.now, ((None, b"x"), (None, b"y")), request_id=7))
    assert ActionTaken(Action.CLIENT_APPEND) in effects
    [append] = of(effects, AppendToLog)
    assert (append.first_offset, append.last_offset, append.epoch) == (3, 4, 2)
    assert append.leader_encoded  # the log need not re-validate what the core encoded
    kinds = [type(e) for e in effects]
    assert kinds.index(AppendToLog) < kinds.index(FlushLog) < kinds.index(AppendResult)
    [result] = of(effects, AppendResult)
    assert result == AppendResult(7, ErrorCode.NONE, Offset(3), Offset(4), Epoch(2), NodeId(1))


def test_client_append_at_non_leader_names_the_leader() -> None:
    h = Harness(election=ElectionState(Epoch(2), leader_id=NodeId(3)))
    [result] = of(h.step(ClientAppend(0, ((None, b"x"),), 1)), AppendResult)
    assert result.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert result.leader_id == 3


def test_fetch_with_nothing_new_is_held_until_data_arrives() -> None:
    h = leader(fetch_max_wait_ms=500)
    h.recv(2, fetch(2, 2, 3, 2, wait=500))  # moves the HWM: answered at once
    assert not sent(h.recv(3, fetch(3, 2, 3, 2, wait=500)), FetchResponse)
    h.step(ClientAppend(h.now, ((None, b"z"),)))
    effects = h.step(Tick(h.replica.next_deadline_ms()))
    [(dst, resp)] = sent(effects, FetchResponse)
    assert dst == 3 and len(resp.records) > 0


def test_held_fetch_expires_after_max_wait() -> None:
    h = leader()
    h.recv(2, fetch(2, 2, 3, 2, wait=300))
    h.now += 1
    assert not sent(h.recv(3, fetch(3, 2, 3, 2, wait=300)), FetchResponse)
    effects = h.step(Tick(h.now + 300))
    assert [d for d, _ in sent(effects, FetchResponse)] == [3]


def test_describe_quorum_reports_offsets_and_timestamps() -> None:
    """DescribeQuorum: voters and observers with log end offset, last fetch and caught-up
    timestamps."""
    h = leader()
    h.now += 50
    t = h.now
    h.recv(2, fetch(2, 2, 3, 2))
    d = h.replica.describe_quorum()
    assert d is not None and d.leader_id == 1 and d.leader_epoch == 2 and d.high_watermark == 3
    by_id = {r.replica.id: r for r in d.voters}
    assert by_id[2].log_end_offset == 3 and by_id[2].last_fetch_timestamp_ms == t
    assert by_id[2].last_caught_up_timestamp_ms == t
    assert by_id[3].log_end_offset == -1
    assert Harness().replica.describe_quorum() is None


def test_appends_linger_into_one_batch() -> None:
    """With append_linger_ms, client values wait and are written together as one batch."""
    h = leader(append_linger_ms=5)
    t = h.now
    first = h.step(ClientAppend(t, ((None, b"a"),), request_id=1))
    assert not of(first, AppendToLog) and not of(first, AppendResult)
    h.step(ClientAppend(t + 2, ((None, b"b"), (None, b"c")), request_id=2))
    assert h.replica.next_deadline_ms() == t + 5
    effects = h.step(Tick(t + 5))
    [append] = of(effects, AppendToLog)
    assert (append.first_offset, append.last_offset) == (3, 5)
    results = of(effects, AppendResult)
    assert [(r.request_id, r.first_offset, r.last_offset) for r in results] == [
        (1, 3, 3),
        (2, 4, 5),
    ]
    kinds = [type(e) for e in effects]
    assert kinds.index(FlushLog) < kinds.index(AppendResult)


def test_lingering_appends_are_refused_when_leadership_is_lost() -> None:
    h = leader(append_linger_ms=5)
    h.step(ClientAppend(h.now, ((None, b"a"),), request_id=9))
    effects = h.recv(3, VoteResponse(ErrorCode.NONE, NodeId(3), Epoch(7), False))
    assert h.view.state is S.FOLLOWER
    [result] = of(effects, AppendResult)
    assert (result.request_id, result.error, result.leader_id) == (
        9,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        3,
    )
