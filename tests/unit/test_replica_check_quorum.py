"""Check-quorum (Apache Kafka LeaderState/pollLeader): a leader that has not received a Fetch
(or FetchSnapshot) from a majority of voters, itself counted, within fetch timeout x 1.5
resigns; Resigned then leaves for Unattached in the next epoch after its election timeout."""

from __future__ import annotations

from replica_harness import CLUSTER, key, of, sent
from test_replica_leader import fetch, leader

from kraft.core.effects import ActionTaken, StateChanged
from kraft.core.events import Tick
from kraft.core.messages import EndQuorumEpochRequest, FetchSnapshotRequest
from kraft.core.vocabulary import Action, ReplicaState
from kraft.ids import Epoch, Offset, OffsetAndEpoch

S = ReplicaState


def test_a_leader_without_fetches_from_a_majority_resigns() -> None:
    h = leader(fetch_timeout_ms=2000)
    t0 = h.now
    assert h.replica.next_deadline_ms() <= t0 + 3000
    h.step(Tick(t0 + 2999))
    assert h.view.state is S.LEADER
    effects = h.step(Tick(t0 + 3000))
    assert ActionTaken(Action.RESIGN) in effects
    assert StateChanged(S.LEADER, S.RESIGNED, Epoch(2)) in effects
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.RESIGNED, 2, 1)
    assert sorted(d for d, _ in sent(effects, EndQuorumEpochRequest)) == [2, 3]


def test_fetches_from_a_majority_keep_the_leader() -> None:
    h = leader(fetch_timeout_ms=2000)
    t0 = h.now
    for t in range(t0 + 1000, t0 + 10_000, 1000):
        h.step(Tick(t))
        h.now = t
        h.recv(2, fetch(2, 2, 3, 2))  # one follower + the leader: a majority of three
    assert h.view.state is S.LEADER
    h.step(Tick(h.now + 2999))
    assert h.view.state is S.LEADER
    h.step(Tick(h.now + 3000))
    assert h.view.state is S.RESIGNED


def test_one_voter_of_five_is_not_enough() -> None:
    h = leader(voters=(1, 2, 3, 4, 5), fetch_timeout_ms=2000)
    t0 = h.now
    for t in range(t0 + 500, t0 + 3000, 500):
        h.now = t
        h.recv(2, fetch(2, 2, 3, 2))
    h.step(Tick(t0 + 3000))
    assert h.view.state is S.RESIGNED


def test_observer_fetches_do_not_count() -> None:
    h = leader(fetch_timeout_ms=2000)
    t0 = h.now
    h.now = t0 + 1000
    h.recv(4, fetch(4, 2, 3, 2))
    h.step(Tick(t0 + 3000))
    assert h.view.state is S.RESIGNED


def test_a_fetch_snapshot_from_a_voter_counts() -> None:
    h = leader(fetch_timeout_ms=2000)
    t0 = h.now
    h.now = t0 + 2000
    req = FetchSnapshotRequest(
        CLUSTER, key(3), Epoch(2), OffsetAndEpoch(Epoch(1), Offset(2)), 0, max_bytes=1 << 20
    )
    h.recv(3, req)
    h.step(Tick(t0 + 3000))
    assert h.view.state is S.LEADER
    h.step(Tick(t0 + 2000 + 3000))
    assert h.view.state is S.RESIGNED


def test_a_single_voter_never_resigns_for_want_of_fetches() -> None:
    h = leader(voters=(1,), fetch_timeout_ms=2000)
    h.step(Tick(h.now + 1_000_000))
    assert h.view.state is S.LEADER


def test_resigned_moves_to_the_next_epoch_after_its_election_timeout() -> None:
    """Kafka pollResigned: Unattached in epoch + 1, so that no Fetch answer names this replica
    leader again; then an election from there."""
    h = leader(fetch_timeout_ms=2000, election_timeout_ms=1000)
    h.step(Tick(h.now + 3000))
    assert h.view.state is S.RESIGNED
    t = h.now = h.replica.next_deadline_ms()
    effects = h.step(Tick(t))
    assert ActionTaken(Action.ELECTION_TIMEOUT) in effects
    assert (h.view.state, h.view.epoch) == (S.UNATTACHED, 3)
    assert not of(effects, EndQuorumEpochRequest)
