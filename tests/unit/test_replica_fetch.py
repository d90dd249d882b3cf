"""Followers and observers: Fetch, divergence and truncation, HWM, fetch timeout."""

from __future__ import annotations

from replica_harness import CLUSTER, Harness, build_log, key, of, sent

from kraft.core.effects import (
    ActionTaken,
    AppendToLog,
    ElectionState,
    FlushLog,
    HighWatermarkMoved,
    StateChanged,
    TruncateLog,
)
from kraft.core.events import SendFailed, Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    VoteRequest,
)
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import NO_NODE, Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.records import encode_batch

S = ReplicaState


def follower(log=((1, 2),), epoch: int = 2, leader: int = 2, node: int = 1, **cfg) -> Harness:
    return Harness(
        node=node,
        log=build_log(list(log)),
        election=ElectionState(Epoch(epoch), leader_id=NodeId(leader)),
        **cfg,
    )


def the_fetch(effects) -> FetchRequest:
    [(_, req)] = sent(effects, FetchRequest)
    return req


def ok(epoch: int, hwm: int, records: bytes = b"", leader: int = 2, **kw) -> FetchResponse:
    return FetchResponse(
        ErrorCode.NONE, NodeId(leader), Epoch(epoch), Offset(hwm), Offset(0), records=records, **kw
    )


def test_follower_fetches_from_its_end_with_last_epoch() -> None:
    """ "they also indicate the epoch of the last offset that they have in their local log (we
    refer to this as the "fetch epoch")\""""
    h = follower(log=((1, 2), (2, 1)))
    [(dst, req)] = sent(h.start_effects, FetchRequest)
    assert dst == 2
    assert (req.fetch_offset, req.last_fetched_epoch, req.replica_epoch) == (3, 2, 2)
    assert ActionTaken(Action.SEND_FETCH_REQUEST) in h.start_effects


def test_follower_appends_flushes_and_fetches_again() -> None:
    h = follower()
    data = encode_batch(2, 2, [b"a", b"b"], timestamp_ms=0)
    effects = h.recv(2, ok(2, 3, data))
    [append] = of(effects, AppendToLog)
    assert (append.first_offset, append.last_offset, append.epoch) == (2, 3, 2)
    assert not append.leader_encoded  # fetched bytes: the log validates every batch
    kinds = [type(e) for e in effects]
    assert kinds.index(AppendToLog) < kinds.index(FlushLog)
    assert h.view.end_offset == 4 and h.view.last_epoch == 2
    # HWM = min(leader HWM, own end offset)
    assert h.view.high_watermark == 3
    assert HighWatermarkMoved(Offset(3)) in effects
    nxt = the_fetch(effects)
    assert (nxt.fetch_offset, nxt.last_fetched_epoch) == (4, 2)


def test_follower_hwm_capped_by_own_end_offset() -> None:
    h = follower()
    h.recv(2, ok(2, 10))
    assert h.view.high_watermark == 2


def test_stale_response_is_ignored() -> None:
    """The batch base offset must equal our end offset, else the response is stale."""
    h = follower()
    data = encode_batch(1, 1, [b"old"], timestamp_ms=0)
    effects = h.recv(2, ok(2, 0, data))
    assert not of(effects, AppendToLog)
    assert h.view.end_offset == 2


def test_response_to_an_old_request_is_ignored() -> None:
    h = follower()
    old = FetchRequest(CLUSTER, key(1), Epoch(2), Offset(0), Epoch(0), Offset(0))
    effects = h.recv(
        2, ok(2, 0, diverging_epoch=OffsetAndEpoch(Epoch(0), Offset(0))), in_reply_to=old
    )
    assert not of(effects, TruncateLog)


def test_divergence_truncates_and_refetches() -> None:
    """ "A follower handles this by attempt to truncate to the next offset specified in the
    response.\" Truncation is to min(diverging end offset, our end offset for that epoch)."""
    h = follower(log=((1, 2), (2, 3)), epoch=3, leader=2)  # epochs 1:[0,2) 2:[2,5)
    effects = h.recv(2, ok(3, 0, diverging_epoch=OffsetAndEpoch(Epoch(1), Offset(3))))
    assert of(effects, TruncateLog) == [TruncateLog(Offset(2))]  # our epoch 1 ends at 2
    assert (h.view.end_offset, h.view.last_epoch) == (2, 1)
    req = the_fetch(effects)
    assert (req.fetch_offset, req.last_fetched_epoch) == (2, 1)
    # the leader's epoch 2 ended earlier than ours: its end offset wins
    h2 = follower(log=((1, 2), (2, 1), (2, 2)), epoch=3, leader=2)
    effects = h2.recv(2, ok(3, 0, diverging_epoch=OffsetAndEpoch(Epoch(2), Offset(3))))
    assert of(effects, TruncateLog) == [TruncateLog(Offset(3))]
    assert h2.log.end_offset == 3 and h2.view.end_offset == 3


def test_truncation_never_goes_below_hwm() -> None:
    h = follower(log=((1, 2), (2, 3)), epoch=3)
    h.recv(2, ok(3, 5))
    assert h.view.high_watermark == 5
    effects = h.recv(2, ok(3, 5, diverging_epoch=OffsetAndEpoch(Epoch(1), Offset(2))))
    assert not of(effects, TruncateLog)


def test_voter_follower_fetch_timeout_starts_election() -> None:
    """ "For voters this also serves as a liveness check of the leader.\"

    The timeout is the fetch timeout plus a jitter below half an election timeout (1000 ms by
    default): never earlier than 2000 ms after the last answer, never later than 2499 ms."""
    h = follower(fetch_timeout_ms=2000)
    effects = h.step(Tick(1999))
    assert h.view.state is S.FOLLOWER
    h.recv(2, ok(2, 0))  # a successful answer at 1999 resets the timer
    h.step(Tick(3998))
    assert h.view.state is S.FOLLOWER
    effects = h.step(Tick(1999 + 2000 + 499))
    assert h.view.state is S.PROSPECTIVE and h.view.epoch == 2 and h.view.leader_id == 2
    assert ActionTaken(Action.ELECTION_TIMEOUT) in effects
    assert {r.pre_vote for _, r in sent(effects, VoteRequest)} == {True}
    assert len(sent(effects, VoteRequest)) == 2


def _fetch_timeout_of(seed: int) -> int:
    """The first tick at which a follower with this rng seed stands for election."""
    h = Harness(node=1, election=ElectionState(Epoch(2), leader_id=NodeId(2)), seed=seed)
    lo, hi = 2000, 2000 + 500
    for t in range(lo - 1, hi + 1):
        h.step(Tick(t))
        if h.view.state is S.PROSPECTIVE:
            return t
    raise AssertionError("no election within the jittered fetch timeout")


def test_followers_of_a_dead_leader_stand_at_different_times() -> None:
    """Deviation from Kafka (README): the fetch timeout is jittered, as Raft randomizes follower
    timeouts, so that the followers of a dead leader do not split the vote in one epoch."""
    timeouts = {_fetch_timeout_of(seed) for seed in range(8)}
    assert all(2000 <= t < 2500 for t in timeouts)
    assert len(timeouts) >= 4


def test_observer_fetch_timeout_keeps_the_leader_and_asks_the_voters() -> None:
    """Kafka's pollFollowerAsObserver: an observer whose fetch timeout expired stays the
    Follower of its epoch's leader (no Follower -> Unattached in one epoch) and sends its
    Fetch to the leader and the voters in turn, without long polling."""
    h = follower(node=4, fetch_timeout_ms=2000, retry_backoff_ms=20)
    effects = h.step(Tick(2000))
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.FOLLOWER, 2, 2)
    assert not of(effects, StateChanged)
    asked = []
    for _ in range(3):
        [(dst, req)] = sent(effects, FetchRequest)
        assert req.max_wait_ms == 0 and req.replica_epoch == 2
        asked.append(dst)
        # A voter that follows the same leader knows no more: the next one is asked.
        effects = h.recv(
            dst,
            FetchResponse(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, NodeId(2), Epoch(2), Offset(-1), Offset(0)
            ),
        )
        assert not sent(effects, FetchRequest)
        effects = h.tick()
        assert h.view.state is S.FOLLOWER and h.view.leader_id == 2
    assert sorted(asked) == [1, 2, 3]


def test_a_silent_leader_that_answers_again_is_followed_with_long_polls() -> None:
    h = follower(node=4, fetch_timeout_ms=2000, fetch_max_wait_ms=500)
    effects = h.step(Tick(2000))
    while True:
        [(dst, req)] = sent(effects, FetchRequest)
        if dst == 2:
            break
        not_leader = ErrorCode.NOT_LEADER_OR_FOLLOWER
        effects = h.recv(dst, FetchResponse(not_leader, NodeId(2), Epoch(2), Offset(-1), Offset(0)))
        effects = h.tick()
    effects = h.recv(2, ok(2, 0), req)
    [(dst, again)] = sent(effects, FetchRequest)
    assert (dst, again.max_wait_ms) == (2, 500)


def test_observer_asking_the_voters_moves_to_the_epoch_an_answer_names() -> None:
    h = follower(node=4, fetch_timeout_ms=2000)
    [(dst, _)] = sent(h.step(Tick(2000)), FetchRequest)
    resp = FetchResponse(ErrorCode.FENCED_LEADER_EPOCH, NodeId(3), Epoch(5), Offset(-1), Offset(0))
    effects = h.recv(dst, resp)
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.FOLLOWER, 5, 3)
    [(dst2, req)] = sent(effects, FetchRequest)
    assert dst2 == 3 and req.max_wait_ms > 0


def test_observer_discovers_leader_from_any_voter() -> None:
    h = Harness(node=4)
    [(dst, _)] = sent(h.start_effects, FetchRequest)
    resp = FetchResponse(ErrorCode.FENCED_LEADER_EPOCH, NodeId(3), Epoch(5), Offset(-1), Offset(0))
    effects = h.recv(dst, resp)
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.FOLLOWER, 5, 3)
    [(dst2, _)] = sent(effects, FetchRequest)
    assert dst2 == 3


def test_higher_epoch_in_response_moves_receiver() -> None:
    """ "any response carrying a higher epoch moves the receiver to that epoch\""""
    h = follower()
    h.recv(
        2, FetchResponse(ErrorCode.FENCED_LEADER_EPOCH, NO_NODE, Epoch(4), Offset(-1), Offset(0))
    )
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.UNATTACHED, 4, None)


def test_error_response_is_retried_after_backoff() -> None:
    h = follower(retry_backoff_ms=20)
    h.now = 5
    effects = h.recv(
        2,
        FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, NodeId(2), Epoch(2), Offset(-1), Offset(0)),
    )
    assert not sent(effects, FetchRequest)
    assert h.replica.next_deadline_ms() == 25
    assert sent(h.step(Tick(25)), FetchRequest)


def test_unreachable_leader_is_retried_after_backoff() -> None:
    h = follower(retry_backoff_ms=20)
    req = the_fetch(h.start_effects)
    h.step(SendFailed(3, NodeId(2), req))
    assert h.replica.next_deadline_ms() == 23


def test_unanswered_fetch_is_resent_after_request_timeout() -> None:
    h = follower(request_timeout_ms=300, fetch_timeout_ms=2000)
    assert sent(h.step(Tick(300)), FetchRequest)


def test_begin_quorum_epoch_makes_a_follower() -> None:
    """ "As soon as a broker accepts a BeginQuorumEpoch request, it will transition to a
    follower state and begin sending FetchQuorumRecords requests to the new leader.\""""
    h = Harness(election=ElectionState(Epoch(1)))
    effects = h.recv(3, BeginQuorumEpochRequest(CLUSTER, NodeId(3), Epoch(2)))
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.FOLLOWER, 2, 3)
    [(_, resp)] = sent(effects, BeginQuorumEpochResponse)
    assert resp == BeginQuorumEpochResponse(ErrorCode.NONE, NodeId(3), Epoch(2))
    assert [d for d, _ in sent(effects, FetchRequest)] == [3]


def test_begin_quorum_epoch_rejections() -> None:
    """ "If the epoch is less than the known epoch, the request is rejected." and "if the
    leaderId for epoch 5 was known to be A, then a voter will reject a BeginQuorumEpoch request
    from a separate voter B from the same epoch.\""""
    h = follower(epoch=5, leader=2)
    [(_, old)] = sent(
        h.recv(3, BeginQuorumEpochRequest(CLUSTER, NodeId(3), Epoch(4))), BeginQuorumEpochResponse
    )
    assert old.error is ErrorCode.FENCED_LEADER_EPOCH and old.leader_id == 2
    [(_, other)] = sent(
        h.recv(3, BeginQuorumEpochRequest(CLUSTER, NodeId(3), Epoch(5))), BeginQuorumEpochResponse
    )
    assert other.error is not ErrorCode.NONE
    assert h.view.leader_id == 2


def test_corrupt_records_are_not_appended() -> None:
    h = follower()
    data = bytearray(encode_batch(2, 2, [b"a"], timestamp_ms=0))
    data[-1] ^= 0xFF
    assert not of(h.recv(2, ok(2, 0, bytes(data))), AppendToLog)


def test_truncation_inside_a_batch_drops_the_whole_batch() -> None:
    """Batches of one epoch are identical everywhere, so a diverging end offset inside one of
    our batches means the whole batch is not on the leader's log (it may take more rounds:
    "it may take multiple rounds of FetchQuorumRecords in order to find the first offset that
    diverges\")."""
    h = follower(log=((1, 4), (3, 2)), epoch=4)  # epoch 1: one batch [0, 4)
    effects = h.recv(2, ok(4, 0, diverging_epoch=OffsetAndEpoch(Epoch(2), Offset(2))))
    assert of(effects, TruncateLog) == [TruncateLog(Offset(0))]
    assert (h.view.end_offset, h.log.end_offset) == (0, 0)
