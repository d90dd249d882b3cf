"""Scenario tests of when a voter's election timer is drawn afresh and when it is kept.

- quorum.election.timeout.ms = 0: the randomized election timeout is 0, with no draw (Kafka's
  QuorumState.randomElectionTimeoutMs: `electionTimeoutMs == 0 ? 0 : t + nextInt(t)`), so a
  voter that hears of no leader stands in the step that starts its timer's clock.
- An Unattached voter that hears of a newer epoch with no leader moves to Unattached in that
  epoch and keeps the time left on its timer (Kafka's transitionToUnattached from an
  Unattached state): a candidate with a stale log bumping epochs cannot keep postponing the
  election of a voter whose log could win.
- Casting a vote restarts the timer (Kafka's unattachedAddVotedState draws a new timeout): the
  candidate voted for gets a whole election timeout to win.

One voter is driven by hand (`Solo`, under the simulator's timing checkers); the test plays
the rest of the quorum and asserts the time the voter stands next.
"""

from __future__ import annotations

from memory_logs import key
from test_retry_timing_scenarios import CLUSTER, Solo

from kraft.core.effects import StateChanged
from kraft.core.events import Tick
from kraft.core.messages import VoteRequest, VoteResponse
from kraft.core.vocabulary import ReplicaState
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch

S = ReplicaState


def _stands_at(s: Solo, at: int) -> bool:
    """Tick at `at`: whether the replica stands (becomes Prospective) in that step."""
    effects = s.step(Tick(at))
    return any(isinstance(e, StateChanged) and e.new is S.PROSPECTIVE for e in effects)


def _answer(s: Solo) -> VoteResponse:
    [send] = s.sent(VoteResponse)
    assert isinstance(send.message, VoteResponse)
    return send.message


def test_a_voter_with_a_zero_election_timeout_stands_at_once() -> None:
    """Timeout 0: the timer started with the replica runs out at its start time; the first
    Tick makes it Prospective, its pre-votes sent in that step."""
    s = Solo(election_timeout_ms=0)
    assert s.replica.view().state is S.UNATTACHED
    assert s.replica.next_deadline_ms() == 0
    assert _stands_at(s, 0)
    pre_votes = s.sent(VoteRequest)
    assert {p.dst for p in pre_votes} == {NodeId(2), NodeId(3)}
    assert all(isinstance(p.message, VoteRequest) and p.message.pre_vote for p in pre_votes)


def test_an_unattached_voter_keeps_its_timer_into_the_epoch_of_a_stale_candidate() -> None:
    """The voter's log ends at (epoch 1, offset 10). A candidate of epoch 3 whose log is
    behind asks for its vote just before the voter's timer runs out: the voter moves to
    Unattached in epoch 3, refuses, and still stands when its first timer runs out."""
    s = Solo(snapshots=True, start=OffsetAndEpoch(Epoch(1), Offset(10)))
    assert (s.replica.view().state, s.replica.view().epoch) == (S.UNATTACHED, 1)
    deadline = s.replica.next_deadline_ms()
    stale = VoteRequest(CLUSTER, key(2), Epoch(3), Epoch(0), Offset(0))
    s.receive(deadline - 1, NodeId(2), stale, None)
    view = s.replica.view()
    assert (view.state, view.epoch, view.voted_for) == (S.UNATTACHED, 3, None)
    assert not _answer(s).vote_granted
    assert s.replica.next_deadline_ms() == deadline
    assert _stands_at(s, deadline)


def test_an_unattached_voter_keeps_its_timer_into_the_epoch_of_a_pre_vote() -> None:
    """A pre-vote of a later epoch moves the voter to that epoch (Kafka's handleVoteRequest,
    for a pre-vote too) and, granted or not, records no vote: Unattached to Unattached, the
    timer kept."""
    s = Solo()
    deadline = s.replica.next_deadline_ms()
    pre_vote = VoteRequest(CLUSTER, key(3), Epoch(2), Epoch(0), Offset(0), pre_vote=True)
    s.receive(deadline - 1, NodeId(3), pre_vote, None)
    view = s.replica.view()
    assert (view.state, view.epoch, view.voted_for) == (S.UNATTACHED, 2, None)
    assert _answer(s).vote_granted
    assert s.replica.next_deadline_ms() == deadline
    assert _stands_at(s, deadline)


def test_casting_a_vote_restarts_the_timer() -> None:
    """A vote granted just before the timer runs out: the voter waits a whole new election
    timeout (at least T) from the vote before standing."""
    s = Solo()
    deadline = s.replica.next_deadline_ms()
    vote = VoteRequest(CLUSTER, key(2), Epoch(1), Epoch(0), Offset(0))
    s.receive(deadline - 1, NodeId(2), vote, None)
    view = s.replica.view()
    assert (view.state, view.epoch, view.voted_for) == (S.VOTED, 1, key(2))
    assert _answer(s).vote_granted
    assert s.replica.next_deadline_ms() >= deadline - 1 + s.timing.election_timeout_ms
    assert not _stands_at(s, deadline)
