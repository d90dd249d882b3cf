"""Scenario tests of the epoch and leader an error answer names, as Kafka 4.3.1 reads them.

KafkaRaftClient.maybeHandleCommonResponse runs on every answer that carries partition data,
before the answer's own error is looked at: an answer naming a later epoch moves the replica
to it (a follower of the leader it names, or Unattached), and one naming a leader of our own
epoch when we know none makes us its follower; only UNKNOWN_LEADER_EPOCH (and an epoch below
ours) is set aside. So a Candidate whose Vote is answered INVALID_VOTER_KEY by a voter that
already follows a newer leader follows that leader at once, rather than standing until its
election timer runs out; the same holds for a Leader's BeginQuorumEpoch answers.

One replica (node 1) is driven by hand (the Nominee of test_vote_answer_rules_scenarios).
"""

from __future__ import annotations

import pytest
from memory_logs import key
from test_vote_answer_rules_scenarios import CLUSTER, Nominee

from kraft.core.events import Receive
from kraft.core.messages import BeginQuorumEpochRequest, BeginQuorumEpochResponse, VoteResponse
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId

S = ReplicaState
ERRORS = [
    ErrorCode.INVALID_VOTER_KEY,
    ErrorCode.BROKER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
]


def _candidate() -> Nominee:
    n = Nominee()
    n.stand()
    n.answer(2, True)
    assert n.state == (S.CANDIDATE, 1)
    return n


def _vote_answer(n: Nominee, src: int, error: ErrorCode, leader: int, epoch: int) -> None:
    req = n.last_vote_request(src)
    resp = VoteResponse(error, NodeId(leader), Epoch(epoch), False)
    n.step(Receive(n.now + 1, NodeId(src), resp, req))


def _leader_of(n: Nominee) -> int | None:
    leader = n.replica.view().leader_id
    return None if leader is None else int(leader)


@pytest.mark.parametrize("error", ERRORS)
def test_a_candidate_follows_the_later_leader_an_error_answer_names(error: ErrorCode) -> None:
    n = _candidate()
    _vote_answer(n, 3, error, leader=3, epoch=4)
    assert (n.state, _leader_of(n)) == ((S.FOLLOWER, 4), 3)


@pytest.mark.parametrize("error", ERRORS)
def test_a_candidate_is_unattached_in_the_later_epoch_an_error_answer_names(
    error: ErrorCode,
) -> None:
    n = _candidate()
    _vote_answer(n, 3, error, leader=-1, epoch=4)
    assert (n.state, _leader_of(n)) == ((S.UNATTACHED, 4), None)


@pytest.mark.parametrize("error", ERRORS)
def test_a_candidate_follows_a_leader_of_its_own_epoch_an_error_answer_names(
    error: ErrorCode,
) -> None:
    """Voter 3 already follows node 2, elected in the candidate's own epoch."""
    n = _candidate()
    _vote_answer(n, 3, error, leader=2, epoch=1)
    assert (n.state, _leader_of(n)) == ((S.FOLLOWER, 1), 2)


def test_an_unknown_leader_epoch_answer_is_set_aside() -> None:
    """UNKNOWN_LEADER_EPOCH is Kafka's one error whose epoch is not read: the candidate stands
    on in its own epoch."""
    n = _candidate()
    _vote_answer(n, 3, ErrorCode.UNKNOWN_LEADER_EPOCH, leader=3, epoch=4)
    assert (n.state, _leader_of(n)) == ((S.CANDIDATE, 1), None)


@pytest.mark.parametrize("error", ERRORS)
def test_a_leader_follows_the_later_leader_a_begin_quorum_epoch_error_names(
    error: ErrorCode,
) -> None:
    n = _candidate()
    n.answer(3, True)
    assert n.state == (S.LEADER, 1)
    req = BeginQuorumEpochRequest(CLUSTER, NodeId(1), Epoch(1), voter=key(3))
    resp = BeginQuorumEpochResponse(error, NodeId(3), Epoch(4))
    n.step(Receive(n.now + 1, NodeId(3), resp, req))
    assert (n.state, _leader_of(n)) == ((S.FOLLOWER, 4), 3)
