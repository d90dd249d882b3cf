"""Scenario tests of what a state change resets and records (Replica._transition / _enter):
a new Candidate's stored vote for itself, a Follower's abandoned Fetch no longer timed once
it stands for election, and an observer's "leader went silent" mode ending when it learns a
newer leader.

One replica is driven by hand; the test plays the rest of the quorum.
"""

from __future__ import annotations

import pytest
from hand_driven import HandDriven
from memory_logs import key

from kraft.core.effects import Effect, PersistElectionState, Send, StateChanged
from kraft.core.events import Receive
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    Message,
    Request,
    VoteRequest,
    VoteResponse,
)
from kraft.core.timing import QuorumTiming
from kraft.core.transitions import IllegalTransitionError
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset

CLUSTER = ClusterId("replica-transitions")
VOTERS = (1, 2, 3)


class Hand(HandDriven):
    """Replica `me` (a voter of VOTERS, or an observer when not among them)."""

    def __init__(self, me: int, **cfg: int) -> None:
        super().__init__(CLUSTER, VOTERS, me=me, timing=QuorumTiming(**cfg))

    def receive(self, src: int, msg: Message, of: Request | None = None) -> list[Effect]:
        return self.step(Receive(self.now, NodeId(src), msg, of))

    def tick_until_by(self, state: ReplicaState, limit: int) -> None:
        while self.replica.view().state is not state:
            assert self.now <= limit, f"not {state.value} by t={limit}ms"
            self.tick()

    def sent(self, kind: type) -> list[Send]:
        return [e for e in self.last if isinstance(e, Send) and isinstance(e.message, kind)]


def test_a_new_candidate_stores_its_vote_for_itself_before_asking_for_votes() -> None:
    h = Hand(1)
    h.tick_until_by(ReplicaState.PROSPECTIVE, 60_000)
    [pre] = [s for s in h.sent(VoteRequest) if s.dst == NodeId(2)]
    h.receive(2, VoteResponse(ErrorCode.NONE, NodeId(-1), Epoch(0), True), pre.message)
    assert h.replica.view().state is ReplicaState.CANDIDATE
    persists = [i for i, e in enumerate(h.last) if isinstance(e, PersistElectionState)]
    assert len(persists) == 1
    stored = h.last[persists[0]]
    assert isinstance(stored, PersistElectionState)
    assert stored.state.epoch == Epoch(1)
    assert stored.state.voted_for == key(1)
    asks = [i for i, e in enumerate(h.last) if isinstance(e, Send)]
    assert asks and min(asks) > persists[0]


def test_a_follower_standing_for_election_no_longer_times_its_unanswered_fetch() -> None:
    # The Fetch sent at t=0 is in flight until t=3500; the fetch timeout (1 s plus up to
    # half an election timeout) makes the follower Prospective first, and its own deadlines
    # (an election timeout, a request timeout on) lie past t=3500.
    h = Hand(1, request_timeout_ms=3500, election_timeout_ms=4000, fetch_timeout_ms=1000)
    h.receive(2, BeginQuorumEpochRequest(CLUSTER, NodeId(2), Epoch(1)))
    assert h.sent(FetchRequest)
    h.tick_until_by(ReplicaState.PROSPECTIVE, 3400)
    assert h.now < 3500
    assert h.replica.next_deadline_ms() > 3500


def test_an_observer_whose_leader_went_silent_asks_a_newly_learned_leader_directly() -> None:
    h = Hand(4, fetch_timeout_ms=2000, request_timeout_ms=1000)
    [first] = h.sent(FetchRequest)
    h.receive(
        first.dst,
        FetchResponse(ErrorCode.NONE, NodeId(2), Epoch(1), Offset(0), Offset(0)),
        first.message,
    )
    assert h.replica.view().state is ReplicaState.FOLLOWER
    # The leader never answers: past the fetch timeout the observer asks the leader and the
    # voters in turn, without a long poll; wait for its turn at voter 1.
    last: Send | None = None
    while last is None or last.dst != NodeId(1):
        assert h.now <= 10_000, "voter 1 never asked"
        h.tick()
        found = h.sent(FetchRequest)
        if found:
            last = found[0]
    assert isinstance(last.message, FetchRequest)
    assert last.message.max_wait_ms == 0  # asking around
    # Voter 1 names a newer leader, 3: the observer follows it, asking it directly.
    h.receive(
        last.dst,
        FetchResponse(ErrorCode.NONE, NodeId(3), Epoch(2), Offset(0), Offset(0)),
        last.message,
    )
    assert h.replica.view().state is ReplicaState.FOLLOWER
    assert any(isinstance(e, StateChanged) and e.epoch == Epoch(2) for e in h.last)
    [ask] = h.sent(FetchRequest)
    assert ask.dst == NodeId(3)
    assert isinstance(ask.message, FetchRequest)
    assert ask.message.max_wait_ms == h.timing.fetch_max_wait_ms


def test_a_transition_the_table_forbids_is_refused_and_changes_nothing() -> None:
    # Unattached -> Leader skips the election: the replica's own guard refuses it before any
    # field changes or effect is recorded.
    h = Hand(1)
    before = h.replica.view()
    with pytest.raises(IllegalTransitionError):
        h.replica._transition(ReplicaState.LEADER, Epoch(0))
    assert h.replica.view() == before
    assert h.replica.view().state is ReplicaState.UNATTACHED
