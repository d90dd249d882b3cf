"""A replica built but not yet started answers its read-only queries (view, next deadline,
describe_quorum, has_fetched_from_leader) from what it was built with: Unattached in the
stored epoch, no leader and no vote, no timer running, not leading, nothing fetched.

A driver or checker may ask these before start() (e.g. to trace the initial state or to
schedule its first tick); they must not fail nor report a state the replica is not in."""

from __future__ import annotations

from hand_driven import replica_over

from kraft.core.effects import ElectionState
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.ids import ClusterId, Epoch, NodeId
from kraft.storage.memory_log import MemoryLog

CLUSTER = ClusterId("init-cluster")
S = ReplicaState


def test_unstarted_replica_view_is_unattached_in_the_stored_epoch_without_a_vote() -> None:
    r = replica_over(
        MemoryLog(),
        CLUSTER,
        (1, 2, 3),
        election_state=ElectionState(Epoch(7)),
        start_ms=1_000,
    )
    v = r.view()
    assert v.state is S.UNATTACHED
    assert v.epoch == 7
    assert v.leader_id is None
    assert v.voted_for is None
    assert v.high_watermark is None


def test_unstarted_replica_runs_no_timer_so_its_deadline_is_one_election_timeout_away() -> None:
    timing = QuorumTiming()
    for voters in ((1, 2, 3), (1,)):  # a voter with peers, and the only voter
        r = replica_over(MemoryLog(), CLUSTER, voters, timing=timing, start_ms=1_000)
        assert r.next_deadline_ms() == 1_000 + timing.election_timeout_ms


def test_unstarted_replica_does_not_lead_and_has_not_fetched_from_a_leader() -> None:
    r = replica_over(
        MemoryLog(),
        CLUSTER,
        (1, 2, 3),
        election_state=ElectionState(Epoch(7), leader_id=NodeId(2)),
        start_ms=1_000,
    )
    assert r.describe_quorum() is None
    assert r.has_fetched_from_leader is False
