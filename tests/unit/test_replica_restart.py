"""Restart rules in Replica.start(), as Apache Kafka's QuorumState.initialize applies them."""

from __future__ import annotations

from replica_harness import Harness, build_log, key, of, sent, stand

from kraft.core.effects import ElectionState, PersistElectionState, StateChanged
from kraft.core.messages import FetchRequest, VoteRequest
from kraft.core.vocabulary import ReplicaState
from kraft.ids import Epoch, NodeId

S = ReplicaState


def test_fresh_replica_starts_unattached_in_epoch_zero() -> None:
    h = Harness()
    assert (h.view.state, h.view.epoch) == (S.UNATTACHED, 0)
    assert StateChanged(S.UNATTACHED, S.UNATTACHED, Epoch(0)) in h.start_effects


def test_leader_restarts_resigned_in_its_epoch() -> None:
    """A restarted leader may not vote or lead again in its epoch: it comes back Resigned."""
    h = Harness(election=ElectionState(Epoch(4), leader_id=NodeId(1)), log=build_log([(4, 1)]))
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.RESIGNED, 4, 1)
    assert not sent(h.start_effects, VoteRequest)
    h.tick()  # its election timeout: Unattached in the next epoch (Kafka pollResigned)
    assert (h.view.state, h.view.epoch) == (S.UNATTACHED, 5)
    assert h.replica.next_deadline_ms() == h.now  # no time left: it stands at once
    stand(h)
    assert (h.view.state, h.view.epoch) == (S.CANDIDATE, 6)


def test_leader_outside_its_voter_set_restarts_resigned_and_ends_its_epoch() -> None:
    """Kafka's QuorumState.initialize makes a leader Resigned whether or not it is still a
    voter by its log (a leader that removed itself, KIP-853); its election timeout then moves
    it to the next epoch (pollResigned), an observer there, which looks for the leader."""
    h = Harness(node=4, election=ElectionState(Epoch(4), leader_id=NodeId(4)),
                log=build_log([(4, 1)]))  # fmt: skip
    assert (h.view.state, h.view.epoch, h.view.is_voter) == (S.RESIGNED, 4, False)
    assert not sent(h.start_effects, VoteRequest)
    effects = h.tick()
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.UNATTACHED, 5, None)
    assert not sent(effects, VoteRequest)  # an observer does not stand
    assert [r.replica_epoch for _, r in sent(effects, FetchRequest)] == [5]


def test_candidate_restarts_as_candidate_in_the_same_epoch() -> None:
    """Kafka: a replica that voted for itself restarts as Candidate in the same epoch and asks
    again (voters grant the same candidate again)."""
    h = Harness(election=ElectionState(Epoch(3), voted_for=key(1)))
    assert (h.view.state, h.view.epoch) == (S.CANDIDATE, 3)
    requests = sent(h.start_effects, VoteRequest)
    assert sorted(d for d, _ in requests) == [2, 3]
    assert {r.candidate_epoch for _, r in requests} == {3}


def test_voted_replica_restarts_voted() -> None:
    h = Harness(election=ElectionState(Epoch(3), voted_for=key(2)))
    assert (h.view.state, h.view.epoch, h.view.voted_for) == (S.VOTED, 3, key(2))


def test_follower_restarts_following_the_known_leader() -> None:
    h = Harness(election=ElectionState(Epoch(3), leader_id=NodeId(2)))
    assert (h.view.state, h.view.leader_id) == (S.FOLLOWER, 2)
    assert [d for d, _ in sent(h.start_effects, FetchRequest)] == [2]


def test_state_older_than_the_log_is_corrected_and_persisted() -> None:
    """An election state whose epoch is older than the log's last epoch: Unattached in the
    log's last epoch, persisted."""
    h = Harness(election=ElectionState(Epoch(2), leader_id=NodeId(1)), log=build_log([(5, 2)]))
    assert (h.view.state, h.view.epoch) == (S.UNATTACHED, 5)
    assert of(h.start_effects, PersistElectionState) == [
        PersistElectionState(ElectionState(Epoch(5)))
    ]


def test_observer_that_was_told_a_leader_follows_it() -> None:
    h = Harness(node=4, election=ElectionState(Epoch(3), leader_id=NodeId(2)))
    assert (h.view.state, h.view.is_voter) == (S.FOLLOWER, False)
