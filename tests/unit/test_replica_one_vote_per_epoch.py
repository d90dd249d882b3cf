"""One vote per epoch, whatever happens to the voter set in between (KIP-595 "Vote": a voter
grants at most one candidate a vote in an epoch; Raft's ElectionSafety rests on it).

The situation of mixed+reconfig seed 5: node 1 votes for 3 in epoch 2 and follows it, learns
from 3's log that it was removed (an observer now), and 3 goes silent. A late Vote request of
epoch 2 from 2 must not be granted. The implementation keeps no vote once it knows the leader
(as Kafka's quorum-state stores the leader instead), so it must never be back in a state of
epoch 2 that may grant one: the observer stays 3's Follower and asks the voters (Kafka's
pollFollowerAsObserver) instead of going Follower -> Unattached in the same epoch.
"""

from __future__ import annotations

from replica_harness import CLUSTER, Harness, build_log, key, of, sent

from kraft.control_records import Endpoint, VoterEntry, VotersRecord, encode_control_batch
from kraft.core.effects import ElectionState, PersistElectionState
from kraft.core.events import Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_records import voter_set_of
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset

S = ReplicaState


def _voters(*nodes: int) -> VotersRecord:
    return VotersRecord(
        0,
        tuple(
            VoterEntry(
                n, key(n).directory_id, (Endpoint("CONTROLLER", "127.0.0.1", 9000 + n),), 0, 1
            )
            for n in nodes
        ),
    )


def _vote(candidate: int, epoch: int, last_epoch: int, end: int) -> VoteRequest:
    return VoteRequest(CLUSTER, key(candidate), Epoch(epoch), Epoch(last_epoch), Offset(end))


def _answer(effects: list) -> VoteResponse:
    [(_, resp)] = sent(effects, VoteResponse)
    return resp


def test_a_removed_voter_whose_leader_went_silent_grants_no_second_vote() -> None:
    # Node 1 of the dynamic quorum {1, 2, 3}, Unattached in epoch 1, two records of epoch 1.
    stated = ((Offset(-1), voter_set_of(_voters(1, 2, 3))),)
    h = Harness(
        node=1,
        voters=(),
        voter_history=stated,
        log=build_log([(1, 2)]),
        election=ElectionState(Epoch(1)),
        fetch_timeout_ms=1000,
        election_timeout_ms=3000,
    )
    assert h.replica.is_voter and h.view.state is S.UNATTACHED

    # 1. It votes for 3 in epoch 2 (3's log is as up to date as its own).
    assert _answer(h.recv(3, _vote(3, 2, 1, 2))).vote_granted
    assert (h.view.state, h.view.epoch, h.stored.voted_for) == (S.VOTED, 2, key(3))

    # 2. 3 won and says so: node 1 follows it (the stored state names the leader, no vote).
    effects = h.recv(3, BeginQuorumEpochRequest(CLUSTER, NodeId(3), Epoch(2)))
    assert (h.view.state, h.view.leader_id) == (S.FOLLOWER, 3)
    [(dst, fetch)] = sent(effects, FetchRequest)
    assert dst == 3

    # 3. Its fetch brings a Voters record of epoch 1 without node 1: it is an observer now.
    removal = encode_control_batch(2, 1, _voters(2, 3), timestamp_ms=0)
    answer = FetchResponse(
        ErrorCode.NONE, NodeId(3), Epoch(2), Offset(2), Offset(0), records=removal
    )
    h.recv(3, answer, fetch)
    assert not h.replica.is_voter
    assert h.log.end_offset == 3

    # 4. 3 goes silent: the fetch timeout expires, and again, and again.
    for t in (h.now + 1_500, h.now + 5_000, h.now + 60_000):
        h.now = t
        effects = h.step(Tick(t))
        assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.FOLLOWER, 2, 3)
        assert not [p for p in of(effects, PersistElectionState) if p.state.leader_id is None]

    # 5. A late Vote request of epoch 2 from 2, whose log is as up to date as node 1's: a
    #    second vote in epoch 2 would let 2 win it too. Refused, and nothing is stored.
    effects = h.recv(2, _vote(2, 2, 1, 3))
    resp = _answer(effects)
    assert resp.error is ErrorCode.NONE and not resp.vote_granted
    assert (resp.leader_id, resp.leader_epoch) == (3, 2)
    assert not of(effects, PersistElectionState)
    assert (h.view.state, h.view.epoch, h.view.voted_for) == (S.FOLLOWER, 2, None)
    assert h.stored is not None and (h.stored.epoch, h.stored.leader_id) == (2, 3)
