"""Scenario tests of a follower's vote and fetch-timer rules that the simulator's sweep reaches
only now and then (its checkers GrantedVoteLogUpToDate, RejectedMessageChangesNothing on a
forged EndQuorumEpoch, and FetchTimeoutNotLate see them when a run gets there):

- a follower that has not fetched from its leader yet may grant a pre-vote (KIP-996), but only
  to a candidate whose log is at least as up-to-date as its own (Kafka's
  FollowerState.canGrantVote);
- an EndQuorumEpoch naming another leader of the follower's epoch than the one it follows (only
  a forged one can) leaves its fetch timer alone: only its own leader's resignation makes it
  stand early (Kafka 4.3.1's handleEndQuorumEpochRequest compares the request's leader with
  FollowerState.leaderId());
- a broken connection to the leader brings the fetch timer forward, never back: a follower
  whose leader resigned naming it first successor, and whose connection to that leader then
  breaks, still stands at once.
"""

from __future__ import annotations

from memory_logs import key
from scenario_harness import CLUSTER, Cluster, settled

from kraft.core.effects import Effect, Send
from kraft.core.events import Receive, SendFailed
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    VoteRequest,
    VoteResponse,
)
from kraft.core.vocabulary import ReplicaState
from kraft.ids import Epoch, NodeId, Offset

ELECTION_TIMEOUT_MS = 1000


def _settled() -> tuple[Cluster, int, int, int]:
    """Three voters following one leader, its LeaderChange record on every log: the leader, a
    follower and the third voter."""
    c = Cluster(3, seed=2, election_timeout_ms=ELECTION_TIMEOUT_MS, fetch_timeout_ms=2000)
    leader = settled(c)
    follower, third = (i for i in c.nodes if i != leader)
    return c, leader, follower, third


def _vote_answers(effects: list[Effect], dst: int) -> list[VoteResponse]:
    return [
        e.message
        for e in effects
        if isinstance(e, Send) and e.dst == dst and isinstance(e.message, VoteResponse)
    ]


def _pre_vote(c: Cluster, voter: int, candidate: int, epoch: int, last: int, end: int) -> bool:
    msg = VoteRequest(CLUSTER, key(candidate), Epoch(epoch), Epoch(last), Offset(end),
                      pre_vote=True)  # fmt: skip
    answers = _vote_answers(c.step(voter, Receive(c.now, NodeId(candidate), msg)), candidate)
    assert len(answers) == 1, answers
    return answers[0].vote_granted


def test_a_follower_that_has_not_fetched_grants_a_pre_vote_only_to_an_up_to_date_log() -> None:
    c, leader, follower, third = _settled()
    epoch = c.view(follower).epoch + 1
    # The third voter leads the next epoch; the follower has not fetched from it yet.
    begin = BeginQuorumEpochRequest(CLUSTER, NodeId(third), Epoch(epoch), key(follower))
    c.step(follower, Receive(c.now, NodeId(third), begin))
    v = c.view(follower)
    assert (v.state, v.epoch, v.leader_id) == (ReplicaState.FOLLOWER, epoch, third)
    last, end = v.last_epoch, v.end_offset
    assert not _pre_vote(c, follower, leader, epoch, last, end - 1)  # shorter log
    assert not _pre_vote(c, follower, leader, epoch, last - 1, end + 5)  # older last epoch
    assert _pre_vote(c, follower, leader, epoch, last, end)  # as up-to-date: granted
    assert c.view(follower).state is ReplicaState.FOLLOWER


def test_an_end_quorum_epoch_of_a_second_leader_leaves_the_fetch_timer_alone() -> None:
    c, leader, follower, third = _settled()
    epoch = c.view(follower).epoch
    seen = len(c.nodes[follower].states)
    forged = EndQuorumEpochRequest(CLUSTER, NodeId(third), Epoch(epoch), (NodeId(follower),))
    c.step(follower, Receive(c.now, NodeId(third), forged))
    c.run(c.now + ELECTION_TIMEOUT_MS // 4)
    assert c.nodes[follower].states[seen:] == []  # it did not stand
    v = c.view(follower)
    assert (v.state, v.epoch, v.leader_id) == (ReplicaState.FOLLOWER, epoch, leader)
    # Its own leader's resignation naming it first successor: it stands at once.
    real = EndQuorumEpochRequest(CLUSTER, NodeId(leader), Epoch(epoch), (NodeId(follower),))
    c.step(follower, Receive(c.now, NodeId(leader), real))
    c.run(c.now)
    assert c.view(follower).state is ReplicaState.PROSPECTIVE


def test_a_broken_leader_connection_does_not_postpone_a_resigned_leaders_successor() -> None:
    c, leader, follower, third = _settled()
    epoch = c.view(follower).epoch
    end = EndQuorumEpochRequest(
        CLUSTER, NodeId(leader), Epoch(epoch), (NodeId(follower), NodeId(third))
    )
    c.step(follower, Receive(c.now, NodeId(leader), end))  # its fetch timer runs out now
    c.crash(leader)  # the resigned leader's process exits: its connections break
    fetch = FetchRequest(CLUSTER, key(follower), Epoch(epoch), Offset(0), Epoch(0), Offset(0))
    c.step(follower, SendFailed(c.now, NodeId(leader), fetch, broken=True))
    c.run(c.now)
    assert c.view(follower).state is ReplicaState.PROSPECTIVE
