"""Every checker fires on a hand-built violating state and passes a correct one (none is
vacuous), plus the log helpers they rest on."""

from __future__ import annotations

from kraft.core.vocabulary import ReplicaState
from kraft.ids import Epoch, NodeId, Offset
from refinement import invariants as inv
from refinement.invariants import AckedRange, ClusterState, EpochCache, NodeState

ONE_EPOCH: EpochCache = ((Epoch(1), Offset(0)),)
L = ReplicaState.LEADER
F = ReplicaState.FOLLOWER


def cache(*pairs: tuple[int, int]) -> EpochCache:
    return tuple((Epoch(e), Offset(s)) for e, s in pairs)


def node(
    nid: int,
    *,
    state: ReplicaState | None = F,
    epoch: int = 1,
    epochs: EpochCache = ONE_EPOCH,
    end: int = 10,
    hwm: int | None = None,
    max_hwm: int | None = None,
    flushed: int | None = None,
    view_end: int | None = None,
    incarnation: int = 0,
    leader: int | None = None,
) -> NodeState:
    last = epochs[-1][0] if epochs else Epoch(0)
    return NodeState(
        node_id=NodeId(nid),
        incarnation=incarnation,
        state=state,
        epoch=Epoch(epoch),
        leader_id=None if leader is None else NodeId(leader),
        end_offset=Offset(end if view_end is None else view_end),
        last_epoch=last,
        high_watermark=None if hwm is None else Offset(hwm),
        max_high_watermark=Offset(max_hwm) if max_hwm is not None else None,
        log_end_offset=Offset(end),
        log_last_epoch=last,
        flushed_offset=Offset(end if flushed is None else flushed),
        epochs=epochs,
    )


def cluster(*nodes: NodeState, **kw: object) -> ClusterState:
    return ClusterState(
        nodes={n.node_id: n for n in nodes},
        voters=frozenset(n.node_id for n in nodes),
        **kw,  # type: ignore[arg-type]
    )


# --------------------------------------------------------------------------- log helpers


def test_epoch_at_finds_the_epoch_of_the_last_entry_starting_at_or_before() -> None:
    c = cache((1, 0), (3, 4), (5, 9))
    assert inv.epoch_at(c, Offset(12), Offset(0)) == 1
    assert inv.epoch_at(c, Offset(12), Offset(3)) == 1
    assert inv.epoch_at(c, Offset(12), Offset(4)) == 3
    assert inv.epoch_at(c, Offset(12), Offset(11)) == 5
    assert inv.epoch_at(c, Offset(12), Offset(12)) is None  # at the end: not held
    assert inv.epoch_at((), Offset(0), Offset(0)) is None


def test_common_prefix() -> None:
    a = cache((1, 0), (2, 5))
    assert inv.common_prefix(a, Offset(10), a, Offset(7)) == 7  # same history, shorter log
    assert inv.common_prefix(a, Offset(10), cache((1, 0), (3, 5)), Offset(9)) == 5
    assert inv.common_prefix(a, Offset(10), cache((1, 0), (2, 6)), Offset(9)) == 5
    assert inv.common_prefix(a, Offset(10), cache((1, 0)), Offset(8)) == 5
    assert inv.common_prefix(a, Offset(10), cache((4, 0)), Offset(8)) == 0


# --------------------------------------------------------------------------- ElectionSafety


def test_election_safety_fires_on_two_leaders_in_one_epoch() -> None:
    s = cluster(node(1, state=L, epoch=3), node(2, state=L, epoch=3), leaders={3: {1, 2}})
    v = inv.election_safety(s)
    assert v is not None and v.name == "ElectionSafety"
    assert inv.election_safety(s, NodeId(2)) is not None


def test_election_safety_passes_one_leader_per_epoch() -> None:
    s = cluster(node(1, epoch=4), node(2, state=L, epoch=4), leaders={3: {1}, 4: {2}})
    assert inv.election_safety(s) is None
    assert inv.election_safety(s, NodeId(2)) is None


# --------------------------------------------------------------------------- EpochMonotonic


def test_epoch_monotonic_fires_when_a_restart_forgets_the_epoch() -> None:
    before = cluster(node(1, epoch=5))
    after = cluster(node(1, state=None, epoch=4, incarnation=1))
    v = inv.epoch_monotonic(before, after)
    assert v is not None and v.name == "EpochMonotonic"


def test_epoch_monotonic_passes_a_rising_epoch() -> None:
    assert inv.epoch_monotonic(cluster(node(1, epoch=5)), cluster(node(1, epoch=6))) is None


# --------------------------------------------------------------------------- HWM monotonic


def test_high_watermark_monotonic_fires_on_a_lower_hwm_in_one_incarnation() -> None:
    before = cluster(node(1, hwm=None, max_hwm=10))  # unknown for now, but 10 was exposed
    after = cluster(node(1, hwm=8, max_hwm=10))
    v = inv.high_watermark_monotonic(before, after)
    assert v is not None and v.name == "HighWatermarkMonotonic"


def test_high_watermark_monotonic_allows_unknown_and_a_fresh_incarnation() -> None:
    before = cluster(node(1, hwm=10, max_hwm=10))
    assert inv.high_watermark_monotonic(before, cluster(node(1, hwm=None, max_hwm=10))) is None
    assert inv.high_watermark_monotonic(before, cluster(node(1, hwm=12, max_hwm=12))) is None
    # Kafka does not persist the HWM: after a restart it may be learned lower.
    restarted = cluster(node(1, hwm=4, max_hwm=4, incarnation=1))
    assert inv.high_watermark_monotonic(before, restarted) is None


# --------------------------------------------------------------------------- FetchedHWM


def fetched(hwm: int, *, src: int = 2, leader: int = 2, epoch: int = 3, ok: bool = True):  # type: ignore[no-untyped-def]
    return inv.FetchedHighWatermark(
        NodeId(src), NodeId(1), NodeId(leader), Epoch(epoch), Offset(hwm), ok
    )


def test_fetched_hwm_monotonic_fires_on_a_lower_hwm_from_the_current_leader() -> None:
    """A follower holding HWM 54 gets 53 from the leader of its epoch: Kafka's follower dies
    ("Non-monotonic update of high watermark from 54 to 53")."""
    receiver = node(1, epoch=3, leader=2, hwm=54)
    v = inv.fetched_high_watermark_monotonic(receiver, fetched(53))
    assert v is not None and v.name == "FetchedHighWatermarkMonotonic"
    assert "54" in v.detail and "53" in v.detail


def test_fetched_hwm_monotonic_passes_what_a_follower_may_receive() -> None:
    receiver = node(1, epoch=3, leader=2, hwm=54)
    check = inv.fetched_high_watermark_monotonic
    assert check(receiver, fetched(54)) is None
    assert check(receiver, fetched(60)) is None
    assert check(receiver, fetched(-1)) is None  # a new leader with no HWM yet
    assert check(receiver, fetched(53, ok=False)) is None  # an error answer
    assert check(receiver, fetched(53, epoch=2)) is None  # another epoch's leader
    assert check(receiver, fetched(53, src=3, leader=3)) is None  # not our leader
    assert check(node(1, epoch=3, leader=2, hwm=None), fetched(0)) is None
    assert check(node(1, state=None, epoch=3, leader=2, hwm=54), fetched(53)) is None


# --------------------------------------------------------------------------- MajorityReachedHWM


def test_majority_reached_hwm_fires_when_only_the_leader_holds_it() -> None:
    leader = node(1, state=L, epoch=2, epochs=cache((1, 0), (2, 5)), hwm=8)
    other = node(2, epoch=3, epochs=cache((1, 0), (3, 5)), end=9)  # diverged at 5
    behind = node(3, epoch=2, epochs=cache((1, 0)), end=5)
    v = inv.majority_reached_high_watermark(cluster(leader, other, behind))
    assert v is not None and v.name == "MajorityReachedHighWatermark"


def test_majority_reached_hwm_counts_only_flushed_records() -> None:
    leader = node(1, state=L, epoch=2, epochs=cache((1, 0), (2, 5)), hwm=8)
    unflushed = node(2, epoch=2, epochs=cache((1, 0), (2, 5)), flushed=6)
    behind = node(3, epoch=2, epochs=cache((1, 0)), end=5)
    assert inv.majority_reached_high_watermark(cluster(leader, unflushed, behind)) is not None


def test_majority_reached_hwm_passes_with_a_durable_majority() -> None:
    leader = node(1, state=L, epoch=2, epochs=cache((1, 0), (2, 5)), hwm=8)
    caught_up = node(2, epoch=2, epochs=cache((1, 0), (2, 5)), end=8)
    behind = node(3, epoch=2, epochs=cache((1, 0)), end=5)
    s = cluster(leader, caught_up, behind)
    assert inv.majority_reached_high_watermark(s) is None
    assert inv.majority_reached_high_watermark(s, NodeId(3)) is None


# --------------------------------------------------------------------------- LogMatching


def test_log_matching_fires_on_same_epoch_after_a_difference() -> None:
    a = node(1, epochs=cache((1, 0), (2, 5)))
    b = node(2, epochs=cache((1, 0), (2, 6)))  # offset 5 differs, offset 6.. both epoch 2
    v = inv.log_matching(cluster(a, b))
    assert v is not None and v.name == "LogMatching"
    assert inv.log_matching(cluster(a, b), NodeId(2)) is not None


def test_log_matching_passes_diverged_suffixes_of_different_epochs() -> None:
    a = node(1, epochs=cache((1, 0), (2, 5)))
    b = node(2, epochs=cache((1, 0), (3, 5)), end=8)
    c = node(3, epochs=cache((1, 0)), end=4)
    assert inv.log_matching(cluster(a, b, c)) is None


# --------------------------------------------------------------------------- CommittedNeverLost


ACKED = (AckedRange(Offset(3), Offset(4), Epoch(2)),)


def test_committed_never_lost_fires_on_a_later_leader_without_it() -> None:
    leader = node(1, state=L, epoch=3, epochs=cache((1, 0), (3, 3)))
    v = inv.committed_never_lost(cluster(leader, acknowledged=ACKED))
    assert v is not None and v.name == "CommittedNeverLost"


def test_committed_never_lost_fires_below_a_replica_hwm() -> None:
    replica = node(2, epoch=3, epochs=cache((1, 0), (3, 3)), hwm=5)
    assert inv.committed_never_lost(cluster(replica, acknowledged=ACKED)) is not None


def test_committed_never_lost_passes_holders_zombies_and_replicas_below() -> None:
    holder = node(1, state=L, epoch=3, epochs=cache((1, 0), (2, 3), (3, 6)))
    zombie = node(2, state=L, epoch=1, epochs=cache((1, 0)))  # leader of an older epoch
    lagging = node(3, epoch=3, epochs=cache((1, 0)), end=3, hwm=3)  # HWM below the ack
    s = cluster(holder, zombie, lagging, acknowledged=ACKED)
    assert inv.committed_never_lost(s) is None


# --------------------------------------------------------------------------- LogMirror


def test_log_mirror_fires_when_the_replica_and_its_log_disagree() -> None:
    v = inv.log_mirror(cluster(node(1, end=9, view_end=10)))
    assert v is not None and v.name == "LogMirror"


def test_log_mirror_passes_agreement_and_ignores_down_nodes() -> None:
    assert inv.log_mirror(cluster(node(1), node(2, state=None, end=9, view_end=10))) is None


def test_check_all_reports_every_broken_invariant() -> None:
    a = node(1, state=L, epoch=2, epochs=cache((1, 0), (2, 5)), hwm=8, view_end=11)
    b = node(2, state=L, epoch=2, epochs=cache((1, 0), (2, 6)))
    names = {v.name for v in inv.check_all(None, cluster(a, b, leaders={2: {1, 2}}))}
    assert names == {"ElectionSafety", "LogMatching", "LogMirror", "MajorityReachedHighWatermark"}


# --------------------------------------------------------------------------- OneVotePerEpoch


def granted(voter: int, candidate: int, epoch: int, disk: int = 0) -> inv.GrantedVote:
    return inv.GrantedVote(NodeId(voter), disk, NodeId(candidate), Epoch(epoch))


def test_one_vote_per_epoch_fires_on_a_second_candidate_in_the_same_epoch() -> None:
    """KIP-595 "Vote": a replica grants at most one candidate its vote in an epoch."""
    cast: inv.VotesCast = {}
    assert inv.one_vote_per_epoch(cast, granted(1, 3, epoch=1)) is None
    v = inv.one_vote_per_epoch(cast, granted(1, 2, epoch=1))
    assert v is not None and v.name == "OneVotePerEpoch"
    assert "epoch 1" in v.detail and "3" in v.detail and "2" in v.detail


def test_one_vote_per_epoch_passes_retries_other_epochs_and_other_replicas() -> None:
    cast: inv.VotesCast = {}
    for vote in (
        granted(1, 3, epoch=1),
        granted(1, 3, epoch=1),  # the same candidate again: a retried request
        granted(1, 2, epoch=2),  # another epoch
        granted(2, 3, epoch=1),  # another voter
        granted(1, 2, epoch=1, disk=1),  # node 1 after a disk loss: another replica (KIP-853)
    ):
        assert inv.one_vote_per_epoch(cast, vote) is None, vote
