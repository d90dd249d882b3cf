"""KIP-996 pre-vote as Apache Kafka 4.x ships it: the Prospective state, pre-vote requests and
the per-state rules for granting them (QuorumState, ProspectiveState, FollowerState,
CandidateState, KafkaRaftClient.handleVoteRequest/handleVoteResponse)."""

from __future__ import annotations

import pytest
from replica_harness import CLUSTER, Harness, build_log, grant, index, key, of, sent, stand
from test_replica_leader import leader

from kraft.core.effects import (
    ActionTaken,
    ElectionState,
    PersistElectionState,
    Send,
    StateChanged,
)
from kraft.core.events import Tick
from kraft.core.messages import FetchResponse, VoteRequest, VoteResponse
from kraft.core.replica import Replica
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset

S = ReplicaState
MINE = [(1, 2), (2, 3)]  # a log ending at offset 5 in epoch 2


def pre_vote(cand: int, epoch: int, last_epoch: int = 2, end: int = 5) -> VoteRequest:
    return VoteRequest(
        CLUSTER, key(cand), Epoch(epoch), Epoch(last_epoch), Offset(end), pre_vote=True
    )


def vote(cand: int, epoch: int, last_epoch: int = 2, end: int = 5) -> VoteRequest:
    return VoteRequest(CLUSTER, key(cand), Epoch(epoch), Epoch(last_epoch), Offset(end))


def answer(effects: list) -> VoteResponse:  # type: ignore[type-arg]
    [(_, resp)] = sent(effects, VoteResponse)
    return resp


def reject(epoch: int, leader: int = -1) -> VoteResponse:
    return VoteResponse(ErrorCode.NONE, NodeId(leader), Epoch(epoch), False)


# --------------------------------------------------------------------------- the prospective


def test_election_timeout_makes_a_voter_prospective_and_persists_nothing() -> None:
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2)))
    effects = h.tick()
    assert ActionTaken(Action.ELECTION_TIMEOUT) in effects
    assert (h.view.state, h.view.epoch) == (S.PROSPECTIVE, 2)
    assert StateChanged(S.UNATTACHED, S.PROSPECTIVE, Epoch(2)) in effects
    assert not of(effects, PersistElectionState)
    requests = sent(effects, VoteRequest)
    assert sorted(d for d, _ in requests) == [2, 3]
    # Kafka's pre-vote carries the CURRENT epoch (ReplicaEpoch), not epoch + 1.
    assert {(r.pre_vote, r.candidate_epoch) for _, r in requests} == {(True, 2)}
    assert {(r.last_epoch, r.last_end_offset) for _, r in requests} == {(2, 5)}


def test_a_majority_of_pre_votes_makes_a_candidate_in_the_next_epoch() -> None:
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2)))
    h.tick()
    effects = h.recv(3, grant(2))
    assert (h.view.state, h.view.epoch) == (S.CANDIDATE, 3)
    assert ActionTaken(Action.BECOME_CANDIDATE) in effects
    persisted = index(effects, lambda e: isinstance(e, PersistElectionState))
    assert effects[persisted] == PersistElectionState(ElectionState(Epoch(3), None, key(1)))
    votes = sent(effects, VoteRequest)
    assert {(r.pre_vote, r.candidate_epoch) for _, r in votes} == {(False, 3)}
    assert all(
        index(effects, lambda e, r=r: isinstance(e, Send) and e.message is r) > persisted
        for _, r in votes
    )


def test_a_follower_whose_pre_vote_fails_follows_its_leader_again() -> None:
    """Kafka prospectiveTransitionAfterElectionLoss: a Prospective that knew a leader goes back
    to following it, in the same epoch."""
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2), leader_id=NodeId(2)))
    h.step(Tick(10_000))  # fetch timeout
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.PROSPECTIVE, 2, 2)
    h.now = 10_000
    h.recv(2, reject(2, leader=2))
    assert h.view.state is S.PROSPECTIVE  # one rejection of three: it can still win
    effects = h.recv(3, reject(2, leader=2))
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.FOLLOWER, 2, 2)
    assert StateChanged(S.PROSPECTIVE, S.FOLLOWER, Epoch(2)) in effects
    assert h.stored == ElectionState(Epoch(2), NodeId(2), None)


def test_an_unattached_prospective_that_loses_waits_a_fresh_election_timeout() -> None:
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2)), election_timeout_ms=1000)
    h.tick()
    h.recv(2, reject(2))
    h.recv(3, reject(2))
    assert (h.view.state, h.view.epoch) == (S.UNATTACHED, 2)
    assert 1000 <= h.replica.next_deadline_ms() - h.now < 2000


def test_a_voted_prospective_that_loses_keeps_its_vote() -> None:
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2), voted_for=key(3)))
    assert h.view.state is S.VOTED
    h.tick()
    assert (h.view.state, h.view.voted_for) == (S.PROSPECTIVE, key(3))
    h.recv(2, reject(2))
    h.recv(3, reject(2))
    assert (h.view.state, h.view.epoch, h.view.voted_for) == (S.VOTED, 2, key(3))


def test_a_prospective_that_times_out_goes_back_then_tries_again_at_once() -> None:
    """Kafka: Unattached keeps the (spent) time of the Prospective's timer, so the next
    tick is another ElectionTimeout with a fresh timer and fresh pre-votes."""
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2)))
    h.tick()
    effects = h.tick()  # the prospective's election timer
    assert ActionTaken(Action.ELECTION_TIMEOUT) in effects
    assert (h.view.state, h.view.epoch) == (S.UNATTACHED, 2)
    assert h.replica.next_deadline_ms() == h.now
    effects = h.tick()
    assert (h.view.state, h.view.epoch) == (S.PROSPECTIVE, 2)
    assert len(sent(effects, VoteRequest)) == 2


def test_a_prospective_learns_the_leader_from_a_pre_vote_answer() -> None:
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2)))
    h.tick()
    h.recv(2, reject(2, leader=3))
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.FOLLOWER, 2, 3)


def test_an_answer_to_a_vote_of_another_round_is_not_a_pre_vote() -> None:
    """A Candidate that timed out is Prospective in its epoch; a late grant of its Vote request
    does not count as a pre-vote (the node and simulator tell which request it answers)."""
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2)))
    votes = sent(stand(h), VoteRequest)
    assert (h.view.state, h.view.epoch) == (S.CANDIDATE, 3)
    h.tick()  # the candidate's election timer
    assert (h.view.state, h.view.epoch) == (S.PROSPECTIVE, 3)
    late = next(r for d, r in votes if d == 2)
    h.recv(2, grant(3), in_reply_to=late)
    assert h.view.state is S.PROSPECTIVE
    h.recv(2, grant(3), in_reply_to=pre_vote(1, 3))
    assert (h.view.state, h.view.epoch) == (S.CANDIDATE, 4)


def test_a_voter_without_pre_vote_support_makes_the_prospective_stand_at_once() -> None:
    """Kafka: UNSUPPORTED_VERSION from a voter turns a Prospective into a Candidate."""
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2)))
    h.tick()
    h.recv(2, VoteResponse(ErrorCode.UNSUPPORTED_VERSION, NodeId(-1), Epoch(2), False))
    assert (h.view.state, h.view.epoch) == (S.CANDIDATE, 3)


def test_a_single_voter_elects_itself_in_one_step() -> None:
    """Kafka's initialize: the only voter stands as it starts, and wins at once."""
    h = Harness(voters=(1,))
    effects = h.start_effects
    assert h.view.state is S.LEADER and h.view.epoch == 1
    actions = [e.action for e in of(effects, ActionTaken)]
    assert actions[:3] == [Action.ELECTION_TIMEOUT, Action.BECOME_CANDIDATE, Action.BECOME_LEADER]


def test_observers_never_pre_vote() -> None:
    h = Harness(node=4, election=ElectionState(Epoch(2), leader_id=NodeId(2)))
    effects = h.step(Tick(100_000))
    assert (h.view.state, h.view.epoch) == (S.FOLLOWER, 2)
    assert not sent(effects, VoteRequest)
    effects = h.step(Tick(200_000))
    assert h.view.state is S.FOLLOWER
    assert not sent(effects, VoteRequest)
    assert not any(c.new is S.PROSPECTIVE for c in of(effects, StateChanged))


def test_with_pre_vote_disabled_a_timeout_stands_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test-only switch: without pre-vote the Prospective step is skipped, as Kafka does
    when a voter does not support it."""
    monkeypatch.setattr(Replica, "pre_vote_enabled", False)
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2)))
    effects = h.tick()
    assert (h.view.state, h.view.epoch) == (S.CANDIDATE, 3)
    assert {r.pre_vote for _, r in sent(effects, VoteRequest)} == {False}


# --------------------------------------------------------------------------- granting pre-votes


def test_unattached_grants_a_pre_vote_to_an_up_to_date_log_and_records_nothing() -> None:
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2)))
    effects = h.recv(2, pre_vote(2, 2))
    assert answer(effects).vote_granted
    assert not of(effects, PersistElectionState)
    assert (h.view.state, h.view.epoch, h.view.voted_for) == (S.UNATTACHED, 2, None)
    # and a real vote may still go to someone else in this epoch... or the next
    assert not answer(h.recv(3, pre_vote(3, 2, last_epoch=2, end=4))).vote_granted
    assert answer(h.recv(3, vote(3, 3))).vote_granted


def test_a_vote_cast_does_not_bind_a_pre_vote() -> None:
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2), voted_for=key(3)))
    effects = h.recv(2, pre_vote(2, 2))
    assert answer(effects).vote_granted
    assert (h.view.state, h.view.voted_for) == (S.VOTED, key(3))
    assert not answer(h.recv(2, vote(2, 2, last_epoch=1))).vote_granted  # a real vote: no


def test_a_follower_grants_pre_votes_only_until_its_leader_answers() -> None:
    """Kafka FollowerState.canGrantVote: a pre-vote is granted only while the follower has not
    fetched successfully from its leader in this epoch; a real vote never."""
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(3), leader_id=NodeId(2)))
    assert answer(h.recv(3, pre_vote(3, 3))).vote_granted
    assert not answer(h.recv(3, pre_vote(3, 3, last_epoch=2, end=4))).vote_granted  # stale log
    h.recv(2, FetchResponse(ErrorCode.NONE, NodeId(2), Epoch(3), Offset(5), Offset(0)))
    assert not answer(h.recv(3, pre_vote(3, 3))).vote_granted
    assert (h.view.state, h.view.leader_id) == (S.FOLLOWER, 2)


def test_a_candidate_grants_pre_votes_but_not_votes() -> None:
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2)))
    stand(h)
    assert (h.view.state, h.view.epoch) == (S.CANDIDATE, 3)
    assert answer(h.recv(2, pre_vote(2, 3))).vote_granted
    assert not answer(h.recv(2, pre_vote(2, 3, last_epoch=1, end=9))).vote_granted
    assert not answer(h.recv(2, vote(2, 3))).vote_granted
    assert h.view.state is S.CANDIDATE


def test_a_prospective_grants_pre_votes_and_follows_a_larger_epoch() -> None:
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2)))
    h.tick()
    assert answer(h.recv(2, pre_vote(2, 2))).vote_granted
    assert (h.view.state, h.view.voted_for) == (S.PROSPECTIVE, None)
    effects = h.recv(3, vote(3, 2, last_epoch=1, end=9))
    assert not answer(effects).vote_granted  # (1, 9) is behind our (2, 5)
    assert h.view.state is S.PROSPECTIVE
    effects = h.recv(3, vote(3, 3))
    # a real vote in a larger epoch: Unattached(3) first, then Voted for 3
    assert answer(effects).vote_granted
    assert (h.view.state, h.view.epoch, h.view.voted_for) == (S.VOTED, 3, key(3))


def test_a_prospective_records_a_real_vote_in_its_epoch() -> None:
    """Kafka prospectiveAddVotedState: a Prospective without a vote grants a real vote in its
    own epoch and stays Prospective with that vote on record (persisted before answering)."""
    h = Harness(log=build_log([(1, 2)]), election=ElectionState(Epoch(2)))
    h.tick()
    assert (h.view.state, h.view.epoch) == (S.PROSPECTIVE, 2)
    effects = h.recv(2, VoteRequest(CLUSTER, key(2), Epoch(2), Epoch(1), Offset(2)))
    assert answer(effects).vote_granted
    persisted = index(effects, lambda e: isinstance(e, PersistElectionState))
    assert effects[persisted] == PersistElectionState(ElectionState(Epoch(2), None, key(2)))
    assert persisted < index(effects, lambda e: isinstance(e, Send))
    assert (h.view.state, h.view.voted_for) == (S.PROSPECTIVE, key(2))
    other = VoteRequest(CLUSTER, key(3), Epoch(2), Epoch(1), Offset(2))
    assert not answer(h.recv(3, other)).vote_granted


def test_a_leader_refuses_pre_votes() -> None:
    h = leader()  # node 1 leads epoch 2 of voters 1, 2, 3; its log ends at (2, 3)
    assert not answer(h.recv(2, pre_vote(2, 2, last_epoch=2, end=99))).vote_granted
    assert h.view.state is S.LEADER


def test_a_resigned_replica_grants_a_pre_vote_iff_the_log_is_up_to_date() -> None:
    """Kafka 4.3's ResignedState.canGrantVote: a pre-vote iff the candidate's log is up to
    date, never a vote (the resigned leader voted for itself in its epoch); nothing moves."""

    def resigned() -> Harness:
        h = Harness(log=build_log(MINE), election=ElectionState(Epoch(3), leader_id=NodeId(1)))
        assert h.view.state is S.RESIGNED
        return h

    h = resigned()
    assert answer(h.recv(2, pre_vote(2, 3, last_epoch=3, end=99))).vote_granted
    assert (h.view.state, h.view.epoch, h.view.voted_for) == (S.RESIGNED, 3, None)
    behind = MINE[-1][0] - 1  # a log that ends in an older epoch than ours
    assert not answer(h.recv(2, pre_vote(2, 3, last_epoch=behind, end=99))).vote_granted
    assert not answer(resigned().recv(2, vote(2, 3, last_epoch=2, end=99))).vote_granted


def test_a_pre_vote_in_a_larger_epoch_moves_the_receiver_to_that_epoch() -> None:
    """As Kafka's handleVoteRequest: any Vote request with a larger epoch moves the receiver
    there first (Unattached, persisted); a pre-vote still records no vote."""
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2), leader_id=NodeId(3)))
    effects = h.recv(2, pre_vote(2, 4))
    assert answer(effects).vote_granted
    assert (h.view.state, h.view.epoch, h.view.voted_for) == (S.UNATTACHED, 4, None)
    assert h.stored == ElectionState(Epoch(4), None, None)


def test_a_pre_vote_from_an_older_epoch_is_fenced() -> None:
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(3)))
    resp = answer(h.recv(2, pre_vote(2, 2)))
    assert resp.error is ErrorCode.FENCED_LEADER_EPOCH and not resp.vote_granted


def test_epochs_a_vote_request_cannot_carry_are_invalid() -> None:
    """Kafka: a pre-vote's log cannot end in a later epoch than its own; a candidate's log
    cannot end in its (new) epoch or later."""
    h = Harness(log=build_log(MINE), election=ElectionState(Epoch(2)))
    assert answer(h.recv(2, pre_vote(2, 2, last_epoch=3))).error is ErrorCode.INVALID_REQUEST
    assert answer(h.recv(2, vote(2, 3, last_epoch=3))).error is ErrorCode.INVALID_REQUEST
    assert answer(h.recv(2, pre_vote(2, 2, last_epoch=2))).error is ErrorCode.NONE
    assert h.view.epoch == 2
