"""LeaderState, the leader's bookkeeping: progress of voters and observers, the epoch's HWM,
check-quorum, and a voter set replaced while leading (KIP-856)."""

from __future__ import annotations

import uuid

from kraft.core.leader import LeaderState
from kraft.core.voter_set import VoterSet
from kraft.ids import DirectoryId, NodeId, Offset, ReplicaKey


def k(i: int) -> ReplicaKey:
    return ReplicaKey(NodeId(i), DirectoryId(uuid.UUID(int=i)))


def voters(*ids: int) -> VoterSet:
    return VoterSet(tuple(k(i) for i in ids))


def leader(*ids: int, epoch_start: int = 0, check_at: int | None = 3000) -> LeaderState:
    return LeaderState(
        k(1),
        voters(*ids),
        epoch_start=Offset(epoch_start),
        granting=(),
        check_quorum_at=check_at,
        check_quorum_ms=3000,
        begin_quorum_epoch_at=0,
        begin_quorum_epoch_ms=1000,
    )


def test_the_hwm_is_what_a_majority_reached_past_the_epoch_start_never_lowered() -> None:
    ld = leader(1, 2, 3, epoch_start=4)
    ld.voters[NodeId(2)].fetched(Offset(4), Offset(10), now=0)
    assert ld.advance_hwm(Offset(10)) is None  # a majority holds only up to the epoch start
    ld.voters[NodeId(2)].fetched(Offset(7), Offset(10), now=1)
    assert ld.advance_hwm(Offset(10)) == 7
    assert ld.hwm == 7
    ld.voters[NodeId(2)].fetched(Offset(5), Offset(10), now=2)  # cannot happen; still:
    assert ld.advance_hwm(Offset(10)) is None
    assert ld.hwm == 7


def test_set_voters_keeps_the_progress_of_voters_that_stay() -> None:
    ld = leader(1, 2, 3)
    ld.voters[NodeId(2)].fetched(Offset(6), Offset(9), now=100)
    ld.voters[NodeId(3)].fetched(Offset(8), Offset(9), now=200)
    ld.fetched |= {NodeId(3)}
    ld.observer(k(4), 300).fetched(Offset(9), Offset(9), now=300)
    assert ld.advance_hwm(Offset(9)) == 8

    ld.set_voters(voters(1, 2, 4))

    assert set(ld.voters) == {NodeId(2), NodeId(4)}
    assert ld.voter_set == voters(1, 2, 4)
    # Voter 2 stays with its progress; observer 4 became a voter and brought its own.
    assert (ld.voters[NodeId(2)].end_offset, ld.voters[NodeId(2)].last_fetch_ms) == (6, 100)
    assert (ld.voters[NodeId(4)].end_offset, ld.voters[NodeId(4)].last_fetch_ms) == (9, 300)
    # Removed voter 3 is an observer now, with its progress; 4 is no longer one.
    assert set(ld.observers) == {k(3)}
    assert ld.observers[k(3)].end_offset == 8
    # Check-quorum keeps the removed voter's Fetch until the timer next restarts (Kafka's
    # updateVoterAndObserverStates leaves fetchedVoters alone).
    assert ld.fetched == {NodeId(3)}
    # The HWM is never lowered, and moves by the new majority: {1: 9, 2: 6, 4: 9} -> 9.
    assert ld.hwm == 8
    assert ld.advance_hwm(Offset(9)) == 9


def test_set_voters_counts_new_voters_from_nothing_and_the_leader_by_membership() -> None:
    ld = leader(1, 2, 3)
    ld.voters[NodeId(2)].fetched(Offset(5), Offset(5), now=0)
    ld.voters[NodeId(3)].fetched(Offset(5), Offset(5), now=0)
    assert ld.advance_hwm(Offset(5)) == 5
    # The leader itself is removed: its own end no longer counts, a new voter 5 has none.
    ld.set_voters(voters(2, 3, 5))
    assert not ld.me_is_voter
    assert ld.voters[NodeId(5)].end_offset is None
    assert ld.advance_hwm(Offset(20)) is None
    ld.voters[NodeId(2)].fetched(Offset(12), Offset(20), now=1)
    assert ld.advance_hwm(Offset(20)) is None  # {2: 12, 3: 5, 5: none}: majority at 5
    ld.voters[NodeId(5)].fetched(Offset(10), Offset(20), now=2)
    assert ld.advance_hwm(Offset(20)) == 10


def test_check_quorum_restarts_once_a_majority_with_the_leader_fetched() -> None:
    ld = leader(1, 2, 3, 4, 5, check_at=3000)
    ld.heard_from_voter(NodeId(2), now=100)
    assert ld.check_quorum_at == 3000  # 2 of 5 with us
    ld.heard_from_voter(NodeId(3), now=200)
    assert ld.check_quorum_at == 3200  # 3 of 5 with us: restart
    assert ld.fetched == set()
    ld.set_voters(voters(1, 2, 3))
    ld.heard_from_voter(NodeId(3), now=500)
    assert ld.check_quorum_at == 3500  # 2 of 3 with us


def test_successors_are_ranked_most_caught_up_first() -> None:
    ld = leader(1, 2, 3, 4)
    ld.voters[NodeId(3)].fetched(Offset(7), Offset(9), now=0)
    ld.voters[NodeId(4)].fetched(Offset(7), Offset(9), now=0)
    assert ld.successors() == (NodeId(3), NodeId(4), NodeId(2))


def test_begin_quorum_epoch_is_due_to_the_voters_that_have_not_fetched_for_half_a_timeout() -> None:
    """Kafka's LeaderState.needToSendBeginQuorumRequests: every other voter whose last Fetch
    is at least fetch timeout / 2 old, or that never fetched."""
    ld = leader(1, 2, 3, 4)
    ld.voters[NodeId(2)].fetched(Offset(0), Offset(0), now=5000)
    ld.voters[NodeId(3)].fetched(Offset(0), Offset(0), now=4000)
    assert ld.need_to_send_begin_quorum(5999) == [NodeId(3), NodeId(4)]
    assert ld.need_to_send_begin_quorum(6000) == [NodeId(2), NodeId(3), NodeId(4)]
    ld.set_voters(voters(1, 2))
    assert ld.need_to_send_begin_quorum(5500) == []
