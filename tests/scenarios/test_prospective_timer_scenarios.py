"""A Prospective's election timer as it leaves the pre-vote (KIP-996), and a Follower's Fetch in
flight when a stray answer arrives.

Kafka's QuorumState.transitionToUnattached keeps the time left on the election timer when a
Prospective whose pre-vote a majority did not reject moves to Unattached (news of a newer epoch
with no leader), and draws a fresh timeout when a majority did reject it (the pre-vote lost).
The simulator's timing checker cannot tell the two apart from outside (it allows both), so the
replica is driven by hand here, under that checker, and the time it stands next is asserted.

A Follower that fetches from its leader and gets an answer from another replica, or of another
epoch, has not been answered: its Fetch is still in flight, and nothing is asked again before
that Fetch is answered or times out.
"""

from __future__ import annotations

from memory_logs import key
from test_retry_timing_scenarios import CLUSTER, EPOCH, LEADER, Solo

from kraft.core.effects import StateChanged
from kraft.core.events import Tick
from kraft.core.messages import FetchRequest, FetchResponse, VoteRequest, VoteResponse
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset

S = ReplicaState


def _prospective() -> tuple[Solo, VoteRequest, int]:
    """Replica 1 of voters {1, 2, 3} after its election timer ran out: Prospective in epoch 0,
    its pre-vote sent; the time its election timer runs out again."""
    s = Solo()
    send = s.tick_until_sent(VoteRequest, limit=5_000)
    assert isinstance(send.message, VoteRequest) and send.message.pre_vote
    assert s.replica.view().state is S.PROSPECTIVE
    return s, send.message, s.replica.next_deadline_ms()


def _stands_at(s: Solo, at: int) -> bool:
    """Tick at `at`: whether the replica stands (becomes Prospective) in that step."""
    effects = s.step(Tick(at))
    return any(isinstance(e, StateChanged) and e.new is S.PROSPECTIVE for e in effects)


def _newer_epoch_without_leader(s: Solo, at: int, src: int, of: VoteRequest) -> None:
    news = VoteResponse(ErrorCode.NONE, NodeId(-1), Epoch(of.candidate_epoch + 1), False)
    s.receive(at, NodeId(src), news, of)
    assert (s.replica.view().state, s.replica.view().epoch) == (
        S.UNATTACHED,
        of.candidate_epoch + 1,
    )


def test_a_prospective_nobody_refused_keeps_its_timer_into_a_newer_epoch() -> None:
    s, pre_vote, deadline = _prospective()
    _newer_epoch_without_leader(s, deadline - 1, 3, pre_vote)
    assert _stands_at(s, deadline)


def test_a_prospective_one_voter_refused_keeps_its_timer_into_a_newer_epoch() -> None:
    """One refusal of three voters: a majority can still grant, the timer is kept."""
    s, pre_vote, deadline = _prospective()
    s.receive(
        deadline - 2, NodeId(2), VoteResponse(ErrorCode.NONE, NodeId(-1), Epoch(0), False), pre_vote
    )
    assert s.replica.view().state is S.PROSPECTIVE
    _newer_epoch_without_leader(s, deadline - 1, 3, pre_vote)
    assert _stands_at(s, deadline)


def test_a_prospective_a_majority_refused_draws_a_fresh_timer() -> None:
    """Two refusals of three voters: the pre-vote is lost, the replica goes back to Unattached
    in its epoch and waits a whole new election timeout (at least T) before standing again."""
    s, pre_vote, deadline = _prospective()
    refusal = VoteResponse(ErrorCode.NONE, NodeId(-1), Epoch(0), False)
    s.receive(deadline - 2, NodeId(2), refusal, pre_vote)
    s.receive(deadline - 1, NodeId(3), refusal, pre_vote)
    assert s.replica.view().state is S.UNATTACHED
    assert not _stands_at(s, deadline)
    assert s.replica.next_deadline_ms() >= deadline - 1 + s.timing.election_timeout_ms


def test_a_stray_fetch_answer_does_not_end_the_followers_fetch_in_flight() -> None:
    """Answers from a replica that is not the leader, and from the leader in an older epoch,
    leave the long poll in flight: the next Fetch goes out only when the request times out."""
    s = Solo()
    fetch = s.follow()
    stray = (
        (NodeId(3), FetchResponse(ErrorCode.NONE, LEADER, EPOCH, Offset(0), Offset(0))),
        (LEADER, FetchResponse(ErrorCode.NONE, LEADER, Epoch(EPOCH - 1), Offset(0), Offset(0))),
    )
    for i, (src, resp) in enumerate(stray):
        s.receive(10 + i, src, resp, fetch)
        assert s.replica.view().state is S.FOLLOWER
        assert not s.sent(FetchRequest)
    again = s.tick_until_sent(FetchRequest, limit=10 * s.timing.request_timeout_ms)
    assert again.dst == LEADER
    assert s.now == s.timing.request_timeout_ms


def test_a_voted_prospective_whose_pre_vote_timed_out_stands_again_at_once() -> None:
    """A Voted replica's timer runs out: it becomes Prospective, still having voted. Its
    pre-vote gets no answer and times out: back to Voted with the time left on the timer
    (Kafka's transitionToUnattached keeps a Prospective's time left unless a majority rejected
    it), none: it stands again at that same time. Only a vote granted restarts the timer."""
    s = Solo()
    vote = VoteRequest(CLUSTER, key(2), Epoch(1), Epoch(0), Offset(0))
    s.receive(1, NodeId(2), vote, None)
    assert (s.replica.view().state, s.replica.view().voted_for) == (S.VOTED, key(2))
    first = s.tick_until_sent(VoteRequest, limit=5_000)
    assert isinstance(first.message, VoteRequest) and first.message.pre_vote
    assert s.replica.view().state is S.PROSPECTIVE
    timeout = s.replica.next_deadline_ms()
    effects = s.step(Tick(timeout))
    assert [e.new for e in effects if isinstance(e, StateChanged)] == [S.VOTED]
    assert s.replica.view().voted_for == key(2)
    assert _stands_at(s, timeout)
