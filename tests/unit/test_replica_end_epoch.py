"""Graceful resignation with EndQuorumEpoch (KIP-595 "EndQuorumEpoch")."""

from __future__ import annotations

from replica_harness import CLUSTER, Harness, of, sent
from test_replica_leader import fetch, leader

from kraft.core.effects import (
    ActionTaken,
    AppendResult,
    ElectionState,
    ShutdownComplete,
    StateChanged,
)
from kraft.core.events import ClientAppend, SendFailed, Shutdown, Tick
from kraft.core.messages import (
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchResponse,
    VoteRequest,
)
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId

S = ReplicaState


def test_leader_resigns_with_successors_by_replicated_offset() -> None:
    """ "Inside each request, leader will define the list of preferred successors sorted by each
    voter's current replicated offset in descending order.\""""
    h = leader(voters=(1, 2, 3, 4))
    h.recv(3, fetch(3, 2, 3, 2))
    h.recv(2, fetch(2, 2, 2, 1))
    effects = h.step(Shutdown(h.now))
    assert ActionTaken(Action.RESIGN) in effects
    assert StateChanged(S.LEADER, S.RESIGNED, Epoch(2)) in effects
    ends = sent(effects, EndQuorumEpochRequest)
    assert sorted(d for d, _ in ends) == [2, 3, 4]
    assert {r.preferred_successors for _, r in ends} == {(3, 2, 4)}
    assert {(r.leader_id, r.leader_epoch) for _, r in ends} == {(1, 2)}
    assert not of(effects, ShutdownComplete)
    # resigned: no more appends
    [res] = of(h.step(ClientAppend(h.now, ((None, b"x"),))), AppendResult)
    assert res.error is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_shutdown_completes_after_all_answers() -> None:
    h = leader()
    effects = h.step(Shutdown(h.now))
    [(_, req2), _] = sent(effects, EndQuorumEpochRequest)
    assert not of(
        h.recv(2, EndQuorumEpochResponse(ErrorCode.NONE, NodeId(1), Epoch(2))), ShutdownComplete
    )
    # an unreachable voter is not retried: "the leader will shutdown without retrying"
    done = h.step(SendFailed(h.now, NodeId(3), req2))
    assert of(done, ShutdownComplete)


def test_shutdown_completes_after_a_bounded_time() -> None:
    h = leader(request_timeout_ms=700)
    t = h.now
    h.step(Shutdown(t))
    assert of(h.step(Tick(t + 700)), ShutdownComplete)


def test_non_leader_shuts_down_at_once() -> None:
    h = Harness()
    assert of(h.step(Shutdown(0)), ShutdownComplete)


def end_request(successors: tuple[int, ...], epoch: int = 2) -> EndQuorumEpochRequest:
    return EndQuorumEpochRequest(
        CLUSTER, NodeId(2), Epoch(epoch), tuple(NodeId(s) for s in successors)
    )


def follower_of_2(node: int = 1, **cfg) -> Harness:
    return Harness(
        node=node, voters=(1, 2, 3, 4), election=ElectionState(Epoch(2), leader_id=NodeId(2)), **cfg
    )


def test_first_successor_stands_at_once() -> None:
    """ "If the node's priority is highest, it will become candidate immediately instead of
    waiting for next poll." Kafka 4.x sets the first successor's fetch timer to zero: its very
    next tick is the ElectionTimeout that makes it Prospective (pre-vote first)."""
    h = follower_of_2()
    effects = h.recv(2, end_request((1, 3, 4)))
    assert ActionTaken(Action.HANDLE_END_QUORUM_EPOCH_REQUEST) in effects
    [(_, resp)] = sent(effects, EndQuorumEpochResponse)
    assert resp.error is ErrorCode.NONE
    assert h.replica.next_deadline_ms() == h.now
    effects = h.tick()
    assert (h.view.state, h.view.epoch) == (S.PROSPECTIVE, 2)
    assert ActionTaken(Action.ELECTION_TIMEOUT) in effects
    assert h.stored == ElectionState(Epoch(2), NodeId(2), None)  # nothing new persisted
    assert {r.pre_vote for _, r in sent(effects, VoteRequest)} == {True}
    assert len(sent(effects, VoteRequest)) == 3


def test_later_successors_wait_exponential_backoff() -> None:
    """ "For a successor with priority N > 0, the next election timeout will be computed as:
    MIN(retryBackOffMaxMs, retryBackoffMs * 2^(N - 1))\""""
    for n, expected in [(1, 20), (2, 40), (3, 80)]:
        order = [3, 4, 5, 6]
        order.insert(n, 1)
        h = Harness(
            voters=(1, 2, 3, 4, 5, 6),
            election=ElectionState(Epoch(2), leader_id=NodeId(2)),
            retry_backoff_ms=20,
            election_backoff_max_ms=60,
            request_timeout_ms=5000,
        )
        h.now = 10
        h.recv(2, end_request(tuple(order)))
        assert h.view.state is S.FOLLOWER
        wait = min(60, expected)
        h.step(Tick(10 + wait - 1))
        assert h.view.state is S.FOLLOWER
        h.step(Tick(10 + wait))
        assert h.view.state is S.PROSPECTIVE, n


def test_not_in_successors_is_inconsistent_voter_set() -> None:
    """ "Then the voter will check whether it is inside the given preferred successors. If not,
    return INCONSISTENT_VOTER_SET.\""""
    h = follower_of_2()
    [(_, resp)] = sent(h.recv(2, end_request((3, 4))), EndQuorumEpochResponse)
    assert resp.error is ErrorCode.INCONSISTENT_VOTER_SET
    assert h.view.state is S.FOLLOWER


def test_end_epoch_with_older_epoch_is_fenced() -> None:
    """ "If the epoch is smaller than the last known epoch ... the request is rejected.\""""
    h = Harness(voters=(1, 2, 3, 4), election=ElectionState(Epoch(5), leader_id=NodeId(3)))
    [(_, resp)] = sent(h.recv(2, end_request((1,), epoch=4)), EndQuorumEpochResponse)
    assert resp.error is ErrorCode.FENCED_LEADER_EPOCH
    assert (resp.leader_id, resp.leader_epoch) == (3, 5)
    assert h.view.state is S.FOLLOWER


def test_resigned_leader_answers_fetches_as_not_leader() -> None:
    h = leader()
    h.step(Shutdown(h.now))
    [(_, resp)] = sent(h.recv(2, fetch(2, 2, 3, 2)), FetchResponse)
    assert resp.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (resp.leader_id, resp.leader_epoch) == (1, 2)
